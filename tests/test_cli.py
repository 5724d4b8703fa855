"""The command line: exit codes, formats, one-line errors, explain."""
from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from conftest import FIXTURES
from kernlint.cli import main
from kernlint.rules.loader import load_rules


@pytest.fixture(scope="module")
def traces(tmp_path_factory):
    """A regressed and a fixed CPU trace of the placeholder program."""
    from conftest import load_program
    from kernlint.capture.profiler import record_trace

    root = tmp_path_factory.mktemp("cli")
    return {name: record_trace(load_program(name).build("cpu"), root / f"{name}.pt.trace.json.gz", device="cpu")
            for name in ("placeholder_new_ones", "placeholder_new_empty")}


def python_frames(trace) -> list[str]:
    """The names of the Python-stack events (`python_function`) the profiler wrote into a trace, read raw."""
    opener = gzip.open if str(trace).endswith(".gz") else open
    with opener(trace, "rt") as fh:
        return [e["name"] for e in json.load(fh)["traceEvents"] if e.get("cat") == "python_function"]


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def test_exit_codes_follow_the_verdict(traces):
    assert run("check", traces["placeholder_new_ones"]).exit_code == 1
    assert run("check", traces["placeholder_new_empty"]).exit_code == 0
    assert run("check", "--exit-zero", traces["placeholder_new_ones"]).exit_code == 0
    assert run("check", "--ignore", "KL001", traces["placeholder_new_ones"]).exit_code == 0


def test_text_output_names_rule_scope_event_and_anchor(traces):
    out = run("check", traces["placeholder_new_ones"]).output
    for needle in ("KL001", "fill-before-block-quant", "Fp8BlockLinearNewOnes", "aten::new_ones", "scale_1x128"):
        assert needle in out


def test_json_schema(traces, tmp_path):
    out_file = tmp_path / "deep" / "report.json"
    out_file.parent.mkdir()
    result = run("check", "--format", "json", "-o", out_file, traces["placeholder_new_ones"])
    assert result.exit_code == 1 and result.output == ""
    data = json.loads(out_file.read_text())
    assert data["schema_version"] == 1
    (finding,) = data["findings"]
    for key in ("rule", "severity", "scope", "event", "anchor", "source"):
        assert key in finding
    assert finding["rule"] == "KL001" and finding["anchor"] == "scale_1x128"
    # the trace was recorded with Python stacks, so the fill's source is known: the program's method that
    # called new_ones, as the profiler names a Python frame (its file and the function's first line), refined by
    # the CLI to the method's statement that calls new_ones (the line after its def)
    assert python_frames(traces["placeholder_new_ones"]), "the capture recorded no Python stack"
    from conftest import load_program

    placeholder = load_program("placeholder_new_ones").Fp8BlockLinearNewOnes._placeholder_scale.__code__
    assert finding["source"].endswith(f"regressed/fp8_linear_new_ones.py:{placeholder.co_firstlineno + 1}")
    assert finding["details"]["source_line"] == "statement"
    assert finding["details"]["def_line"] == placeholder.co_firstlineno
    assert finding["function"] == placeholder.co_name == "_placeholder_scale"
    # no dummy init, a single rank: not applicable; the rule that found the fill is not among them
    not_applicable = set(data["rules_not_applicable"])
    assert {"KL002", "KL003", "KL004"} <= not_applicable and "KL001" not in not_applicable
    assert data["traces"][0]["rules"][0]["level"] == "op"


def test_bad_trace_is_one_line_and_exit_2(tmp_path):
    bad = tmp_path / "bad.pt.trace.json"
    bad.write_text('{"traceEvents": [')
    proc = subprocess.run([sys.executable, "-m", "kernlint.cli", "check", str(bad)], capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and str(bad) in lines[0] and "Traceback" not in proc.stderr


def test_bad_rule_file_is_one_line_and_exit_2(tmp_path, traces):
    bad = tmp_path / "KL950.toml"
    bad.write_text('id = "KL950"\nname = "x"\nseverity = "error"\nsummary = "s"\nbogus = 1\n')
    result = CliRunner().invoke(main, ["check", "--rules", str(bad), str(traces["placeholder_new_empty"])])
    assert result.exit_code == 2
    assert f"{bad}:5: unknown key `bogus`" in result.output


def test_unknown_selector_is_a_usage_error(traces):
    result = CliRunner().invoke(main, ["check", "--select", "KL77", str(traces["placeholder_new_empty"])])
    assert result.exit_code == 2 and "matches no rule" in result.output


def test_failed_output_write_is_one_line_and_exit_2(traces, tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("x")
    result = CliRunner().invoke(main, ["check", "-o", str(blocker / "r.json"), "--format", "json",
                                       str(traces["placeholder_new_empty"])])
    assert result.exit_code == 2 and "cannot write output" in result.output
    assert blocker.read_text() == "x"


@pytest.mark.parametrize("rule_id", [r.id for r in load_rules()])
def test_explain_prints_every_heading(rule_id):
    out = run("explain", rule_id).output
    for heading in ("## What it does", "## Why is this bad?", "## Example", "## Use instead", "## References"):
        assert heading in out


def test_rules_lists_shipped_rules():
    data = json.loads(run("rules", "--format", "json").output)
    assert {"KL001", "KL002"} <= {r["id"] for r in data}


def _fixtures_with_cases(where: Path, cases: dict[str, str]) -> Path:
    """A fixtures folder of these case files (name -> TOML) beside links to the checkout's traces."""
    where.mkdir()
    for entry in FIXTURES.iterdir():
        if entry.name != "cases":
            (where / entry.name).symlink_to(entry)
    (where / "cases").mkdir()
    for name, text in cases.items():
        (where / "cases" / name).write_text(text)
    return where


def test_audit_replay_checks_each_recorded_case_against_its_expectation(tmp_path):
    """The command's wiring, on one rule's cases: every recorded case of every rule is replayed one test each
    by tests/test_rule_cases.py, through the same kernlint.cases.evaluate_case."""
    kl302 = (FIXTURES / "cases" / "KL302.toml").read_text()
    recorded = kl302.count("\ntrace = ")
    result = run("audit", "--replay", "--fixtures", _fixtures_with_cases(tmp_path / "good", {"KL302.toml": kl302}),
                 "--format", "json")
    data = json.loads(result.output)
    assert result.exit_code == 0 and data["all_as_expected"] is True, data
    assert len(data["cases"]) == recorded >= 3, "the cases that replay no recorded trace are not audited"
    # one expectation turned round: that case is reported as not as expected, exit 1
    first = kl302.index('expect = "failed"', kl302.index("\ntrace = "))
    wrong = kl302[:first] + 'expect = "passed"' + kl302[first + len('expect = "failed"'):]
    result = run("audit", "--replay", "--fixtures", _fixtures_with_cases(tmp_path / "bad", {"KL302.toml": wrong}),
                 "--format", "json")
    data = json.loads(result.output)
    assert result.exit_code == 1 and data["all_as_expected"] is False
    assert sum(1 for c in data["cases"] if c["problems"]) == 1, data["cases"]


def test_audit_replay_from_the_checkout_refines_sources_and_keeps_the_cases(tmp_path, monkeypatch):
    """From the checkout's root the replay applies source mapping as `kernlint check` does: findings name the
    statement (fixtures/regressed/fp8_linear_new_ones.py:18), and a case's `source` pattern, which names the
    def line the profiler recorded (:17), still holds (the refined finding keeps it: details.def_line)."""
    kl001 = (FIXTURES / "cases" / "KL001.toml").read_text()
    folder = _fixtures_with_cases(tmp_path / "fixtures", {"KL001.toml": kl001})
    monkeypatch.chdir(FIXTURES.parent)
    result = run("audit", "--replay", "--fixtures", folder, "--format", "json")
    data = json.loads(result.output)
    assert result.exit_code == 0 and data["all_as_expected"] is True, [c for c in data["cases"] if c["problems"]]
    replayed = next(c for c in data["cases"] if c["case"] == "gpu-graph-replay-new-ones-with-capture")
    assert {f["source"] for f in replayed["findings"]} == {"fixtures/regressed/fp8_linear_new_ones.py:18"}
    assert {f["details"]["def_line"] for f in replayed["findings"]} == {17}


def test_explain_schema_prints_the_rule_language_reference():
    result = run("explain", "--schema")
    assert result.exit_code == 0
    for needle in ("# The kernlint rule language", "## Check types", "`rank-divergence`", "`nested`",
                   '"*"` means every *working* category', "@act-quant-1x128-kernel"):
        assert needle in result.output, needle
    assert run("explain").exit_code == 2


def test_a_folder_check_lists_what_it_skipped_and_the_run_groups(tmp_path):
    """The real HTA two-rank folder, plus a JSON of notes: both traces are found (their
    names are not *.pt.trace.json), the others are listed as skipped, and the group says 126 ranks are
    missing."""
    import shutil

    folder = tmp_path / "run"
    shutil.copytree(FIXTURES / "external" / "hta__trace_filter_2rank", folder)
    (folder / "rank0.notes.json").write_text(json.dumps({"torch": "2.11"}))
    result = run("check", folder, "--format", "json")
    data = json.loads(result.output)
    assert sorted(t["path"].rsplit("/", 1)[-1] for t in data["traces"] if not t["ranks"]) == [
        "trace_filter__sampled_rank-0.json.gz", "trace_filter__sampled_rank-1.json.gz"]
    assert [s["path"].rsplit("/", 1)[-1] for s in data["skipped"]] == ["rank0.notes.json"]
    # these HTA traces were recorded without with_stack (no python_function event): no finding can name a
    # source line, and none pretends to
    assert all(not python_frames(folder / name) for name in ("trace_filter__sampled_rank-0.json.gz",
                                                             "trace_filter__sampled_rank-1.json.gz"))
    assert data["findings"] and all(f["source"] is None for f in data["findings"])
    (group,) = [t for t in data["traces"] if t["ranks"]]
    assert group["ranks"] == [0, 1]
    assert any("126 of 128 ranks missing" in n for n in group["notes"])
    text = run("check", "-v", folder).output
    assert "Skipped 1 file(s)" in text and "rank0.notes.json" in text and "126 of 128 ranks missing" in text
    # without -v: the findings and the summary, not the notes nor the list of skipped files
    short = run("check", folder).output
    assert "KL004 host-sync-on-some-ranks" in short and "rank0.notes.json" not in short
    assert short.rstrip().splitlines()[-1].startswith(f"Found {len(data['findings'])} finding(s)")
