"""One check pipeline: `kernlint check`, `kernlint.check()` and `audit --replay` (the rule cases on their
recorded traces) give the same findings on the same traces."""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from conftest import FIXTURES
from kernlint import check
from kernlint.cases import evaluate_case, load_cases
from kernlint.cli import main
from kernlint.errors import ConfigError
from kernlint.rules.loader import load_rules

RULES = load_rules()
# Recorded traces of several kinds of check (scoped syncs and uploads, an anchored rule, a CUDA-graph replay
# with its capture, cross-rank ranks, real external traces), each with one of its cases.
WANTED = {
    "KL401:harness-in-step-sync-stays-an-error", "KL501:backward-pass-uploads-are-in-the-step",
    "KL502:dataloader-collate-is-context", "KL004:gpu-2xh200-nccl-tp-mlp-rank1-stream-sync",
    "KL001:gpu-graph-replay-new-ones-with-capture", "KL701:external-hta-trace-filter-2rank-forward-is-not-a-layer",
    "KL401:external-hta-2rank-item-and-dtoh-per-step", "KL004:external-hta-trace-filter-2rank",
}
CASES = [c for c in load_cases(FIXTURES / "cases") if c.id in WANTED and c.spec.trace and not c.spec.baseline
         and not c.spec.baseline_from and c.spec.slowdown is None]


def _key(f) -> tuple:
    return f.rule, f.message, f.severity, f.rank


def test_the_sampled_cases_exist():
    assert len(CASES) >= 5, sorted(c.id for c in CASES)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_cli_api_and_audit_replay_find_the_same(case, tmp_path):
    trace = case.trace_path(FIXTURES)
    extra = ["--capture", str(FIXTURES / case.spec.capture)] if case.spec.capture else []
    out = tmp_path / "out.json"
    result = CliRunner().invoke(main, ["check", str(trace), "--isolated", "--select", case.rule, "--format", "json",
                                       "-o", str(out), *extra])
    assert result.exit_code in (0, 1, 4), result.output
    cli = sorted((f["rule"], f["message"], f["severity"], f["rank"]) for f in json.loads(out.read_text())["findings"])
    captures = [str(FIXTURES / case.spec.capture)] if case.spec.capture else []
    api = sorted(_key(f) for f in check([str(trace)], select=[case.rule], captures=captures).findings)
    replayed = evaluate_case(case, trace, RULES, FIXTURES)
    audit = sorted(_key(f) for f in replayed.outcome.findings)
    assert cli == api == audit


def test_a_format_that_cannot_render_replays_is_refused_before_any_work():
    """audit --replay --format github: refused from the formats' declared renderers, before the rules, the
    traces or the renderers' own imports (pandas) are loaded."""
    import subprocess
    import sys

    code = ("import sys\nfrom click.testing import CliRunner\nfrom kernlint.cli import main\n"
            "r = CliRunner().invoke(main, ['audit', '--replay', '--format', 'github', '--isolated'])\n"
            "print(r.exit_code, 'pandas' in sys.modules, 'kernlint.rules.loader' in sys.modules)\n"
            "print(r.output.strip())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    status, message = out.splitlines()[0], out.splitlines()[1]
    assert status == "2 False False", out
    assert message == ("kernlint: error: output format 'github' does not render replays; use one of: text, json, "
                       "junit")


def test_declared_renderers_are_the_modules_own():
    """Each format declares what it renders; its typed Renderer holds exactly those renderers (none undeclared),
    and a lazily loaded one is checked against the declaration."""
    from kernlint.report import FORMATS, Format, Renderer, format_names

    for name in format_names():
        declared = FORMATS.get(name)
        assert set(declared.renders) == declared.loaded().renders, name
        assert "check" in declared.renders, name
    assert [n for n in format_names() if FORMATS.get(n).needs_tables] == ["html"]
    wrong = Format("wrong", "declares audit", lambda: Renderer(check=print), frozenset({"check", "audit"}))
    with pytest.raises(ConfigError, match="declares audit, check but its Renderer renders check"):
        wrong.renderer("check")


_FRAME = "regressed/fp8_linear_new_ones.py(17)"   # the regressed trace's frame of the new_ones call


def _regressed_trace(folder, source: str):
    import gzip

    data = json.loads(gzip.decompress((FIXTURES / "traces" / "gpu" / "placeholder_new_ones.pt.trace.json.gz")
                                      .read_bytes()))
    for e in data["traceEvents"]:
        if e.get("cat") == "python_function" and e["name"].startswith(_FRAME):
            e["name"] = f"{source}(17)" + e["name"][len(_FRAME):]
    path = folder / "t.pt.trace.json"
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize("comment, found", [("", True), ("  # kernlint: ignore[KL001] reviewed", False)])
def test_the_pipeline_maps_sources_and_applies_inline_ignores_for_any_caller(tmp_path, comment, found):
    """Issue 39: suppressions and source mapping are the pipeline's (SourceHandling), not the CLI's: a caller
    that passes one gets the recorded path mapped into its root ([path-map]) and the comment read there."""
    from kernlint.pipeline import CheckRequest, Inputs, SourceHandling, run_check

    source = tmp_path / "repo" / "src" / "layers" / "fp8_linear_new_ones.py"
    source.parent.mkdir(parents=True)
    source.write_text("\n" * 16 + f"def _placeholder_scale(x):{comment}\n")
    trace = _regressed_trace(tmp_path, "/build/site/regressed/fp8_linear_new_ones.py")
    kl001 = [r for r in RULES if r.id == "KL001"]
    handling = SourceHandling(root=tmp_path / "repo", path_map=[("/build/site/regressed/", "src/layers/")])
    result = run_check(CheckRequest(rules=kl001, inputs=Inputs(paths=[trace]), sources=handling))
    assert [f.source for f in result.findings] == (["src/layers/fp8_linear_new_ones.py:17"] if found else [])
    assert [s.how for s in result.suppressed] == ([] if found else ["inline"])
    # Without one, the sources stay as recorded and no comment is read.
    bare = run_check(CheckRequest(rules=kl001, inputs=Inputs(paths=[trace])))
    assert [f.source for f in bare.findings] == ["/build/site/regressed/fp8_linear_new_ones.py:17"]


def _damaged_trace(folder):
    """The regressed trace whose fill kernel lost its launch (the corpus's dangling-correlation input)."""
    from corpus_inputs import dangling_correlation

    return dangling_correlation(folder)[1]


def test_every_baseline_recording_refuses_a_damaged_trace(tmp_path, monkeypatch):
    """Issue 39: `baseline record` refused damaged traces while the audit's recording and a profiled block's
    keep_profile recorded them silently; one policy now (pipeline.refuse_damaged_recording)."""
    from kernlint import audit
    from kernlint.api import ProfiledBlock
    from kernlint.errors import ConfigError
    from kernlint.pipeline import record_programs
    from kernlint.trace.load import load_trace
    from kernlint.workloads import BUILTIN_WORKLOADS

    damaged = _damaged_trace(tmp_path)
    expected = r"damaged \(1 device event with no launch.*no baseline written"
    with pytest.raises(ConfigError, match=expected):
        record_programs([damaged])
    monkeypatch.setattr(audit, "capture_workload", lambda *a, **k: ([damaged], 1))
    with pytest.raises(ConfigError, match=expected):
        audit.record_workloads([BUILTIN_WORKLOADS["fp8-block-linear"]], "cpu", steps=1)
    with pytest.raises(ConfigError, match=expected):
        ProfiledBlock(keep_profile=True)._checked(load_trace(damaged))
    # A check of it is no recording: incomplete or failed, never refused.
    assert ProfiledBlock()._checked(load_trace(damaged)).exit_code in (1, 4)
