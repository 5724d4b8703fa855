"""`kernlint baseline record` and `--baseline` on check / run / audit, through the command line."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from baseline_traces import fp8_linear_trace
from conftest import REPO
from kernlint.cli import main

ROOT = Path(__file__).resolve().parents[1]
GPU = ROOT / "fixtures" / "traces" / "gpu"
CLEAN, REGRESSED = GPU / "block_clean.pt.trace.json.gz", GPU / "block_regressed.pt.trace.json.gz"


def kernlint(*args, cwd: Path):
    """The CLI run in `cwd` (where a config file would be found)."""
    old = os.getcwd()
    os.chdir(cwd)
    try:
        return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)
    finally:
        os.chdir(old)


def record(cwd: Path, *sources) -> Path:
    out = cwd / "kernlint-baseline.json"
    result = kernlint("baseline", "record", *sources, "-o", out, "--isolated", cwd=cwd)
    assert result.exit_code == 0, result.output
    assert result.output.startswith(f"kernlint: wrote {out}")
    return out


def test_a_regressed_gpu_trace_names_the_inserted_fill_at_its_position(tmp_path):
    baseline = record(tmp_path, CLEAN)
    result = kernlint("check", REGRESSED, "--baseline", baseline, "--select", "KL8", "--isolated", cwd=tmp_path)
    assert result.exit_code == 1, result.output
    assert ("KL801 launch-added [error] vectorized_elementwise_kernel[FillFunctor<BFloat16>] (fill, launched by "
            "aten::fill_) is new in module Fp8BlockLinearNewOnes_0 at position 1 of 3, before scale_1x128_kernel; "
            "line regressed/fp8_linear_new_ones.py:17") in result.output
    # Timing is not judged from one run, and the report says so even though nothing failed on it.
    assert "not timed: timing needs 5 or more runs" in result.output
    # the baseline's header counts the checked trace's events, and says so (not the baseline file's)
    events = json.loads(kernlint("check", REGRESSED, "--format", "json", "--isolated", cwd=tmp_path).output)
    count = [t["events"] for t in events["traces"] if t["subject"] != "baseline"][0]
    assert f"baseline {baseline}  compared with the {count} events of the checked traces" in result.output


def test_the_other_way_round_reports_an_improvement_and_passes(tmp_path):
    baseline = record(tmp_path, REGRESSED)
    # only the baseline rules: the subject is the comparison, and block_clean's RMSNorm, written as a chain of
    # kernels, truly draws a KL902 unfused-norm warning (issue 37) that would fail the check on its own
    result = kernlint("check", CLEAN, "--baseline", baseline, "--select", "KL8", "--format", "json", "--isolated",
                      cwd=tmp_path)
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    removed = [f for f in data["findings"] if f["rule"] == "KL805"]
    assert len(removed) == 2 and all(f["severity"] == "info" for f in removed)
    # following the refresh command accepts the change: it records the candidate's traces, not the old ones
    assert all(f["message"].endswith(f"refresh the baseline: kernlint baseline record {CLEAN} -o {baseline}")
               for f in removed)
    assert {f["event"] for f in removed} == {"vectorized_elementwise_kernel[FillFunctor<BFloat16>]"}


def test_sarif_of_a_baseline_check_points_at_the_launching_line(tmp_path):
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((ROOT / "tests" / "data" / "sarif-schema-2.1.0.json").read_text())
    baseline = record(tmp_path, CLEAN)
    result = kernlint("check", REGRESSED, "--baseline", baseline, "--format", "sarif", "--isolated", cwd=tmp_path)
    assert result.exit_code == 1
    log = json.loads(result.output)
    jsonschema.validators.validator_for(schema)(schema).validate(log)
    added = [r for r in log["runs"][0]["results"] if r["ruleId"] == "KL801"]
    # The fill added in both layers is one cause (one line): one result, its two instances listed.
    assert len(added) == 1 and added[0]["properties"]["instances"] == len(added[0]["relatedLocations"]) == 2
    location = added[0]["locations"][0]["physicalLocation"]
    assert location["artifactLocation"]["uri"] == "regressed/fp8_linear_new_ones.py"
    assert location["region"]["startLine"] == 17
    rule_ids = {r["id"] for r in log["runs"][0]["tool"]["driver"]["rules"]}
    assert {"KL801", "KL804"} <= rule_ids


def test_timing_over_repeated_runs_through_the_cli(tmp_path):
    baseline = record(tmp_path, fp8_linear_trace(tmp_path / "main" / "t.json", runs=20, seed=1))
    same = fp8_linear_trace(tmp_path / "pr" / "same.json", runs=10, seed=2)
    slower = fp8_linear_trace(tmp_path / "pr" / "slow.json", runs=10, seed=3, slowdown={"*": 1.03})
    assert kernlint("check", same, "--baseline", baseline, "--isolated", cwd=tmp_path).exit_code == 0
    result = kernlint("check", slower, "--baseline", baseline, "--isolated", cwd=tmp_path)
    assert result.exit_code == 1
    assert "KL804 device-time-regression [warning] total device time is 3." in result.output
    assert "p = " in result.output and "CI" in result.output
    # The thresholds come from the config: a 5% floor lets the 3% slowdown through.
    (tmp_path / "kernlint.toml").write_text("[thresholds]\nmin-effect = 0.05\n")
    assert kernlint("check", slower, "--baseline", baseline, cwd=tmp_path).exit_code == 0


def test_the_baseline_path_can_come_from_the_config(tmp_path):
    baseline = record(tmp_path, CLEAN)
    (tmp_path / "kernlint.toml").write_text(f'baseline = "{baseline.name}"\nselect = ["KL8"]\n')
    result = kernlint("check", REGRESSED, cwd=tmp_path)
    assert result.exit_code == 1 and "KL801" in result.output


def _recorded(change) -> str:
    data = json.loads((ROOT / "fixtures" / "baselines" / "h200-fp8-block-linear.json").read_text())
    change(data["programs"]["fp8-block-linear"])
    return json.dumps(data)


@pytest.mark.parametrize("content, problem", [
    ("", "not JSON"),
    ('{"schema_version": 7, "programs": {}}', "baseline schema version 7"),
    # issue 22: deep nesting, bad run counts, more samples than runs, megabyte values
    ('{"schema_version": 1, "programs": ' + "[" * 100_000 + "]" * 100_000 + "}", "nests too deeply"),
    (_recorded(lambda p: p.update(runs=-3)), "fp8-block-linear has runs = -3; at least 1"),
    (_recorded(lambda p: p.update(total_us=p["total_us"] * 2)), "has 40 timed runs of 20"),
    (_recorded(lambda p: next(iter(p["scopes"].values()))["launches"][0].update(us=[1.0] * 21)),
     "has 21 samples for 20 runs"),
    ('{"schema_version": "' + "x" * 1_000_000 + '", "programs": {}}', "more characters)"),
])
def test_a_bad_baseline_is_one_line_exit_2(tmp_path, content, problem):
    bad = tmp_path / "b.json"
    bad.write_text(content)
    result = CliRunner().invoke(main, ["check", str(CLEAN), "--baseline", str(bad), "--isolated"])
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"kernlint: error: {bad}: ") and problem in lines[0]


def test_baseline_rules_alone_without_a_baseline_is_exit_2(tmp_path):
    result = CliRunner().invoke(main, ["check", str(CLEAN), "--select", "kl804", "--isolated"])
    assert result.exit_code == 2 and "add --baseline FILE" in result.output


def test_without_a_baseline_the_baseline_rules_are_not_listed(tmp_path):
    result = CliRunner().invoke(main, ["check", str(CLEAN), "--format", "json", "--isolated"])
    data = json.loads(result.output)
    assert not [r for r in data["rules_not_applicable"] + data["rules_passed"] if r.startswith("KL8")]


def test_record_refuses_both_or_neither_source_and_unknown_workloads(tmp_path):
    out = tmp_path / "b.json"
    for args in ([], [str(CLEAN), "--workload", "fp8-block-linear"], ["--workload", "no-such-workload"]):
        result = CliRunner().invoke(main, ["baseline", "record", *args, "-o", str(out), "--isolated"])
        assert result.exit_code == 2, (args, result.output)
        assert len(result.output.strip().splitlines()) == 1
    assert not out.exists()


def test_record_from_a_workload_and_run_against_it_on_the_cpu(tmp_path):
    """The same workload, recorded with five runs and run again: the launch sequence matches; timing is
    judged (five runs each side) but CPU op times are too noisy to assert on here."""
    out = tmp_path / "b.json"
    result = kernlint("baseline", "record", "--workload", "fp8-dummy-init", "--repeat", "5", "--device", "cpu",
                      "-o", out, "--isolated", cwd=tmp_path)
    assert result.exit_code == 0, result.output
    data = json.loads(out.read_text())
    program = data["programs"]["fp8-dummy-init"]
    assert program["runs"] == 5 and program["timing_basis"] == "host"
    assert data["refresh_command"] == ("kernlint baseline record --workload fp8-dummy-init --repeat 5 --device cpu "
                                       f"-o {out}")
    result = kernlint("run", "fp8-dummy-init", "--device", "cpu", "--repeat", "5", "--out", tmp_path / "runs",
                      "--baseline", out, "--select", "KL801,KL802,KL805", "--format", "json", "--isolated",
                      cwd=tmp_path)
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    baseline_report = [t for t in report["traces"] if t["path"].startswith("baseline ")]
    assert len(baseline_report) == 1
    assert {r["rule"]: r["status"] for r in baseline_report[0]["rules"]} == {
        "KL801": "passed", "KL802": "passed", "KL805": "passed"}


def test_a_workload_baseline_meets_the_ranks_of_a_run_of_that_workload(tmp_path):
    """The traces of `kernlint run fp8-tp-mlp` are programs `fp8-tp-mlp/rank r` (their run metadata names the
    workload), as `baseline record --workload fp8-tp-mlp` names them; a baseline file of older kernlint, which
    named them `rank r`, still meets them."""
    ranks = ROOT / "fixtures" / "traces" / "cpu-gloo" / "fp8-tp-mlp"
    by_workload = tmp_path / "by-workload.json"
    assert kernlint("baseline", "record", ranks, "-o", by_workload, "--isolated", cwd=tmp_path).exit_code == 0
    data = json.loads(by_workload.read_text())
    assert sorted(data["programs"]) == ["fp8-tp-mlp/rank 0", "fp8-tp-mlp/rank 1"]
    data["programs"] = {name.split("/")[1]: p for name, p in data["programs"].items()}   # as older kernlint named them
    by_rank = tmp_path / "by-rank.json"
    by_rank.write_text(json.dumps(data))
    data["programs"] = {f"fp8-tp-mlp/{name}": p for name, p in data["programs"].items()}
    for baseline in (by_rank, by_workload):
        result = kernlint("check", ranks, "--baseline", baseline, "--select", "KL801,KL802", "--format", "json",
                          "--isolated", cwd=tmp_path)
        assert result.exit_code == 0, result.output
        report = json.loads(result.output)
        compared = [t for t in report["traces"] if t["path"].startswith("baseline ")]
        assert {r["rule"]: r["status"] for r in compared[0]["rules"]} == {"KL801": "passed", "KL802": "passed"}
        assert "compares nothing" not in result.output
    other = tmp_path / "other-workload.json"
    data["programs"] = {f"fp8-other/{name}": p for name, p in json.loads(by_rank.read_text())["programs"].items()}
    other.write_text(json.dumps(data))
    result = kernlint("check", ranks, "--baseline", other, "--select", "KL801", "--isolated", cwd=tmp_path)
    assert result.exit_code == 4 and "compares nothing" in result.output   # another workload's: not matched


def test_programs_take_the_names_older_baselines_gave_them_only_where_the_baseline_has_them():
    """A program is named by its identity; against a baseline file of older kernlint, which named traces
    `trace` or `rank r` (and workloads `W`, `W/rank r`), a program takes the older name the baseline holds."""
    from kernlint.baseline.profile import TraceRuns, identified, named_as_in_baseline

    def part(path, rank=None, workload=None, world=None):
        return identified(TraceRuns(path, "", "device", 0, [], [], workload, world, rank=rank,
                                    named=workload or ""))

    parts = [part("a/layer.json", None), part("rank-0.json", 0), part("rank-5.json", 5),
             part("a/x.json", 0, "fp8-tp-mlp", 2), part("a/y.json", 0, "fp8-dummy-init", 1),
             part("a/z.json", 2, "fp8-tp-mlp", 4)]
    assert [p.program for p in parts] == ["layer", "rank 0", "rank 5", "fp8-tp-mlp/rank 0", "fp8-dummy-init",
                                          "fp8-tp-mlp/rank 2"]
    named = named_as_in_baseline(parts, {"trace", "rank 5", "rank 0", "fp8-dummy-init", "rank 2"})
    assert [p.program for p in named] == ["trace", "rank 0", "rank 5", "rank 0", "fp8-dummy-init", "rank 2"]
    assert [p.program for p in named_as_in_baseline(parts, {"layer"})] == [p.program for p in parts]


def test_record_keeps_every_program_of_a_folder_and_the_variants_of_one(tmp_path):
    """Two programs' traces are two programs (before: one program `trace` whose odd run was left out); runs of
    one program that launched another sequence are kept as its variant, and the user is told."""
    out = tmp_path / "b.json"
    result = CliRunner().invoke(main, ["baseline", "record", str(CLEAN), str(GPU / "dummy_init_fixed.pt.trace.json.gz"),
                                       "-o", str(out), "--isolated"])
    assert result.exit_code == 0, result.output
    assert "another sequence" not in result.stderr
    programs = json.loads(out.read_text())["programs"]
    assert sorted(programs) == ["block_clean", "dummy_init_fixed"]
    assert all(p["runs"] == 1 and "other_sequences" not in p for p in programs.values())
    runs = ROOT / "fixtures" / "traces" / "gpu-programs" / "pr-runs"
    result = CliRunner().invoke(main, ["baseline", "record", str(runs), "-o", str(out), "--isolated"])
    assert result.exit_code == 0, result.output
    assert ("kernlint: warning: fp8-layer: 1 of 2 run(s) launched another sequence than the rest: kept as the "
            "program's variant") in result.stderr
    (program,) = json.loads(out.read_text())["programs"].values()
    assert program["other_sequences"] == 1 and len(program["variants"]) == 1
    assert "issued" not in program and "issued" not in program["variants"][0]   # candidate-side only


def test_record_a_user_workload_in_two_processes_on_the_cpu(tmp_path):
    """`--workload path/file.py:callable` (as `kernlint run` takes it) and `--processes 2`: the baseline holds
    both processes' runs, marked by process, and says how to record it again."""
    out = tmp_path / "b.json"
    program = REPO / "fixtures" / "gpu_programs" / "tiny_decoder.py"
    result = kernlint("baseline", "record", "--workload", f"{program}:build", "--processes", "2", "--repeat", "3",
                      "--device", "cpu", "-o", out, "--isolated", cwd=tmp_path)
    assert result.exit_code == 0, result.output
    data = json.loads(out.read_text())
    recorded = data["programs"]["build"]
    assert recorded["runs"] == 6 and recorded["run_process"] == [0, 0, 0, 1, 1, 1]
    assert recorded["timing_basis"] == "host" and len(recorded["traces"]) == 2
    assert data["refresh_command"] == (f"kernlint baseline record --workload {program}:build --processes 2 "
                                       f"--repeat 3 --device cpu -o {out}")



def test_a_baseline_that_meets_none_of_the_checked_programs_is_incomplete_never_passed(tmp_path):
    two_ranks = record(tmp_path, ROOT / "fixtures" / "traces" / "gpu-tp2-nccl" / "fp8-tp-mlp")
    empty = tmp_path / "empty.json"
    data = json.loads(two_ranks.read_text())
    empty.write_text(json.dumps({**data, "programs": {}}))
    kl80x = "KL801,KL802,KL803,KL804,KL805,KL806,KL807"
    for baseline in (two_ranks, empty):   # a 2-rank baseline against one trace; a baseline of no program
        result = kernlint("check", REGRESSED, "--baseline", baseline, "--select", kl80x, "--isolated", cwd=tmp_path)
        assert result.exit_code == 4, result.output
        assert "the baseline compares nothing" in result.output and "(0 passed, 7 not applicable)" in result.output
        verdicts = json.loads(kernlint("check", REGRESSED, "--baseline", baseline, "--select", kl80x, "--format",
                                       "json", "--isolated", cwd=tmp_path).output)
        statuses = {r["status"] for t in verdicts["traces"] for r in t["rules"]}
        assert statuses == {"not-applicable"}, statuses
        # KL808 says which programs met nothing: a finding on each side, and the gate fails
        result = kernlint("check", REGRESSED, "--baseline", baseline, "--select", "KL808", "--format", "json",
                          "--isolated", cwd=tmp_path)
        assert result.exit_code == 1, result.output
        sides = sorted(f["details"]["side"] for f in json.loads(result.output)["findings"])
        assert sides == (["baseline", "baseline", "candidate"] if baseline == two_ranks else ["candidate"])
        allowed = kernlint("check", REGRESSED, "--baseline", baseline, "--select", kl80x, "--allow-incomplete",
                           "--isolated", cwd=tmp_path)
        assert allowed.exit_code == 0, allowed.output


def test_a_baseline_path_that_is_a_fifo_is_refused_without_waiting(tmp_path):
    fifo = tmp_path / "baseline.json"
    os.mkfifo(fifo)
    result = CliRunner().invoke(main, ["check", str(CLEAN), "--baseline", str(fifo), "--isolated"])
    assert result.exit_code == 2
    assert "not a regular file (a FIFO)" in result.output
