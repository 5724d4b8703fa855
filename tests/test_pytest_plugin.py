"""The pytest plugin (kernlint.pytest_plugin, loaded through the `pytest11` entry point): the
`kernlint_check` fixture and the --kernlint-* options, run in pytester's throwaway projects."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

import kernlint

pytest_plugins = ["pytester"]

REPO = Path(__file__).resolve().parents[1]

# A CPU workload: scale_1x128 runs its torch ops inside record_function("scale_1x128"), KL001's op-level
# anchor. A fill (torch.ones) before it in the same function is the regression; torch.empty is not.
WORKLOAD = '''
import torch
from kernlint.reference import scale_1x128

X = torch.randn(8, 256, dtype=torch.bfloat16)


def quantize_with_placeholder_scale(x):
    scale = torch.ones(1)
    return scale_1x128(x), scale


def quantize(x):
    scale = torch.empty(1)
    return scale_1x128(x), scale
'''


def _line_of(path: Path, text: str) -> int:
    (n,) = [i for i, line in enumerate(path.read_text().splitlines(), 1) if text in line]
    return n


@pytest.fixture(scope="module")
def imports_done():
    """Profile and check once in this process first. pytester's in-process runs drop every module imported
    during the run afterwards; torch.profiler imports torch._inductor on its first start, and importing that
    twice in one process fails (it registers a torch library)."""
    import torch

    from kernlint.reference import scale_1x128

    with kernlint.profiling(rules=["KL001"], device="cpu"):
        scale_1x128(torch.randn(1, 128))


@pytest.fixture
def project(pytester, imports_done):
    pytester.makepyfile(workload=WORKLOAD)
    return pytester


def test_clean_block_passes_and_regressed_block_fails_naming_the_finding(project):
    tests = '''
from workload import X, quantize, quantize_with_placeholder_scale


def test_clean(kernlint_check):
    with kernlint_check(rules=["KL001"]) as run:
        quantize(X)
    assert run.result.rule_status("KL001") == "passed"


def test_regressed(kernlint_check):
    with kernlint_check(rules=["KL001"]):
        quantize_with_placeholder_scale(X)
'''
    project.makepyfile(test_layer=tests)
    result = project.runpytest()
    result.assert_outcomes(passed=1, failed=1)
    out = result.stdout.str()
    # The statement that issues the fill (the pipeline refines the profiler's def line, as for the CLI).
    fill_line = _line_of(project.path / "workload.py", "scale = torch.ones(1)")
    block_line = _line_of(project.path / "test_layer.py", 'with kernlint_check(rules=["KL001"]):')
    assert "FAILED test_layer.py::test_regressed" in out
    assert f"kernlint check of the block at {project.path / 'test_layer.py'}:{block_line}" in out
    assert "KL001 fill-before-block-quant [error]: aten::ones (fill) runs before scale_1x128" in out
    assert re.search(rf"at \S*workload\.py:{fill_line} \(quantize_with_placeholder_scale\)", out)
    assert "RuleViolation" in out


def test_fail_false_keeps_the_test_going_and_the_result_inspectable(project):
    project.makepyfile(test_layer='''
from workload import X, quantize_with_placeholder_scale


def test_regression_is_seen(kernlint_check):
    with kernlint_check(rules=["KL001"], fail=False) as run:
        quantize_with_placeholder_scale(X)
    assert not run.result.passed
    assert [(f.rule, f.event) for f in run.result.findings] == [("KL001", "aten::ones")]


def test_regression_can_be_expected(kernlint_check):
    import kernlint, pytest

    with pytest.raises(kernlint.RuleViolation):
        with kernlint_check(rules=["KL001"]):
            quantize_with_placeholder_scale(X)
''')
    project.runpytest().assert_outcomes(passed=2)


def test_trace_dir_keeps_the_traces_of_failing_blocks_only(project, tmp_path):
    project.makepyfile(test_layer='''
from workload import X, quantize, quantize_with_placeholder_scale


def test_two_blocks(kernlint_check):
    with kernlint_check(rules=["KL001"]):
        quantize(X)
    with kernlint_check(rules=["KL001"]):
        quantize_with_placeholder_scale(X)
''')
    traces = tmp_path / "kernlint-traces"
    result = project.runpytest(f"--kernlint-trace-dir={traces}")
    result.assert_outcomes(failed=1)
    (kept,) = traces.iterdir()
    assert kept.name == "test_layer.py_test_two_blocks-2.pt.trace.json.gz"
    assert f"trace kept at {kept}" in result.stdout.str()
    assert "kernlint: traces of failing blocks in" in result.stdout.str()   # the report header
    again = kernlint.check(kept, rules=["KL001"])
    assert [(f.rule, f.event) for f in again.findings] == [("KL001", "aten::ones")]


def test_select_applies_when_the_test_names_no_rules(project):
    project.makepyfile(test_layer='''
from workload import X, quantize_with_placeholder_scale


def test_block(kernlint_check):
    with kernlint_check() as run:
        quantize_with_placeholder_scale(X)
''')
    project.runpytest().assert_outcomes(failed=1)                          # every shipped rule: KL001 fails
    project.runpytest("--kernlint-select", "KL002,KL003").assert_outcomes(passed=1)
    project.runpytest("--kernlint-select", "KL0").assert_outcomes(failed=1)


def test_extra_rule_files_load_beside_the_shipped_rules(project, tmp_path):
    # a user id: KL901 is a shipped rule since issue 37
    text = (REPO / "rules" / "KL001.toml").read_text()
    text = text.replace('id = "KL001"', 'id = "ACME901"').replace('"fill-before-block-quant"', '"team-fill-rule"')
    (tmp_path / "team").mkdir()
    (tmp_path / "team" / "ACME901.toml").write_text(text)
    project.makepyfile(test_layer='''
from workload import X, quantize_with_placeholder_scale


def test_block(kernlint_check):
    with kernlint_check(rules=["ACME901"]) as run:
        quantize_with_placeholder_scale(X)
''')
    result = project.runpytest("--kernlint-rules", str(tmp_path / "team"))
    result.assert_outcomes(failed=1)
    assert "ACME901 team-fill-rule [error]: aten::ones" in result.stdout.str()
    # Without the option ACME901 does not exist: the selector is an error, raised in the test.
    result = project.runpytest()
    result.assert_outcomes(failed=1)
    assert "selector 'ACME901' matches no rule" in result.stdout.str()


def test_bad_options_are_usage_errors(project, tmp_path):
    project.makepyfile(test_nothing="def test_nothing():\n    pass\n")
    missing = tmp_path / "missing.json"
    result = project.runpytest(f"--kernlint-baseline={missing}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert f"--kernlint-baseline {missing}: no such file or folder" in result.stderr.str()
    result = project.runpytest(f"--kernlint-baseline={tmp_path}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR and "not a file" in result.stderr.str()
    result = project.runpytest(f"--kernlint-rules={tmp_path / 'nope'}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    broken = tmp_path / "KL950.toml"
    broken.write_text('id = "KL950"\nname = [\n')
    result = project.runpytest(f"--kernlint-rules={broken}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert re.search(r"--kernlint-rules: .*KL950\.toml: invalid TOML", result.stderr.str())


def test_baseline_option_is_stored_on_the_config(project, tmp_path):
    baseline = tmp_path / "kernlint-baseline.json"
    baseline.write_text("{}")
    project.makepyfile(test_stored_options=f'''
from pathlib import Path

from kernlint.pytest_plugin import kernlint_options


def test_options(request):
    options = kernlint_options(request.config)
    assert options.baseline == Path({str(baseline)!r})
    assert options.trace_dir is None and options.select == ()
''')
    project.runpytest(f"--kernlint-baseline={baseline}").assert_outcomes(passed=1)


def test_the_entry_point_loads_the_plugin_in_a_fresh_process(project):
    project.makepyfile(test_layer='''
from workload import X, quantize_with_placeholder_scale


def test_block(kernlint_check):
    with kernlint_check(rules=["KL001"]):
        quantize_with_placeholder_scale(X)
''')
    result = project.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    assert "KL001 fill-before-block-quant" in result.stdout.str()
    # `-p no:kernlint` turns the plugin off: the fixture is unknown. In this process (pytester's inline run
    # loads the entry points anew, as a fresh process does): the fresh process above is the entry point's test.
    project.makepyfile(test_fixture_only="def test_fixture(kernlint_check):\n    pass\n")
    result = project.runpytest("-p", "no:kernlint", "-p", "no:cacheprovider", "test_fixture_only.py")
    result.assert_outcomes(errors=1)
    assert "fixture 'kernlint_check' not found" in result.stdout.str()


def test_record_a_baseline_then_a_new_launch_fails_the_same_test(project, monkeypatch):
    """--kernlint-record-baseline keeps each block's profile under its test id; --kernlint-baseline compares
    the same test's block with it: the fill that the changed code launches is KL801, named with its line."""
    tests = '''
import os
from workload import X, quantize, quantize_with_placeholder_scale


def test_layer(kernlint_check):
    step = quantize_with_placeholder_scale if os.environ.get("REGRESSED") else quantize
    with kernlint_check(rules=["KL8"]) as run:
        step(X)
'''
    project.makepyfile(test_layer=tests)
    baseline = project.path / "kernlint-baseline.json"
    project.runpytest("--kernlint-record-baseline", str(baseline)).assert_outcomes(passed=1)
    from kernlint.baseline import read_baseline

    recorded = read_baseline(baseline)
    assert list(recorded.programs) == ["test_layer.py::test_layer"]
    assert recorded.refresh_command.startswith("pytest --kernlint-record-baseline")

    project.runpytest("--kernlint-baseline", str(baseline)).assert_outcomes(passed=1)   # unchanged code
    monkeypatch.setenv("REGRESSED", "1")
    result = project.runpytest("--kernlint-baseline", str(baseline))
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert "KL801" in out and "aten::ones" in out and "is new in" in out
    # A baseline finding keeps the function's def line (its source is the program's frame, not one op's).
    assert f"workload.py:{_line_of(project.path / 'workload.py', 'def quantize_with_placeholder_scale')}" in out


def test_baseline_rules_without_a_baseline_are_a_clear_error(project):
    project.makepyfile(test_layer='''
from workload import X, quantize


def test_layer(kernlint_check):
    with kernlint_check(rules=["KL804"]):
        quantize(X)
''')
    result = project.runpytest()
    result.assert_outcomes(failed=1)
    assert "compare with a baseline" in result.stdout.str()


def test_a_named_rule_that_never_applied_fails_the_test(project):
    """A block that never quantizes cannot break KL001: its passing would prove nothing, so it fails, unless
    the test says that is expected."""
    project.makepyfile(test_layer='''
import torch


def test_never_quantizes(kernlint_check):
    with kernlint_check(rules=["KL001"]):
        torch.ones(4) + 1


def test_expected(kernlint_check):
    with kernlint_check(rules=["KL001"], allow_not_applicable=True) as run:
        torch.ones(4) + 1
    assert run.result.rule_status("KL001") == "not-applicable"
''')
    result = project.runpytest()
    result.assert_outcomes(passed=1, failed=1)
    out = result.stdout.str()
    assert "FAILED test_layer.py::test_never_quantizes" in out and "RuleNotApplicable" in out
    assert "KL001 did not apply" in out and "allow_not_applicable=True" in out


def test_the_kernlint_marker_gives_the_blocks_their_rules(project):
    project.makepyfile(test_layer='''
import pytest
from workload import X, quantize_with_placeholder_scale


@pytest.mark.kernlint(rules=["KL002"], allow_not_applicable=True)
def test_marked(kernlint_check):
    with kernlint_check() as run:
        quantize_with_placeholder_scale(X)
    assert [r.id for r in run.result.rules] == ["KL002"]


@pytest.mark.kernlint(rules=["KL001"])
def test_marked_regressed(kernlint_check):
    with kernlint_check():
        quantize_with_placeholder_scale(X)
''')
    result = project.runpytest("--strict-markers")
    result.assert_outcomes(passed=1, failed=1)
    assert "KL001 fill-before-block-quant" in result.stdout.str()


def test_the_project_config_selects_when_the_test_names_no_rules(project):
    project.makefile(".toml", kernlint='select = ["KL002"]\n')
    project.makepyfile(test_layer='''
from workload import X, quantize_with_placeholder_scale


def test_block(kernlint_check):
    with kernlint_check() as run:
        quantize_with_placeholder_scale(X)
    assert [r.id for r in run.result.rules] == ["KL002"]
''')
    project.runpytest().assert_outcomes(passed=1)


def test_the_project_configs_severity_applies_as_kernlint_check_applies_it(project):
    """[severity] in the project's config reaches the fixture's findings: KL001 at info does not fail a test
    (nor `kernlint check`)."""
    project.makefile(".toml", kernlint='[severity]\nKL001 = "info"\n')
    project.makepyfile(test_layer='''
from workload import X, quantize_with_placeholder_scale


def test_block(kernlint_check):
    with kernlint_check(rules=["KL001"]) as run:
        quantize_with_placeholder_scale(X)
    assert [(f.rule, f.severity) for f in run.result.findings] == [("KL001", "info")]
''')
    project.runpytest().assert_outcomes(passed=1)


def test_the_project_configs_fail_on_applies_below_the_tests_own(project):
    project.makefile(".toml", kernlint='fail-on = "error"\n\n[severity]\nKL001 = "warning"\n')
    project.makepyfile(test_layer='''
import pytest
from workload import X, quantize_with_placeholder_scale


def test_config_fail_on(kernlint_check):
    with kernlint_check(rules=["KL001"]) as run:
        quantize_with_placeholder_scale(X)
    assert run.result.fail_on == "error" and [f.severity for f in run.result.findings] == ["warning"]


def test_own_fail_on_wins(kernlint_check):
    with kernlint_check(rules=["KL001"], fail_on="warning"):
        quantize_with_placeholder_scale(X)


@pytest.mark.kernlint(fail_on="warning")
def test_marker_fail_on_wins(kernlint_check):
    with kernlint_check(rules=["KL001"]):
        quantize_with_placeholder_scale(X)
''')
    result = project.runpytest()
    result.assert_outcomes(passed=1, failed=2)
    out = result.stdout.str()
    assert "FAILED test_layer.py::test_own_fail_on_wins" in out
    assert "FAILED test_layer.py::test_marker_fail_on_wins" in out
