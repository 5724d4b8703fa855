"""The Python API (kernlint.api, exported as kernlint.check / kernlint.profiling / kernlint.RuleViolation):
the same verdicts and exit codes as `kernlint check`, typed errors, no output."""
from __future__ import annotations

import gzip
import inspect
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

import corpus_inputs
import kernlint
import kernlint.api
from kernlint.api import PROFILER_TRACE_LABEL, CheckReport
from kernlint.cli import main as cli_main
from kernlint.errors import ConfigError, RuleFileError, TraceError
from kernlint.reference import scale_1x128
from kernlint.rules.loader import load_rules

REPO = Path(__file__).resolve().parents[1]
GPU = REPO / "fixtures" / "traces" / "gpu"
REGRESSED = GPU / "placeholder_new_ones.pt.trace.json.gz"   # a FillFunctor fill before scale_1x128_kernel
CLEAN = GPU / "placeholder_new_empty.pt.trace.json.gz"
SHIPPED_KL001 = REPO / "rules" / "KL001.toml"

X = torch.randn(8, 256, dtype=torch.bfloat16)


def quantize_with_placeholder_scale(x):
    scale = torch.ones(1)   # the regression KL001 catches on the CPU: a fill before the scale_1x128 range
    return scale_1x128(x), scale


def quantize(x):
    scale = torch.empty(1)  # allocation only
    return scale_1x128(x), scale


def _fill_line(fn) -> int:
    """The line of `fn`'s first statement, the fill: the API maps a finding's source into the checkout and to the
    statement that issued the op, as the CLI does (the profiler records the def line above it)."""
    return inspect.getsourcelines(fn)[1] + 1


def _cli_exit_code(args: list[str]) -> int:
    return CliRunner().invoke(cli_main, ["check", *args]).exit_code


def _user_rule(folder: Path, rule_id: str, severity: str) -> Path:
    """KL001's body under another id and severity: flags the same fill."""
    text = SHIPPED_KL001.read_text()
    text = text.replace('id = "KL001"', f'id = "{rule_id}"').replace('name = "fill-before-block-quant"',
                                                                    f'name = "fill-{rule_id.lower()}"')
    text = text.replace('severity = "error"', f'severity = "{severity}"')
    path = folder / f"{rule_id}.toml"
    path.write_text(text)
    return path


# --- checking trace files -------------------------------------------------------------------------------
def test_regressed_trace_fails_with_the_fill_finding_and_its_source_line():
    result = kernlint.check(REGRESSED)
    assert isinstance(result, CheckReport)
    assert not result.passed and result.exit_code == 1
    (finding,) = result.findings
    assert finding.rule == "KL001" and "FillFunctor" in finding.event
    assert finding.source == "fixtures/regressed/fp8_linear_new_ones.py:18"   # mapped into the checkout
    assert result.failing == [finding]
    assert result.failed_rules == ["KL001"]
    text = str(result)
    assert text.startswith("failed: 1 finding(s) at or above warning (rules KL001)")
    assert "KL001 fill-before-block-quant [error]" in text and "fixtures/regressed/fp8_linear_new_ones.py:18" in text


def test_clean_trace_passes_and_the_rule_was_applied_not_skipped():
    result = kernlint.check(str(CLEAN), rules=["KL001"])
    assert result.passed and result.exit_code == 0 and result.findings == []
    assert [r.id for r in result.rules] == ["KL001"]
    assert result.rule_status("KL001") == "passed"
    assert str(result).startswith("passed: 0 findings at or above warning")


def test_a_list_of_paths_and_a_folder_are_checked_like_the_cli(tmp_path):
    result = kernlint.check([CLEAN, REGRESSED])
    assert [r.trace for r in result.reports] == [str(CLEAN), str(REGRESSED)]
    assert [f.trace for f in result.findings] == [str(REGRESSED)]
    folder = tmp_path / "logdir"
    (folder / "nested").mkdir(parents=True)
    (folder / "rank-0.json.gz").write_bytes(CLEAN.read_bytes())          # a trace, whatever its name
    (folder / "nested" / "train.json").write_bytes(gzip.decompress(REGRESSED.read_bytes()))
    (folder / "notes.json").write_text('{"not": "a trace"}')
    result = kernlint.check(folder)
    assert sorted(Path(r.trace).name for r in result.reports) == ["rank-0.json.gz", "train.json"]
    assert [Path(f.trace).name for f in result.findings] == ["train.json"]
    assert [Path(p).name for p, _ in result.skipped] == ["notes.json"]


def _clean_folder_with_dangling_link(folder: Path) -> list[str]:
    run = folder / "run"
    run.mkdir()
    (run / "rank0.pt.trace.json.gz").write_bytes(CLEAN.read_bytes())
    os.symlink(folder / "gone.json", run / "rank1.json")
    return ["check", str(run)]


@pytest.mark.parametrize("build", [
    lambda folder: ["check", str(CLEAN)],                  # 0
    lambda folder: ["check", str(REGRESSED)],              # 1
    corpus_inputs.pid_integral_float,                      # 1: damage normalised, the fill still seen
    corpus_inputs.dangling_correlation,                    # 4: a kernel with no launch
    corpus_inputs.kernel_event_removed,                    # 4: the fill kernel is gone
    corpus_inputs.folder_with_dangling_symlink,            # 1: findings outrank an unreadable entry
    _clean_folder_with_dangling_link,                      # 4: nothing found, but an entry was unreadable
], ids=["clean", "regressed", "pid-float", "dangling-correlation", "kernel-removed", "regressed-and-dangling-link",
        "clean-and-dangling-link"])
def test_exit_code_and_passed_follow_the_cli_policy(tmp_path, build):
    args = build(tmp_path)
    assert args[0] == "check"
    result = kernlint.check(args[1:])
    expected = _cli_exit_code(args[1:])
    assert result.exit_code == expected
    assert result.passed == (expected == 0)
    if expected == 4:
        assert result.incomplete or result.unreadable
        assert result.summary.startswith("failed: ") and ("incomplete" in result.summary
                                                          or "could not be read" in result.summary)


def test_fail_on_sets_the_lowest_failing_severity(tmp_path):
    # a user id: KL901/KL902 are shipped rules since issue 37
    rule = _user_rule(tmp_path, "ACME901", "warning")
    at_warning = kernlint.check(REGRESSED, rules=[rule, "ACME901"])
    assert [f.rule for f in at_warning.findings] == ["ACME901"] and at_warning.exit_code == 1
    at_error = kernlint.check(REGRESSED, rules=[rule, "ACME901"], fail_on="error")
    assert at_error.passed and at_error.exit_code == 0
    assert [f.rule for f in at_error.findings] == ["ACME901"]      # still reported, just not failing
    assert at_error.failing == []
    assert "1 below error" in at_error.summary
    assert _cli_exit_code([str(REGRESSED), "--rules", str(rule), "--select", "ACME901", "--fail-on", "error"]) == 0


# --- the rules argument -----------------------------------------------------------------------------------
def test_rules_mix_selectors_and_rule_paths(tmp_path):
    rule = _user_rule(tmp_path, "ACME902", "error")
    both = kernlint.check(REGRESSED, rules=[str(rule), "KL001", "ACME902"])
    assert [r.id for r in both.rules] == ["ACME902", "KL001"]          # rules are listed by id
    assert sorted(f.rule for f in both.findings) == ["ACME902", "KL001"]
    # A rule path alone adds to the shipped rules, like --rules (those that compare with a baseline run
    # only with one).
    shipped = [r.id for r in load_rules() if not r.needs_baseline]
    assert [r.id for r in kernlint.check(CLEAN, rules=[rule]).rules] == sorted([*shipped, "ACME902"])
    # A folder of rules, a single selector string, comma-separated selectors, select and ignore.
    assert [r.id for r in kernlint.check(CLEAN, rules=[tmp_path], select="ACME9").rules] == ["ACME902"]
    assert [r.id for r in kernlint.check(CLEAN, rules="KL001").rules] == ["KL001"]
    assert [r.id for r in kernlint.check(CLEAN, rules=["KL001,KL002"]).rules] == ["KL001", "KL002"]
    assert [r.id for r in kernlint.check(CLEAN, ignore=shipped, rules=[rule]).rules] == ["ACME902"]
    assert [r.id for r in kernlint.check(CLEAN, builtin=False, rules=[rule]).rules] == ["ACME902"]


def test_bad_rules_and_options_are_typed_errors():
    with pytest.raises(RuleFileError, match="no such rule file or folder"):
        kernlint.check(CLEAN, rules=["missing/rules.toml"])
    with pytest.raises(RuleFileError, match="no such rule file or folder"):
        kernlint.check(CLEAN, rules=[Path("nowhere")])       # a PathLike is always a path
    with pytest.raises(ConfigError, match="selector 'KL999' matches no rule"):
        kernlint.check(CLEAN, rules=["KL999"])
    with pytest.raises(ConfigError, match="fail_on"):
        kernlint.check(CLEAN, fail_on="fatal")
    with pytest.raises(TraceError, match="no such file or folder"):
        kernlint.check(REPO / "no-such-trace.json")
    with pytest.raises(TypeError):
        kernlint.check(42)


def test_a_malformed_trace_is_a_trace_error_naming_the_file(tmp_path):
    bad = tmp_path / "broken.pt.trace.json"
    bad.write_text('{"traceEvents": [')
    with pytest.raises(TraceError) as caught:
        kernlint.check(bad)
    assert caught.value.path == str(bad)


# --- a torch.profiler run ---------------------------------------------------------------------------------
def _profile(fn):
    prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], record_shapes=True,
                                  profile_memory=True, with_stack=True)
    with prof:
        fn(X)
    return prof


def test_a_finished_profiler_is_exported_checked_and_deleted(monkeypatch):
    exported = []
    real_export = kernlint.api._export_profiler

    def spy(prof, out_path):
        exported.append(real_export(prof, out_path))
        return exported[-1]

    monkeypatch.setattr(kernlint.api, "_export_profiler", spy)
    result = kernlint.check(_profile(quantize_with_placeholder_scale), rules=["KL001"])
    (finding,) = result.findings
    assert finding.event == "aten::ones" and finding.trace == PROFILER_TRACE_LABEL
    assert finding.source == f"tests/test_api.py:{_fill_line(quantize_with_placeholder_scale)}"
    (path,) = exported
    assert not path.exists() and not path.parent.exists()    # the temporary export and its folder are gone
    clean = kernlint.check(_profile(quantize), rules=["KL001"])
    assert clean.passed and clean.rule_status("KL001") == "passed"


def test_a_profiler_that_never_ran_is_a_config_error():
    prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU])
    with pytest.raises(ConfigError, match="no finished run"):
        kernlint.check(prof)


# --- kernlint.profiling -----------------------------------------------------------------------------------
def test_profiling_a_regressed_block_and_assert_clean_lists_rule_message_and_source():
    with kernlint.profiling(rules=["KL001"]) as run:
        quantize_with_placeholder_scale(X)
    block_line = inspect.currentframe().f_lineno - 2
    assert not run.result.passed and run.result.exit_code == 1
    assert run.trace is None
    with pytest.raises(kernlint.RuleViolation) as caught:
        run.assert_clean()
    assert isinstance(caught.value, AssertionError)
    assert caught.value.result is run.result
    message = str(caught.value)
    assert f"block at {__file__}:{block_line}" in message
    assert "KL001 fill-before-block-quant [error]: aten::ones (fill) runs before scale_1x128" in message
    fill = _fill_line(quantize_with_placeholder_scale)
    assert f"at tests/test_api.py:{fill} (quantize_with_placeholder_scale)" in message


def test_profiling_a_clean_block_passes(capfd):
    with kernlint.profiling(rules=["KL001"], device="cpu") as run:
        quantize(X)
    run.assert_clean()
    outcome = next(o for r in run.result.reports for o in r.outcomes if o.rule == "KL001")
    assert outcome.status == "passed" and outcome.instances == 1 and outcome.level == "op"
    # The API prints nothing; kineto's start/stop lines on file descriptor 2 are kept out of the terminal.
    out, err = capfd.readouterr()
    assert out == "" and err == ""


def test_profiling_with_fail_raises_when_the_block_ends():
    with pytest.raises(kernlint.RuleViolation, match="KL001"):
        with kernlint.profiling(rules=["KL001"], fail=True):
            quantize_with_placeholder_scale(X)


def test_a_block_that_raises_is_not_checked_and_its_exception_goes_on():
    with pytest.raises(ZeroDivisionError):
        with kernlint.profiling(rules=["KL001"], fail=True) as run:
            quantize_with_placeholder_scale(X)
            raise ZeroDivisionError
    with pytest.raises(ConfigError, match="no result yet"):
        _ = run.result


def test_save_trace_keeps_a_gzip_trace_that_checks_the_same(tmp_path):
    saved = tmp_path / "traces" / "block.pt.trace.json.gz"
    with kernlint.profiling(rules=["KL001"], save_trace=saved) as run:
        quantize_with_placeholder_scale(X)
    assert run.trace == saved
    data = json.loads(gzip.decompress(saved.read_bytes()))
    assert data["traceEvents"]
    assert [f.trace for f in run.result.findings] == [str(saved)]
    again = kernlint.check(saved, rules=["KL001"])
    assert [f.fingerprint for f in again.findings] == [f.fingerprint for f in run.result.findings]
    # keep_trace="failed": a passing block's trace is removed again.
    passing = tmp_path / "passing.pt.trace.json.gz"
    with kernlint.profiling(rules=["KL001"], save_trace=passing, keep_trace="failed") as run:
        quantize(X)
    assert run.result.passed and run.trace is None and not passing.exists()


def test_bad_profiling_arguments_fail_before_the_block_runs():
    ran = []
    with pytest.raises(ConfigError, match="selector 'KL999'"):
        with kernlint.profiling(rules=["KL999"]):
            ran.append(True)
    with pytest.raises(ConfigError, match="keep_trace"):
        kernlint.profiling(keep_trace="sometimes")
    assert ran == []


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error where torch sees no GPU")
def test_asking_for_cuda_without_a_gpu_is_a_config_error():
    with pytest.raises(ConfigError, match="no CUDA device"):
        with kernlint.profiling(device="cuda"):
            pass


@pytest.mark.gpu
def test_profiling_on_the_gpu_sees_the_fill_kernel():
    x = X.cuda()

    def quantize_cuda(x):
        scale = x.new_ones(1)
        return scale_1x128(x), scale

    quantize_cuda(x)   # Triton compiles outside the profiled block
    with kernlint.profiling(rules=["KL001"]) as run:
        quantize_cuda(x)
    (finding,) = run.result.findings
    assert finding.event_kind == "kernel" and "FillFunctor" in finding.event


def test_import_kernlint_stays_light_and_exports_the_api():
    # pytest imports the plugin in every session of an environment that has kernlint.
    code = ("import sys, kernlint, kernlint.pytest_plugin; light = not ({'torch', 'pandas'} & set(sys.modules)); "
            "print(light, kernlint.check.__module__, issubclass(kernlint.RuleViolation, AssertionError))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["True", "kernlint.api", "True"]


def test_a_profiling_block_inside_another_is_refused_in_one_line():
    """torch.profiler does not nest: a second one inside the first crashed the process (issue 22, item 7)."""
    code = textwrap.dedent("""
        import torch, kernlint
        from kernlint.errors import ConfigError
        with kernlint.profiling(device="cpu") as outer:
            try:
                with kernlint.profiling(device="cpu"):
                    torch.ones(4).sum()
            except ConfigError as exc:
                print("refused:", exc)
            torch.ones(4).sum()
        print("outer finished:", outer.result is not None)
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = [line for line in done.stdout.splitlines() if line]
    assert lines[0].startswith("refused: kernlint.profiling(): a profiler is already running in this process")
    assert lines[-1] == "outer finished: True"


def test_an_empty_profiling_block_is_not_passed():
    with kernlint.profiling(device="cpu") as run:
        pass
    assert not run.result.passed and run.result.exit_code == 4
    assert run.result.summary.startswith("failed: the profiled block ran no torch op: nothing was checked")


@pytest.mark.parametrize("options, message", [
    ({"rules": 5}, "rules: expected a rule id, name or path, or a list of them; got int"),
    ({"select": 5}, "select: expected rule ids, prefixes or names (strings), got int"),
    ({"ignore": [3]}, "ignore: expected rule ids, prefixes or names (strings), got int"),
])
def test_wrong_option_types_say_which_option_and_what_it_takes(options, message):
    with pytest.raises(TypeError) as info:
        kernlint.check(str(GPU), **options)
    assert str(info.value) == message
