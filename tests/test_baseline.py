"""Baselines: profiles, files, sequence alignment, timing statistics and the baseline rules (KL801-KL807)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from baseline_traces import FP8_LINEAR, Step, fp8_linear_trace
from kernlint.baseline import (
    Thresholds,
    build_baseline,
    compare_with_baseline,
    profile_traces,
    read_baseline,
    render_baseline,
    write_baseline,
)
from kernlint.baseline.environment import environment_of, environment_warnings
from kernlint.baseline.stats import compare_samples, hodges_lehmann, robust_cv
from kernlint.errors import BaselineError
from kernlint.pipeline import check_tables
from kernlint.rules.engine import check_trace
from kernlint.rules.loader import load_rules
from kernlint.trace.load import load_trace

ROOT = Path(__file__).resolve().parents[1]
GPU = ROOT / "fixtures" / "traces" / "gpu"
FILL = "vectorized_elementwise_kernel[FillFunctor<BFloat16>]"
ADD = "vectorized_elementwise_kernel[CUDAFunctor_add<BFloat16>]"


@pytest.fixture(scope="module")
def baseline_rules():
    rules = [r for r in load_rules() if r.needs_baseline]
    assert {r.id for r in rules} == {"KL801", "KL802", "KL803", "KL804", "KL805", "KL806", "KL807", "KL808"}
    return rules


def outcomes(report):
    return {o.rule: o for o in report.outcomes}


def baseline_of(*paths, refresh="kernlint baseline record base -o b.json"):
    return build_baseline(profile_traces([load_trace(p) for p in paths]), refresh_command=refresh)


def against(baseline, rules, *paths):
    return outcomes(check_tables([load_trace(p) for p in paths], rules, baseline=baseline)[-1])


# -- the GPU fixtures: a fill kernel inserted before the 1x128 quantization ---------------------------------
def test_the_inserted_fill_is_named_at_its_position_with_its_line(baseline_rules):
    found = against(baseline_of(GPU / "block_clean.pt.trace.json.gz"), baseline_rules,
                    GPU / "block_regressed.pt.trace.json.gz")
    added = found["KL801"]
    assert added.status == "failed"
    assert [f.event for f in added.findings] == [FILL, FILL]
    first = added.findings[0]
    assert first.scope == "module Fp8BlockLinearNewOnes_0"
    assert "at position 1 of 3, before scale_1x128_kernel" in first.message
    assert first.source == "regressed/fp8_linear_new_ones.py:17" and first.launch_op == "aten::fill_"
    assert first.device_us == pytest.approx(0.768)
    assert first.details["position_in_scope"] == 1 and first.details["scope_length"] == 3
    assert "fill 0 -> 2" in added.note
    # Nothing else changed: no new sync, nothing removed, and timing is not judged from one run each.
    assert found["KL802"].status == "passed" and found["KL805"].findings == []
    assert found["KL804"].status == "not-applicable" and "5 or more runs" in found["KL804"].reason


def test_the_other_way_round_is_an_improvement_with_the_refresh_command(baseline_rules):
    found = against(baseline_of(GPU / "block_regressed.pt.trace.json.gz"), baseline_rules,
                    GPU / "block_clean.pt.trace.json.gz")
    assert found["KL801"].status == "passed" and not found["KL801"].findings
    removed = found["KL805"]
    assert removed.status == "passed"          # an improvement never fails the gate
    assert [f.event for f in removed.findings] == [FILL, FILL]
    assert all("refresh the baseline: kernlint baseline record base -o b.json" in f.message
               for f in removed.findings)
    assert all(f.severity == "info" for f in removed.findings)


def test_a_trace_against_its_own_baseline_has_no_finding(baseline_rules):
    path = GPU / "block_regressed.pt.trace.json.gz"
    found = against(baseline_of(path), baseline_rules, path)
    assert not [f for o in found.values() for f in o.findings]


def test_baseline_rules_do_not_run_without_a_baseline():
    report = check_trace(load_trace(GPU / "block_clean.pt.trace.json.gz"), load_rules())
    assert not [o for o in report.outcomes if o.rule.startswith("KL8")]


# -- the file --------------------------------------------------------------------------------------------
def test_the_file_round_trips_in_a_stable_diffable_form(tmp_path):
    baseline = baseline_of(GPU / "block_clean.pt.trace.json.gz")
    path = write_baseline(tmp_path / "b.json", baseline)
    text = path.read_text()
    assert read_baseline(path) == baseline
    assert render_baseline(read_baseline(path)) == text          # stable: same text again
    data = json.loads(text)
    assert data["schema_version"] == 1
    lines = [line for line in text.splitlines() if '"name": "scale_1x128_kernel"' in line]
    assert len(lines) == 2 and all('"us": [' in line for line in lines)   # one launch a line
    assert not list(tmp_path.glob(".*"))                               # no temporary left behind


@pytest.mark.parametrize("content, problem", [
    ("{not json", "not JSON"),
    ('{"traceEvents": []}', "not a kernlint baseline"),
    ('{"schema_version": 99, "programs": {}}', "schema version 99"),
    ('{"schema_version": 1, "kernlint_version": "x", "created": "x", "programs": {"p": {"runs": "many"}}}',
     "malformed baseline"),
])
def test_a_bad_baseline_is_one_typed_error_naming_the_file(tmp_path, content, problem):
    path = tmp_path / "b.json"
    path.write_text(content)
    with pytest.raises(BaselineError) as err:
        read_baseline(path)
    assert str(path) in err.value.one_line() and problem in err.value.one_line()


def test_negative_times_in_a_baseline_are_refused(tmp_path):
    path = write_baseline(tmp_path / "b.json", baseline_of(GPU / "block_clean.pt.trace.json.gz"))
    path.write_text(path.read_text().replace('"us": [1.44]', '"us": [-1.44]', 1))
    with pytest.raises(BaselineError, match="negative or non-finite"):
        read_baseline(path)


# -- profiles --------------------------------------------------------------------------------------------
def test_each_profiler_step_is_a_run_and_gives_a_sample(tmp_path):
    program = profile_traces([load_trace(fp8_linear_trace(tmp_path / "t.json", runs=7, seed=1))])["t"]
    assert program.runs == 7 and len(program.total_us) == 7
    launches = program.scopes["module Fp8BlockLinear_0"].launches
    assert [launch.name for launch in launches] == [s.kernel for s in FP8_LINEAR]
    assert all(len(launch.us) == 7 for launch in launches)
    gemm = np.array(launches[1].us)
    assert 170 < np.median(gemm) < 190


def test_runs_with_another_sequence_are_not_timed(tmp_path, baseline_rules):
    """Runs of one program (two processes' traces: run1, run2) with another sequence: kept as a variant,
    untimed."""
    base = fp8_linear_trace(tmp_path / "run1.json", runs=6, seed=1)
    other = fp8_linear_trace(tmp_path / "run2.json", runs=2, seed=2, steps=FP8_LINEAR[:2])
    programs = profile_traces([load_trace(base), load_trace(other)])
    (program,) = programs.values()   # one program: the run numbers are not part of its identity
    assert program.runs == 6 and program.other_sequences == 2
    (variant,) = program.variants
    assert variant.runs == 2 and [launch.name for _, launch in variant.sequence()] == [
        s.kernel for s in FP8_LINEAR[:2]]


# -- timing ----------------------------------------------------------------------------------------------
def test_unchanged_runs_give_no_timing_finding(tmp_path, baseline_rules):
    baseline = baseline_of(fp8_linear_trace(tmp_path / "base.json", runs=20, seed=1))
    for seed in range(2, 12):
        found = against(baseline, baseline_rules, fp8_linear_trace(tmp_path / f"c{seed}.json", runs=10, seed=seed))
        assert found["KL804"].status == "passed", found["KL804"].findings
        assert found["KL804"].instances == 4      # three kernels and the total


def test_a_two_percent_slowdown_of_every_kernel_is_caught_on_the_total(tmp_path, baseline_rules):
    baseline = baseline_of(fp8_linear_trace(tmp_path / "base.json", runs=20, seed=1))
    found = against(baseline, baseline_rules,
                    fp8_linear_trace(tmp_path / "c.json", runs=10, seed=5, slowdown={"*": 1.02}))
    total = [f for f in found["KL804"].findings if f.event == "total device time"]
    assert len(total) == 1 and found["KL804"].status == "failed"
    details = total[0].details
    assert 0.015 < details["relative"] < 0.025 and details["p_value"] < 0.01
    assert details["ci_low_us"] > 0 and "CI" in total[0].message and "p = " in total[0].message


def test_a_five_percent_slowdown_of_one_steady_kernel_is_caught_and_named(tmp_path, baseline_rules):
    baseline = baseline_of(fp8_linear_trace(tmp_path / "base.json", runs=20, seed=1))
    found = against(baseline, baseline_rules,
                    fp8_linear_trace(tmp_path / "c.json", runs=10, seed=7, slowdown={ADD: 1.05}))
    flagged = {f.event for f in found["KL804"].findings}
    assert ADD in flagged
    assert "nvjet_sm90_qqtst_128x128_128x6_TN" not in flagged and "scale_1x128_kernel" not in flagged


def test_the_same_slowdown_of_a_noisy_kernel_stays_below_its_noise_threshold(tmp_path, baseline_rules):
    noisy = [Step("scale_1x128_kernel", "", 12.0, cv=0.04)] + FP8_LINEAR[1:]
    baseline = baseline_of(fp8_linear_trace(tmp_path / "base.json", runs=20, seed=1, steps=noisy))
    found = against(baseline, baseline_rules, fp8_linear_trace(tmp_path / "c.json", runs=10, seed=3, steps=noisy,
                                                               slowdown={"scale_1x128_kernel": 1.05}))
    assert "scale_1x128_kernel" not in {f.event for f in found["KL804"].findings}


def test_a_faster_kernel_is_an_improvement_not_a_failure(tmp_path, baseline_rules):
    baseline = baseline_of(fp8_linear_trace(tmp_path / "base.json", runs=20, seed=1))
    found = against(baseline, baseline_rules,
                    fp8_linear_trace(tmp_path / "c.json", runs=10, seed=4, slowdown={ADD: 0.9}))
    assert found["KL804"].status == "passed"
    improved = found["KL806"]
    assert improved.status == "passed" and ADD in {f.event for f in improved.findings}
    assert all("refresh the baseline" in f.message for f in improved.findings)


def test_timing_is_never_decided_from_one_run(tmp_path, baseline_rules):
    baseline = baseline_of(fp8_linear_trace(tmp_path / "base.json", runs=20, seed=1))
    found = against(baseline, baseline_rules,
                    fp8_linear_trace(tmp_path / "c.json", runs=1, seed=2, slowdown={"*": 1.5}))
    assert found["KL804"].status == "not-applicable" and "the candidate 1" in found["KL804"].reason
    assert not found["KL804"].findings


def test_strict_env_refuses_the_timing_verdict_when_the_gpu_differs(tmp_path, baseline_rules):
    baseline = baseline_of(fp8_linear_trace(tmp_path / "base.json", runs=20, seed=1))
    baseline.environment = {"gpu": "NVIDIA A100-SXM4-80GB"}
    tables = [load_trace(fp8_linear_trace(tmp_path / "c.json", runs=10, seed=2))]
    loose = compare_with_baseline(baseline, tables)
    assert loose.environment_warnings == ["GPU model differs from the baseline's: NVIDIA H200 "
                                          "(baseline: NVIDIA A100-SXM4-80GB)"]
    assert compare_with_baseline(baseline, tables, strict_env=True).environment_warnings == loose.environment_warnings
    found = outcomes(check_tables(tables, baseline_rules, baseline=baseline, strict_env=True)[-1])
    assert found["KL804"].status == "incomplete" and "--strict-env" in found["KL804"].reason
    assert found["KL801"].status == "passed"     # the launch sequence does not depend on the GPU's clocks
    found = outcomes(check_tables(tables, baseline_rules, baseline=baseline)[-1])
    assert found["KL804"].status == "passed" and "GPU model differs" in found["KL804"].note


def test_environment_from_nvml_metadata_names_throttling_and_other_processes():
    meta = {"gpu": {"name": "NVIDIA H200"}, "torch": "2.11.0",
            "nvml": {"driver_version": "580.1", "devices": [{"clocks_mhz": {"sm": 1500}, "max_clocks_mhz": {"sm": 1980},
                                                             "clocks_event_reasons": 0x4 | 0x1,
                                                             "other_processes": [{"pid": 1}]}]}}
    env = environment_of(meta)
    assert env["throttled_by"] == ["software power cap"] and env["other_processes"] == 1
    warnings = environment_warnings({"gpu": "NVIDIA H200", "driver": "570.0"}, [env])
    assert any("NVIDIA driver differs" in w for w in warnings)
    assert any("throttled during the candidate run (software power cap)" in w for w in warnings)
    assert any("1 other process(es)" in w for w in warnings)


@pytest.mark.parametrize("shift, noise, runs, expected", [
    (1.00, 0.005, 20, "same"),
    (1.05, 0.005, 20, "slower"),
    (0.95, 0.005, 20, "faster"),
    (1.05, 0.03, 20, "unknown"),   # 5% against a floor of 3 x a 2.4% noise: the interval reaches past it
    (1.003, 0.0005, 20, "same"),   # significant but below the 1% floor
])
def test_compare_samples_gates_by_effect_size_scaled_to_noise(shift, noise, runs, expected):
    rng = np.random.default_rng(0)
    base = rng.normal(100, 100 * noise, runs)
    cand = rng.normal(100 * shift, 100 * noise, runs)
    assert compare_samples(base, cand, Thresholds()).direction == expected


def test_compare_samples_needs_min_runs_on_both_sides():
    assert compare_samples([1.0] * 4, [2.0] * 20, Thresholds()) is None
    assert compare_samples([1.0] * 20, [2.0] * 4, Thresholds(min_runs=5)) is None


def test_hodges_lehmann_interval_covers_the_true_shift():
    rng = np.random.default_rng(1)
    base, cand = rng.normal(50, 1, 30), rng.normal(52, 1, 30)
    shift, low, high = hodges_lehmann(base, cand, 0.95)
    assert low < 2.0 < high and 1.4 < shift < 2.6 and high - low < 1.5


def test_robust_cv_ignores_one_outlier():
    assert robust_cv(np.array([100.0] * 9 + [1000.0])) == 0.0
    assert robust_cv(np.array([99.0, 100.0, 101.0] * 5)) == pytest.approx(0.014826, rel=1e-3)


# -- syncs and scratch -----------------------------------------------------------------------------------
def test_a_new_host_sync_is_its_own_finding_kind(tmp_path, baseline_rules):
    baseline = baseline_of(fp8_linear_trace(tmp_path / "base.json", runs=6, seed=1))
    synced = FP8_LINEAR[:1] + [Step("", "", 0, sync=True)] + FP8_LINEAR[1:]
    found = against(baseline, baseline_rules, fp8_linear_trace(tmp_path / "c.json", runs=6, seed=2, steps=synced))
    assert [f.event for f in found["KL802"].findings] == ["cudaStreamSynchronize"]
    assert "launched by aten::item" in found["KL802"].findings[0].message
    assert found["KL801"].status == "passed"      # a sync is not a launch
    assert "total device time is not compared" in found["KL804"].note


def test_scratch_growth_names_the_scope_and_the_bytes(tmp_path, baseline_rules):
    baseline = baseline_of(fp8_linear_trace(tmp_path / "base.json", runs=6, seed=1))
    grown = [FP8_LINEAR[0], Step(FP8_LINEAR[1].kernel, FP8_LINEAR[1].op, 180.0, alloc_bytes=1 << 20),
             FP8_LINEAR[2]]
    found = against(baseline, baseline_rules, fp8_linear_trace(tmp_path / "c.json", runs=6, seed=2, steps=grown))
    growth = found["KL803"]
    assert growth.status == "failed"
    scoped = [f for f in growth.findings if f.scope == "module Fp8BlockLinear_0"]
    assert {f.details["what"] for f in scoped} == {"allocated", "peak scratch"}
    assert all(f.bytes == 1 << 20 for f in scoped)
    # And back: a reduction, never a failure.
    back = against(baseline_of(tmp_path / "c.json"), baseline_rules, tmp_path / "base.json")
    assert back["KL807"].status == "passed" and back["KL807"].findings


def test_a_damaged_candidate_makes_the_baseline_verdicts_incomplete(tmp_path, baseline_rules):
    baseline = baseline_of(fp8_linear_trace(tmp_path / "base.json", runs=6, seed=1))
    path = fp8_linear_trace(tmp_path / "c.json", runs=6, seed=2)
    doc = json.loads(path.read_text())
    for event in doc["traceEvents"]:
        if event.get("cat") == "kernel":
            event["ts"] = "garbage"
            break
    path.write_text(json.dumps(doc))
    found = against(baseline, baseline_rules, path)
    assert {o.status for o in found.values()} <= {"incomplete", "failed"}
    assert found["KL801"].status == "incomplete"
