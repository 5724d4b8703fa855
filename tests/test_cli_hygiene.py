"""The CLI's reliability: never a clean verdict on input that was not fully checked (exit 4), output that a
trace cannot turn against the terminal, one line on stderr for every user error, no NaN in JSON, an order
that the order of events cannot change."""
from __future__ import annotations

import json
import os
import random
import re
import time

import pytest
from click.testing import CliRunner

from fresh_cli import run_fresh
from kernlint.cli import main

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HOSTILE = ["evil\x1b]0;pwned\x07_kernel", "wipe\x1b[2J_kernel", "x\nFound 0 finding(s) in 1 trace(s) with 4 rule(s).",
           "c1\x9b31m_kernel"]
# Control characters a terminal acts on; "\n" is left out, as it separates the output's own lines.
_CONTROL = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f]")


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def cli(*args, cwd=None):
    """`python -m kernlint.cli ARGS` in a subprocess: what a shell sees."""
    env = {**os.environ, "PYTHONPATH": REPO_ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return run_fresh(args, cwd=cwd, env=env, timeout=300)


def _clean_trace(path):
    """A trace with one CPU op: every rule is not applicable, so the check is clean (exit 0)."""
    path.write_text(json.dumps({"traceEvents": [
        {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": 0, "dur": 1}]}))
    return path


def _hostile_events(names=HOSTILE):
    """KL001 at kernel level: inside `nn.Module: Linear_0`, each kernel of `names` (launched by
    aten::fill_) runs before a scale_1x128_kernel launch: one finding a name."""
    events = [{"ph": "X", "cat": "python_function", "name": "nn.Module: Linear_0", "pid": 1, "tid": 1, "ts": 0,
               "dur": 1000}]
    ts = 10
    for i, name in enumerate(names, start=1):
        events += [
            {"ph": "X", "cat": "cpu_op", "name": "aten::fill_", "pid": 1, "tid": 1, "ts": ts, "dur": 5},
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": ts + 1,
             "dur": 2, "args": {"correlation": i}},
            {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": 500 + ts, "dur": 1,
             "args": {"correlation": i}},
        ]
        ts += 10
    events += [
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": ts, "dur": 2,
         "args": {"correlation": 99}},
        {"ph": "X", "cat": "kernel", "name": "scale_1x128_kernel", "pid": 0, "tid": 7, "ts": 900, "dur": 1,
         "args": {"correlation": 99}},
    ]
    return events


# -- 1. incomplete verdicts and exit code 4 -------------------------------------------------------------


def _says_clean(output: str) -> bool:
    """The clean summary line (`kernlint: 1 trace, 4 rules: all passed` / `...: no findings (...)`)."""
    return bool(re.search(r"^kernlint: \d+ traces?, \d+ rules?: (all passed|no findings)", output, re.M))


def _folder_with_unreadable_entries(tmp_path):
    folder = tmp_path / "logs"
    folder.mkdir()
    _clean_trace(folder / "rank0.json")
    (folder / "gone.json").symlink_to(tmp_path / "does-not-exist.json")      # dangling link
    os.mkfifo(folder / "pipe.json")                                          # never opened
    (folder / "broken.json.gz").write_bytes(b"\x1f\x8b" + b"not gzip at all")  # unreadable gzip
    return folder


def test_unreadable_folder_entries_exit_4_and_are_named(tmp_path):
    folder = _folder_with_unreadable_entries(tmp_path)
    result = invoke("check", folder)
    assert result.exit_code == 4, result.output
    assert not _says_clean(result.output)
    assert "could not be read" in result.output
    for name in ("gone.json", "pipe.json", "broken.json.gz"):
        assert name in result.output
    data = json.loads(invoke("check", folder, "--format", "json").output)
    assert data["exit_code"] == 4 and data["summary"]["unreadable"] == 3
    assert sorted(s["path"].rsplit("/", 1)[-1] for s in data["skipped"] if s["unreadable"]) == [
        "broken.json.gz", "gone.json", "pipe.json"]


def test_allow_incomplete_exits_0_and_the_report_still_says_what(tmp_path):
    folder = _folder_with_unreadable_entries(tmp_path)
    result = invoke("check", "--allow-incomplete", folder)
    assert result.exit_code == 0
    assert "could not be read" in result.output and not _says_clean(result.output)


def test_files_read_that_are_not_traces_do_not_make_a_check_incomplete(tmp_path):
    folder = tmp_path / "logs"
    folder.mkdir()
    _clean_trace(folder / "rank0.json")
    (folder / "rank0.run.json").write_text(json.dumps({"torch": "2.11"}))
    (folder / "random.json").write_text(json.dumps({"lr": 0.1}))
    (folder / "empty.json").write_text("")
    result = invoke("check", folder)
    assert result.exit_code == 0, result.output
    (line,) = result.output.splitlines()   # a clean check is one line, which counts what it skipped
    # kernlint's own rank0.run.json is known run metadata: not a trace, not "skipped" either
    assert line.startswith("kernlint: 1 trace, ") and "skipped 2 files that are not a trace" in line
    assert "Skipped 2 file(s)" in invoke("check", "-v", folder).output
    data = json.loads(invoke("check", folder, "--format", "json").output)
    assert [s["unreadable"] for s in data["skipped"]] == [False, False]
    assert data["summary"]["unreadable"] == 0




LOST_LAUNCH = "1 device event with no launch inside the window"   # the damage in the incomplete_kl001 trace


def test_an_incomplete_verdict_exits_4_and_is_never_a_clean_summary(incomplete_kl001):
    """The fill kernel's launch record is gone: KL001 cannot place the fill, so it says it could not fully
    check (not passed), as do the other three rules that read device events (KL203, KL501, KL701; KL203
    copy-after-fp8-quant, added in issue 37, reads the quant kernels' device events too)."""
    trace = incomplete_kl001
    result = invoke("check", trace)
    assert result.exit_code == 4
    assert not _says_clean(result.output)
    assert (f"0 findings, but 4 rule verdict(s) incomplete: KL001 ({trace}), KL203 ({trace}), KL501 ({trace}), "
            f"KL701 ({trace})" in result.output)
    assert f"KL203 incomplete: could not fully check: {LOST_LAUNCH}" in result.output
    assert f"KL001 incomplete: could not fully check: {LOST_LAUNCH}" in result.output
    assert f"damage: {LOST_LAUNCH}" in result.output
    assert invoke("check", "--allow-incomplete", trace).exit_code == 0
    data = json.loads(invoke("check", "--format", "json", trace).output)
    assert data["exit_code"] == 4 and data["rules_incomplete"] == ["KL001", "KL203", "KL501", "KL701"]
    assert data["summary"]["incomplete"] == 4 and data["findings"] == []
    # the rules that read no device event keep their verdicts: the damage does not touch them
    # (KL903 layout-transform-kernels is not applicable: the trace has no convolution and no transform kernel)
    assert data["rules_passed"] == ["KL101", "KL401"]
    (report,) = data["traces"]
    assert report["damage"] == [LOST_LAUNCH]
    kl001 = {r["rule"]: r for r in report["rules"]}["KL001"]
    assert kl001["status"] == "incomplete" and kl001["note"] == "would be passed"


def test_findings_outrank_an_incomplete_verdict(tmp_path, incomplete_kl001):
    trace = tmp_path / "hostile.json"
    trace.write_text(json.dumps({"traceEvents": _hostile_events(["bad_fill_kernel"])}))
    result = invoke("check", "--select", "KL001,KL002", trace, incomplete_kl001)
    # KL001 finds the fill in one trace and cannot fully check the damaged one: exit 1 wins over 4
    assert result.exit_code == 1
    assert "Found 1 finding(s) in 2 trace(s)" in result.output
    assert f"1 rule verdict(s) incomplete: KL001 ({incomplete_kl001})" in result.output


# -- 2. terminal safety ---------------------------------------------------------------------------------


def test_printable_shows_control_characters_visibly():
    from kernlint.report.safe import printable

    assert printable("a\x1b]0;t\x07b") == "a\\x1b]0;t\\x07b"
    assert printable("x\x1b[2J\ny\r\tz\x7f\x9b\u202e") == "x\\x1b[2J\\ny\\r\\tz\\x7f\\x9b\\u202e"
    assert printable("aten::mm C:\\path é") == "aten::mm C:\\path é"
    assert printable(float("nan")) == "" and printable(None) == ""


def test_kernel_names_and_paths_cannot_control_the_terminal(tmp_path):
    folder = tmp_path / "run\x1b]0;title\x07"
    folder.mkdir()
    trace = folder / "t\x1b[2J.json"
    trace.write_text(json.dumps({"traceEvents": _hostile_events()}))
    result = invoke("check", trace, "--select", "KL00")   # the mission rules: what the hostile names feed
    assert result.exit_code == 1
    out = result.output
    assert not _CONTROL.search(out), repr(_CONTROL.findall(out))
    assert "evil\\x1b]0;pwned\\x07_kernel" in out and "wipe\\x1b[2J_kernel" in out and "c1\\x9b31m" in out
    assert "t\\x1b[2J.json" in out and "run\\x1b]0;title\\x07" in out
    # the forged summary stays inside its finding's line: the only line that starts with "Found" is ours
    starts = [line for line in out.splitlines() if line.startswith("Found")]
    # "KL00" selects KL001-KL005 (KL005 scale-randomized-in-dummy-init joined the prefix in issue 37)
    assert starts == ["Found 4 finding(s) in 1 trace(s) with 5 rule(s)."], starts


def test_an_error_naming_a_hostile_path_is_still_one_line(tmp_path):
    proc = cli("check", tmp_path / "missing\nFound 0 finding(s)\x1b[2J.json")
    assert proc.returncode == 2 and proc.stdout == ""
    assert len(proc.stderr.splitlines()) == 1 and "\x1b" not in proc.stderr, proc.stderr


# -- 4. one line on stderr for every user error ----------------------------------------------------------


@pytest.fixture
def clean_trace(tmp_path):
    return _clean_trace(tmp_path / "clean.json")


@pytest.mark.parametrize("args, needle", [
    (["check", "--bogus", "{trace}"], "--bogus"),
    (["check"], "Missing argument"),
    (["check", "--fail-on", "fatal", "{trace}"], "--fail-on"),
    # a newline in the path or in the key: still one line
    (["check", "{tmp}/no-such\ntrace.json"], "no such file or folder"),
    (["check", "--rules", "{tmp}/KL950.toml", "{trace}"], "unknown key `bo\\ngus`"),
    (["check", "--max-trace-bytes", "12Q", "{trace}"], "--max-trace-bytes"),
    (["check", "-o", "{tmp}/no/such/folder/r.json", "{trace}"], "folder does not exist"),
    (["nosuch"], "nosuch"),
])
def test_every_user_error_is_one_line_on_stderr_and_exit_2(tmp_path, clean_trace, args, needle):
    (tmp_path / "KL950.toml").write_text('id = "KL950"\nname = "x"\nseverity = "error"\nsummary = "s"\n'
                                         '"bo\\ngus" = 1\n')
    proc = cli(*[a.format(trace=clean_trace, tmp=tmp_path) for a in args])
    assert proc.returncode == 2, proc
    assert proc.stdout == ""
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("kernlint: error: ") and needle in lines[0], lines[0]


def test_help_and_version_still_exit_0():
    for args in (["--help"], ["check", "--help"], ["--version"]):
        proc = cli(*args)
        assert proc.returncode == 0 and proc.stdout and proc.stderr == "", (args, proc)
    assert "--allow-incomplete" in cli("run", "--help").stdout


def test_numpy_runtime_warnings_never_reach_stderr(clean_trace, monkeypatch):
    import warnings

    import kernlint.rules.engine as engine

    real = engine.combine_checked

    def noisy(checked, rules, **options):
        warnings.warn("invalid value encountered in divide", RuntimeWarning, stacklevel=2)
        return real(checked, rules, **options)

    monkeypatch.setattr(engine, "combine_checked", noisy)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # a warning that got through would fail the run
        result = invoke("check", clean_trace)
    assert result.exit_code == 0, result.output


# -- 5. kernlint run when the workload exits -------------------------------------------------------------


# sys.exit(0) in the step is the corpus case run-workload-calls-sys-exit (fixtures/corpus/corpus.toml)
@pytest.mark.parametrize("body, what", [
    ("def build():\n    sys.exit(0)\n", "sys.exit(0)"),
    ("def build(device):\n    def step():\n        raise KeyboardInterrupt\n    return step\n", "KeyboardInterrupt"),
    ("sys.exit(0)\ndef build(device):\n    return lambda: None\n", "sys.exit(0)"),
    # issue 22: os._exit skips every handler; the workload's own process ends, kernlint's goes on
    ("def build(device):\n    def step():\n        os._exit(0)\n    return step\n", "os._exit()"),
    ("def build(device):\n    os._exit(0)\n", "os._exit()"),
    ("def build(device):\n    def step():\n        os.kill(os.getpid(), 9)\n    return step\n", "signal 9"),
])
def test_run_of_a_workload_that_exits_is_an_error_naming_the_target(tmp_path, body, what):
    workload = tmp_path / "exiting.py"
    workload.write_text("import os, sys\n" + body)
    proc = cli("run", f"{workload}:build", "--device", "cpu", "--out", tmp_path / "out")
    assert proc.returncode == 2, proc
    assert proc.stdout == ""
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert str(workload) in lines[0] and what in lines[0], lines[0]
    assert not list((tmp_path / "out").rglob("*.json*")), "no trace, no metadata"


def test_run_stops_a_workload_past_its_timeout_and_streams_what_it_prints(tmp_path):
    workload = tmp_path / "slow.py"
    workload.write_text("import time\ndef build(device):\n    print('building the slow step', flush=True)\n"
                        "    def step():\n        time.sleep(600)\n    return step\n")
    start = time.perf_counter()
    # The limit is the workload's own time: the child's start (importing torch) is not counted.
    proc = cli("run", f"{workload}:build", "--device", "cpu", "--out", tmp_path / "out", "--timeout", "2")
    assert time.perf_counter() - start < 60
    assert proc.returncode == 2 and proc.stdout == "", proc
    lines = proc.stderr.splitlines()
    assert lines[0] == "building the slow step", lines   # the workload's own output, passed through
    assert lines[-1].endswith(f"{workload}:build: the workload did not finish within 2 s (--timeout); it was "
                              "stopped and nothing was checked"), lines


def test_a_workload_that_prints_much_is_streamed_and_its_report_stays_clean(tmp_path):
    """Its output streamed to stderr; and kernlint's process imports neither the user's module nor torch: the
    child does, once (the module's import-time line shows once)."""
    workload = tmp_path / "chatty.py"
    workload.write_text("import os, torch\nprint('imported in', os.getpid(), flush=True)\n"
                        "def build(device):\n    for i in range(20000):\n"
                        "        print('line', i, 'x' * 100)\n    return lambda: torch.ones(4).sum()\n")
    proc = cli("run", f"{workload}:build", "--device", "cpu", "--out", tmp_path / "out", "--format", "json")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout)["summary"]["traces"] == 1   # stdout is the report alone
    assert proc.stderr.count("\nline ") >= 19_999
    imported = [line for line in (proc.stdout + proc.stderr).splitlines() if line.startswith("imported in")]
    assert len(imported) == 1, imported


# -- 6. audit --replay without recorded cases ------------------------------------------------------------


def test_audit_replay_without_recorded_cases_is_an_error(tmp_path):
    (tmp_path / "cases").mkdir()
    (tmp_path / "cases" / "KL001.toml").write_text(
        'rule = "KL001"\n\n[[case]]\nname = "cpu-only"\nprogram = "placeholder_new_ones"\nexpect = "failed"\n')
    proc = cli("audit", "--replay", "--fixtures", tmp_path)
    assert proc.returncode == 2 and proc.stdout == ""
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and "no case names a recorded trace" in lines[0], proc.stderr
    (tmp_path / "cases" / "KL001.toml").unlink()   # and an empty cases/ folder
    assert cli("audit", "--replay", "--fixtures", tmp_path).returncode == 2


# -- 7. no NaN in JSON, no "nan" in text -----------------------------------------------------------------


def _finding(**changes):
    from kernlint.rules.result import Finding

    base = dict(rule="KL001", name="fill-before-block-quant", severity="error", message="a fill runs first",
                trace="t.json", scope="module Linear_0", event="fill_kernel", event_kind="kernel",
                event_category="fill", launch_op="aten::fill_", top_op=None, source="model.py:12",
                anchor="scale_1x128_kernel", ts=10.0, function="forward")
    return Finding(**{**base, **changes})


def _result(findings, trace="t.json"):
    from kernlint.rules.loader import load_rules
    from kernlint.rules.result import CheckResult, RuleOutcome, TraceReport

    outcome = RuleOutcome("KL001", "fill-before-block-quant", "error", "failed", level="kernel", instances=1,
                          findings=list(findings))
    report = TraceReport(trace=trace, events=10, has_device_events=True, has_stacks=True, rank=None,
                         outcomes=[outcome])
    return CheckResult(reports=[report], rules=[r for r in load_rules() if r.id == "KL001"], exit_code=1)


def _text(result) -> str:
    import io

    from rich.console import Console

    from kernlint.report.text_format import render

    buffer = io.StringIO()
    Console(file=buffer, width=300, color_system=None).print(render(result))
    return buffer.getvalue()


def test_json_holds_no_nan_and_text_never_shows_nan():
    from kernlint.report.json_format import render

    nan = float("nan")
    result = _result([_finding(source=nan, ts=nan, function=nan, top_op=nan), _finding(ts=float("inf"))])

    def refuse(constant):
        raise AssertionError(f"JSON holds {constant}")

    data = json.loads(render(result), parse_constant=refuse)
    first = next(f for f in data["findings"] if f["source"] is None)
    assert first["ts"] is None and first["function"] is None and first["top_op"] is None
    assert any(f["ts"] is None and f["source"] == "model.py:12" for f in data["findings"])
    text = _text(result)
    assert "nan" not in text.lower().replace("fill-before", ""), text
    assert "source: unknown" in text


# -- 8. a fixed order --------------------------------------------------------------------------------------


def test_findings_are_listed_in_a_fixed_order_whatever_order_they_come_in():
    from kernlint.report.json_format import render as render_json

    findings = [_finding(ts=30.0, event="c_kernel", message="c"), _finding(ts=10.0, event="a_kernel", message="a"),
                _finding(ts=20.0, event="b_kernel", message="b"), _finding(ts=10.0, event="a_kernel", message="a2",
                                                                          scope="module Linear_1")]
    outputs = set()
    texts = set()
    for seed in range(4):
        shuffled = findings[:]
        random.Random(seed).shuffle(shuffled)
        outputs.add(render_json(_result(shuffled)))
        texts.add(_text(_result(shuffled)))
    assert len(outputs) == 1 and len(texts) == 1
    data = json.loads(outputs.pop())
    assert [f["message"] for f in data["findings"]] == ["a", "a2", "b", "c"]


def _tied_events():
    """Six fills launched at the same instant (on one thread, as a trace may record them), then the anchor."""
    events = [{"ph": "X", "cat": "python_function", "name": "nn.Module: Linear_0", "pid": 1, "tid": 1, "ts": 0,
               "dur": 1000}]
    for i in range(1, 7):
        events += [
            {"ph": "X", "cat": "cpu_op", "name": "aten::fill_", "pid": 1, "tid": 1, "ts": 10, "dur": 5},
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 11, "dur": 2,
             "args": {"correlation": i}},
            {"ph": "X", "cat": "kernel", "name": f"fill_{i}_kernel", "pid": 0, "tid": 7 + i, "ts": 500, "dur": 1,
             "args": {"correlation": i}}]
    return events + [
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 100, "dur": 2,
         "args": {"correlation": 99}},
        {"ph": "X", "cat": "kernel", "name": "scale_1x128_kernel", "pid": 0, "tid": 7, "ts": 900, "dur": 1,
         "args": {"correlation": 99}}]


def test_shuffling_the_events_of_a_trace_does_not_change_the_output(tmp_path):
    events = _tied_events()
    outputs = set()
    for seed in range(3):
        shuffled = events[:]
        random.Random(seed).shuffle(shuffled)
        path = tmp_path / f"s{seed}" / "trace.json"
        path.parent.mkdir()
        path.write_text(json.dumps({"traceEvents": shuffled}))
        data = json.loads(invoke("check", "--format", "json", path).output)
        outputs.add(json.dumps([{k: v for k, v in f.items() if k != "trace"} for f in data["findings"]]))
    assert len(outputs) == 1
    assert [f["event"] for f in json.loads(outputs.pop())] == [f"fill_{i}_kernel" for i in range(1, 7)]


# -- 10. --max-trace-bytes -------------------------------------------------------------------------------


@pytest.mark.parametrize("text, size", [("1000", 1000), ("512M", 512 << 20), ("4G", 4 << 30), ("4g", 4 << 30),
                                        ("1.5GiB", 3 << 29), ("64KB", 64 << 10), ("2T", 2 << 40)])
def test_max_trace_bytes_takes_suffixes(text, size):
    from kernlint.cli.app import ByteSize

    assert ByteSize().convert(text, None, None) == size


def test_max_trace_bytes_reaches_the_loader(clean_trace, monkeypatch):
    import kernlint.trace.load as load

    real = load.load_trace
    seen = []

    def load_trace(path, max_bytes=None, captures=()):
        seen.append(max_bytes)
        return real(path, captures=captures)

    monkeypatch.setattr(load, "load_trace", load_trace)
    assert invoke("check", "--max-trace-bytes", "3M", clean_trace).exit_code == 0
    assert seen == [3 << 20]
    invoke("check", clean_trace)
    assert seen[-1] == getattr(load, "DEFAULT_MAX_TRACE_BYTES", 2 << 30)
