"""`kernlint run` and `kernlint audit` on the CPU: capture layout, run metadata, verdicts, exit codes."""
from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
from click.testing import CliRunner

from conftest import FIXTURES, PROGRAMS, load_program
from kernlint.audit import run_audit
from kernlint.cli import main
from kernlint.rules.loader import load_rules
from kernlint.workloads import Workload


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def test_run_writes_the_tensorboard_layout_and_run_metadata(tmp_path):
    result = invoke("run", f"{PROGRAMS / 'placeholder_new_ones.py'}:build", "--device", "cpu", "--out",
                    tmp_path, "--format", "json", "-o", tmp_path / "report.json")
    assert result.exit_code == 1, result.output
    (run_dir,) = (tmp_path / "build").iterdir()  # each invocation: a run folder of its own
    assert re.fullmatch(r"\d{8}T\d{6}\.\d{6}Z-[0-9a-f]{6}", run_dir.name)
    (trace,) = run_dir.glob("*.pt.trace.json.gz")
    assert re.fullmatch(r".+_\d+\.\d{13}\.pt\.trace\.json\.gz", trace.name)
    (meta_file,) = run_dir.glob("*.run.json")
    meta = json.loads(meta_file.read_text())
    assert meta["device"] == "cpu" and meta["torch"].startswith("2.") and meta["trace"] == trace.name
    assert meta["cpu"]["logical_cores"] >= 1
    assert meta["nvml"]["available"] in (True, False) and ("reason" in meta["nvml"] or "devices" in meta["nvml"])
    report = json.loads((tmp_path / "report.json").read_text())
    assert [f["rule"] for f in report["findings"]] == ["KL001"]


def test_run_fixed_program_exits_zero(tmp_path):
    result = invoke("run", f"{PROGRAMS / 'placeholder_new_empty.py'}:build", "--device", "cpu", "--out", tmp_path)
    assert result.exit_code == 0, result.output


def test_run_usage_errors_are_one_line_exit_2(tmp_path):
    for args, needle in [
        (("run", "no-such-workload"), "unknown workload"),
        (("run", tmp_path / "missing.py:build"), "no such Python file"),
        (("run", f"{PROGRAMS / 'placeholder_new_ones.py'}:nope"), "has no callable"),
    ]:
        result = invoke(*args, "--device", "cpu", "--out", tmp_path)
        assert result.exit_code == 2, (args, result.output)
        assert needle in result.output and "Traceback" not in result.output


def test_run_reports_a_failing_workload_in_one_line(tmp_path):
    user = tmp_path / "user_workload.py"
    user.write_text("def build(device):\n    def step():\n        raise RuntimeError('boom')\n    return step\n")
    result = invoke("run", f"{user}:build", "--device", "cpu", "--out", tmp_path / "o")
    assert result.exit_code == 2 and "the workload raised RuntimeError: boom" in result.output


def test_audit_runs_fixed_and_regressed_workloads_on_the_cpu(tmp_path):
    """One CPU audit with the regressed variants: its JSON verdicts, and the HTML report written beside it."""
    html = tmp_path / "audit.html"
    result = invoke("audit", "--device", "cpu", "--include-regressed", "--format", "json", "--html", html,
                    "--isolated")
    data = json.loads(result.output[result.output.index("{"):])
    assert result.exit_code == 0, data
    verdicts = {w["workload"]: w["verdicts"] for w in data["workloads"]}
    assert verdicts["fp8-block-linear"]["KL001"] == "passed"
    assert verdicts["fp8-dummy-init"]["KL002"] == "passed"
    assert verdicts["fp8-block-linear-new-ones"]["KL001"] == "failed"
    assert verdicts["fp8-dummy-init-old"]["KL002"] == "failed"
    # the tensor-parallel workloads run on two gloo ranks, so the cross-rank rules apply
    assert verdicts["fp8-tp-mlp"]["KL003"] == "passed"
    assert verdicts["fp8-tp-mlp-rank1-sync"]["KL004"] == "failed"
    assert {w["workload"]: w["ranks"] for w in data["workloads"]}["fp8-tp-mlp"] == 2
    assert data["all_as_expected"] is True
    # GPU-only workloads are said to be left out, with why: never dropped silently.
    not_run = {w["workload"]: w["reason"] for w in data["not_run"]}
    compiled = "the compiled decoder runs on a GPU (Triton kernels)"
    assert not_run == {"fp8-dummy-init-fused": "needs a CUDA GPU", "fp8-decoder-graph": "CUDA graphs need a GPU",
                       "fp8-decoder-graph-new-ones": "CUDA graphs need a GPU",
                       **{f"fp8-decoder-compiled{v}": compiled
                          for v in ("", "-new-ones", "-graphs", "-graphs-new-ones")}}
    page = html.read_text(encoding="utf-8")
    section = page[page.index('<section id="workloads">'):page.index("</section>")]
    for name in verdicts:
        assert f'data-workload="{name}"' in section
    # Every trace of the audit is in the report: one per single-rank workload, one per rank of the others.
    assert page.count('<h3 class="mono">') == sum(w["ranks"] for w in data["workloads"]) == 12
    assert '<section id="allocations">' in page and "torch" in page


def test_audit_text_says_what_it_left_out():
    import io

    from rich.console import Console

    from kernlint.audit import AuditRun
    from kernlint.report import audit_renderer

    run = AuditRun(device="cpu", metadata={}, verdicts=[], out_dir=None,
                   not_run=[("fp8-decoder-graph", "CUDA graphs need a GPU")])
    console = Console(file=io.StringIO(), width=200, no_color=True)
    console.print(audit_renderer("text")(run))
    text = console.file.getvalue()
    assert "not run on cpu: fp8-decoder-graph (CUDA graphs need a GPU)" in text


@pytest.mark.gpu
@pytest.mark.parametrize("name, expect", [("fp8-decoder-graph", "passed"), ("fp8-decoder-graph-new-ones", "failed")])
def test_the_decoder_graph_workload_is_judged_replay_by_replay(tmp_path, name, expect):
    from kernlint.audit import capture_workload
    from kernlint.trace.graphs import graph_replays
    from kernlint.trace.load import load_trace
    from kernlint.workloads import known_workloads

    traces, _ = capture_workload(known_workloads()[name], "cuda", tmp_path)
    table = load_trace(traces[0])
    stats = graph_replays(table)
    assert stats.replays == 2 and stats.attributed_kernels == stats.kernels > 0
    run = run_audit([known_workloads()[name]], load_rules(), "cuda", tmp_path / "audit")
    verdict = run.verdicts[0]
    assert verdict.ok, verdict.problems
    kl001 = next(o for o in verdict.report.outcomes if o.rule == "KL001")
    assert kl001.status == expect
    if expect == "failed":   # 2 replays x 8 linears, each at the placeholder's line
        assert len(kl001.findings) == 16
        # The path as the module was imported (regressed/... or fixtures/regressed/..., by the session's sys.path).
        assert all(f.source.endswith("regressed/fp8_linear_new_ones.py:17") for f in kl001.findings)


def test_a_regression_in_a_fixed_workload_fails_the_audit(tmp_path):
    sneaky = Workload("sneaky", "a fixed workload that regressed", load_program("placeholder_new_ones").build,
                      expect={"KL001": "passed"}, target=f"{PROGRAMS / 'placeholder_new_ones.py'}:build")
    run = run_audit([sneaky], load_rules(), "cpu", tmp_path)
    assert not run.all_as_expected
    # placeholder_new_ones fills its placeholder scale (aten::new_ones) once before the 1x128 quant: one problem
    (problem,) = run.verdicts[0].problems
    assert problem.startswith("KL001: expected passed, got failed (aten::new_ones")


@pytest.mark.parametrize("body, what", [
    ("import time\ndef build(device):\n    return lambda: time.sleep(600)\n",
     "did not finish within 2 s"),
    ("import os\ndef build(device):\n    def step():\n        os._exit(0)\n    return step\n", "os._exit()"),
])
def test_an_audit_workload_runs_in_its_own_process_and_one_that_hangs_or_exits_is_an_error(tmp_path, body, what):
    """issue 22: the audit's workloads run apart from kernlint, under a time limit."""
    from kernlint.audit import WorkloadProcess
    from kernlint.errors import WorkloadError

    (tmp_path / "w.py").write_text(body)
    bad = Workload("bad", "hangs or exits", lambda device: None, target=f"{tmp_path / 'w.py'}:build")
    printed = []
    with pytest.raises(WorkloadError, match=re.escape(what)):
        run_audit([bad], load_rules(), "cpu", tmp_path / "out",
                  process=WorkloadProcess(timeout_s=2, on_output=printed.append))


def test_not_applicable_is_never_taken_for_passed(tmp_path):
    wrong_anchor = Workload("no-quant", "no quantization at all", load_program("dummy_init_fixed").build,
                            expect={"KL001": "passed"}, target=f"{PROGRAMS / 'dummy_init_fixed.py'}:build")
    run = run_audit([wrong_anchor], load_rules(), "cpu", tmp_path)
    (verdict,) = run.verdicts
    # dummy_init_fixed has no 1x128 activation quantization at all (only fp16 -> fp8 weight copies), so KL001's
    # anchor is absent: the rule cannot apply. Nothing else in it is a regression (KL002, its own rule, passes).
    outcomes = {o.rule: o.status for o in verdict.report.outcomes}
    assert outcomes["KL001"] == "not-applicable" and outcomes["KL002"] == "passed"
    assert "failed" not in outcomes.values() and "incomplete" not in outcomes.values()
    # so the one problem is the KL001 expectation, said as not-applicable and not taken for a pass
    (problem,) = verdict.problems
    assert problem.startswith("KL001: expected passed, got not-applicable (")
    assert "@act-quant-1x128-op" in problem   # the missing anchor, named by the rule's own scope
    assert not verdict.ok and not run.all_as_expected


def test_a_single_rank_audit_skips_the_cross_rank_expectations(tmp_path, monkeypatch):
    """One GPU: the tensor-parallel workload runs on one rank and KL003 cannot apply; that is no failure."""
    import kernlint.audit as audit
    from kernlint.workloads import BUILTIN_WORKLOADS

    monkeypatch.setattr(audit, "audit_ranks", lambda device: 1)
    run = run_audit([BUILTIN_WORKLOADS["fp8-tp-mlp"]], load_rules(), "cpu", tmp_path)
    (verdict,) = run.verdicts
    assert verdict.ranks == 1 and verdict.ok, verdict.problems
    outcomes = {o.rule: o for o in verdict.report.outcomes}
    assert outcomes["KL001"].status == "passed"
    assert outcomes["KL003"].status == "not-applicable"


def test_an_audit_that_fails_leaves_no_rank_running(tmp_path, monkeypatch):
    """The ranks start before the other workloads run; when one of those fails, the ranks are stopped."""
    import kernlint.audit as audit
    from kernlint.workloads import BUILTIN_WORKLOADS

    started = []

    def start_ranks(*args, **kwargs):
        started.append(audit_start_ranks(*args, **kwargs))
        return started[-1]

    def broken(*args, **kwargs):
        raise RuntimeError("the GPU fell off")

    audit_start_ranks = audit.start_ranks
    monkeypatch.setattr(audit, "start_ranks", start_ranks)
    monkeypatch.setattr(audit, "capture_workload", broken)
    with pytest.raises(RuntimeError, match="fell off"):
        run_audit([BUILTIN_WORKLOADS["fp8-tp-mlp"], BUILTIN_WORKLOADS["fp8-dummy-init"]], load_rules(), "cpu",
                  tmp_path)
    assert len(started) == 1 and all(p.poll() is not None for p in started[0]._procs)


def test_profiling_leaves_inductor_unimported_and_torch_as_it_was(tmp_path):
    """The profiler's start would import torch._inductor (seconds) only to read one of its settings."""
    code = ("import sys, torch\n"
            "lazy = torch.__getattr__\n"
            "from kernlint.capture.profiler import record_trace\n"
            "record_trace(lambda: torch.ones(4) + 1, sys.argv[1], device='cpu')\n"
            "assert 'torch._inductor' not in sys.modules, 'inductor was imported'\n"
            "assert torch.__getattr__ is lazy\n"
            "assert torch._inductor is not None  # still importable on demand\n")
    proc = subprocess.run([sys.executable, "-c", code, str(tmp_path / "t.pt.trace.json.gz")], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]


@pytest.mark.parametrize("baseline", [None, "a baseline"])
def test_ranks_start_first_unless_timings_are_compared(tmp_path, monkeypatch, baseline):
    """Without a baseline the ranks start before the other workloads run (they overlap); with one, where
    kernel durations are compared, nothing runs beside a profiled workload."""
    import kernlint.audit as audit
    from kernlint.workloads import BUILTIN_WORKLOADS

    order = []

    class Launch:
        def finished(self):
            return False   # waited for only after the single-process workloads

        def wait(self):
            order.append("ranks done")
            return []

        def stop(self):
            pass

    def start_ranks(name, *args, **kwargs):
        order.append(f"start {name}")
        return Launch()

    def capture_workload(workload, *args, **kwargs):
        order.append(f"capture {workload.name}")
        return [], 1

    monkeypatch.setattr(audit, "start_ranks", start_ranks)
    monkeypatch.setattr(audit, "capture_workload", capture_workload)
    monkeypatch.setattr(audit, "_checked", lambda w, device, *a: (audit.WorkloadVerdict(w, device), []))
    monkeypatch.setattr(audit, "workload_programs", lambda *a: {})
    run_audit([BUILTIN_WORKLOADS["fp8-dummy-init"], BUILTIN_WORKLOADS["fp8-tp-mlp"]], [], "cpu", tmp_path,
              baseline=baseline)
    if baseline is None:
        assert order == ["start fp8-tp-mlp", "capture fp8-dummy-init", "ranks done"]
    else:
        assert order == ["capture fp8-dummy-init", "start fp8-tp-mlp", "ranks done"]


@pytest.mark.gpu
@pytest.mark.parametrize("name, expect, fills", [
    ("fp8-decoder-compiled", "passed", 0), ("fp8-decoder-compiled-new-ones", "failed", 8),
    ("fp8-decoder-compiled-graphs", "passed", 0), ("fp8-decoder-compiled-graphs-new-ones", "failed", 8)])
def test_the_compiled_decoder_keeps_the_placeholder_and_kl001_judges_its_graph(tmp_path, name, expect, fills):
    """Under torch.compile the placeholder reaches the custom op as an argument: the compiler keeps new_ones'
    fill (one 1-element kernel per linear) and KL001 finds it from the compiled graph's kernel order."""
    from kernlint.workloads import known_workloads

    run = run_audit([known_workloads()[name]], load_rules(), "cuda", tmp_path / "audit")
    verdict = run.verdicts[0]
    assert verdict.ok, verdict.problems
    kl001 = next(o for o in verdict.report.outcomes if o.rule == "KL001")
    assert kl001.status == expect and len(kl001.findings) == fills


@pytest.mark.parametrize("status, ranks, problems", [
    ("failed", 1, []), ("passed", 1, []),                  # one rank: ANY_VERDICT asserts nothing of KL401
    ("passed", 2, ["KL401: expected failed, got passed"]),  # two ranks: the workload's own expectation holds
    (None, 1, ["KL401 was not run"]),                       # but the rule must still have run
])
def test_an_any_verdict_expectation_asserts_nothing_but_that_the_rule_ran(status, ranks, problems):
    from kernlint.audit import compare_with_expectation
    from kernlint.rules.result import RuleOutcome, TraceReport
    from kernlint.workloads import ANY_VERDICT, Workload

    workload = Workload(name="w", summary="", build=lambda device: (lambda: None), expect={"KL401": "failed"},
                        distributed=True, expect_one_rank={"KL401": ANY_VERDICT})
    outcomes = [] if status is None else [RuleOutcome("KL401", "sync", "error", status)]
    report = TraceReport("t.json", 1, True, True, 0, outcomes)
    assert [p.split(" (")[0] for p in compare_with_expectation(workload, report, ranks)] == problems


def test_the_audit_walks_the_workloads_registry(monkeypatch):
    """Issue 39: the audit ran BUILTIN_WORKLOADS only: a workload another package registers (entry point group
    `kernlint.workloads`) could be `run`, never audited. Now every registered workload with `audited` set."""
    from kernlint.audit import audit_workloads
    from kernlint.workloads import BUILTIN_WORKLOADS, WORKLOADS, Workload

    names = [w.name for w in audit_workloads("cpu")]
    assert names == [w.name for w in BUILTIN_WORKLOADS.values() if "cpu" in w.devices]
    items = dict(WORKLOADS.items())   # loaded: built-ins first
    step = lambda device: (lambda: None)   # noqa: E731
    items["their-layer"] = Workload(name="their-layer", summary="a plugin's", build=step, expect={"KL001": "passed"})
    items["their-helper"] = Workload(name="their-helper", summary="run only", build=step, audited=False)
    monkeypatch.setattr(WORKLOADS, "_items", items)
    assert [w.name for w in audit_workloads("cpu")] == [*names, "their-layer"]


def test_the_regressed_workloads_are_a_plugin_of_the_workloads_registry():
    """Issue 39: the regressed variants load through the workloads registry, a plugin module of the checkout's
    fixtures imported by its path (never by putting fixtures/ on sys.path), registering on import; the audit
    runs them only with --include-regressed, however often they were loaded."""
    from kernlint.audit import audit_workloads
    from kernlint.workloads import WORKLOADS, known_workloads, regressed_workloads
    from kernlint.workloads.base import REGRESSED_PLUGIN

    path = str(sys.path)
    regressed = regressed_workloads()
    assert "fp8-block-linear-new-ones" in regressed and all(w.regressed for w in regressed.values())
    assert regressed_workloads() == regressed and str(sys.path) == path   # loaded once, by its path
    for name, workload in regressed.items():
        assert WORKLOADS.get(name) is workload and not WORKLOADS.is_builtin(name)
        assert WORKLOADS.origin(name) == f"workload plugin 'regressed' ({FIXTURES / REGRESSED_PLUGIN})"
    assert set(regressed) <= set(known_workloads()) and not set(regressed) & set(known_workloads(False))
    fixed = [w.name for w in audit_workloads("cpu")]
    assert not set(fixed) & set(regressed)
    both = [w.name for w in audit_workloads("cpu", include_regressed=True)]
    assert both[:len(fixed)] == fixed
    assert set(both[len(fixed):]) == {n for n, w in regressed.items() if "cpu" in w.devices}
