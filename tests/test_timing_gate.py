"""The timing gate's noise model (issue 20): timer ticks, between-process noise, one family per check,
two tests, three verdicts; on real H200 traces of unchanged code and on constructed samples."""
from __future__ import annotations

import json

import numpy as np
import pytest

from conftest import FIXTURES
from kernlint.baseline import build_baseline, profile_traces
from kernlint.baseline.model import Thresholds
from kernlint.baseline.stats import adjust_family, benjamini_hochberg, compare_samples, timer_quantum
from kernlint.cases import _slowed
from kernlint.pipeline import check_tables
from kernlint.rules.loader import load_rules
from kernlint.trace.load import load_trace

TIMING = FIXTURES / "traces" / "gpu-timing"
RULES = [r for r in load_rules() if r.id in ("KL804", "KL806")]


@pytest.fixture(scope="module")
def tiny():
    return {p: load_trace(TIMING / f"tiny-decoder-{p}.pt.trace.json.gz") for p in ("p01", "p02", "p03", "p06")}


def _timing(report):
    return {o.rule: o for o in report.outcomes}


def test_the_timer_tick_is_read_from_real_h200_durations(tiny):
    program = next(iter(profile_traces([tiny["p01"], tiny["p02"]]).values()))
    assert program.quantum_us == pytest.approx(0.032)
    assert program.run_process == [0] * 10 + [1] * 10 and program.processes == 2


def test_no_tick_is_claimed_for_nanosecond_durations():
    rng = np.random.default_rng(1)
    assert timer_quantum([rng.uniform(1, 50, 200)]) == 0.0
    assert timer_quantum([[1.312, 1.344]]) == 0.0   # too few distinct durations to believe a tick


def test_unchanged_code_in_another_process_gives_no_timing_finding_and_2_percent_slower_is_caught(tiny):
    baseline = build_baseline(profile_traces([tiny["p01"], tiny["p02"], tiny["p03"]]))
    same = _timing(check_tables([tiny["p06"]], RULES, baseline=baseline)[-1])
    assert same["KL804"].status == "passed" and not same["KL804"].findings
    assert not same["KL806"].findings
    slower = _timing(check_tables([_slowed(tiny["p06"], 1.02, None)], RULES, baseline=baseline)[-1])
    found = slower["KL804"].findings
    assert slower["KL804"].status == "failed"
    total = [f for f in found if f.scope == "total device time"]
    assert total and total[0].details["baseline_processes"] == 3 and total[0].details["quantum_us"] == 0.032


def test_a_two_tick_shift_of_a_constant_kernel_is_never_a_regression():
    """The issue's false alarm: every run of a 1.31 µs kernel takes the same ticks within a process, so the
    within-process noise is 0 and p is tiny; the shift is 2 ticks of 32 ns."""
    base, cand = [1.312] * 20, [1.376] * 10
    without_ticks = compare_samples(base, cand, Thresholds())
    assert without_ticks.direction == "slower"            # what a tick-blind gate says
    with_ticks = compare_samples(base, cand, Thresholds(), quantum_us=0.032)
    assert with_ticks.direction == "same" and with_ticks.floor_us == pytest.approx(0.08)
    assert compare_samples(base, [1.440] * 10, Thresholds(), quantum_us=0.032).direction == "slower"   # 4 ticks


def test_between_process_noise_raises_the_floor():
    rng = np.random.default_rng(2)
    medians = [10.0, 10.3, 9.8, 10.2]
    base = np.concatenate([rng.normal(m, 0.01, 10) for m in medians])
    groups = [g for g in range(4) for _ in range(10)]
    cand = rng.normal(10.3, 0.01, 10)   # another process, as far from the first as the third is
    alone = compare_samples(base[:10], cand, Thresholds())   # a baseline of one process cannot see the spread
    # ... so it is assumed (the prior, 0.5% of the median here: no timer tick), never 0
    assert alone.between_source == "prior" and alone.between_noise == pytest.approx(0.005)
    assert alone.base_processes == 1 and alone.direction == "slower"
    across = compare_samples(base, cand, Thresholds(), base_groups=groups)
    assert across.base_processes == 4 and across.between_noise > 0.01 and across.noise < 0.002
    assert across.floor_us > alone.floor_us and across.direction != "slower"


def test_unknown_says_how_many_more_runs_would_decide():
    rng = np.random.default_rng(3)
    base = rng.normal(100, 3, 20)
    cand = rng.normal(104, 3, 6)
    verdict = compare_samples(base, cand, Thresholds(min_runs=5))
    assert verdict.direction == "unknown" and verdict.runs_needed and verdict.runs_needed >= 1
    more = compare_samples(base, rng.normal(104, 3, 6 + verdict.runs_needed * 4), Thresholds(min_runs=5))
    assert more.direction != "unknown" or more.runs_needed < verdict.runs_needed


def test_benjamini_hochberg_keeps_a_null_family_quiet_and_finds_a_broad_change():
    null = [(i + 0.5) / 300 for i in range(300)]
    assert min(benjamini_hochberg(null)) == pytest.approx(0.5)
    broad = [0.008] * 300
    assert max(benjamini_hochberg(broad)) == pytest.approx(0.008)
    assert benjamini_hochberg([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.04, 0.04])


def test_a_family_adjustment_turns_a_lone_small_p_among_many_into_no_finding():
    rng = np.random.default_rng(4)
    verdicts = [compare_samples(rng.normal(10, 0.2, 10), rng.normal(10, 0.2, 10), Thresholds())
                for _ in range(200)]
    adjusted = adjust_family(verdicts, Thresholds())
    assert all(v.tests == 200 for v in adjusted)
    assert not [v for v in adjusted if v.direction in ("slower", "faster")]


def test_kolmogorov_smirnov_catches_a_slower_tail_at_the_same_median():
    rng = np.random.default_rng(5)
    base = rng.normal(10, 0.02, 40)
    cand = np.concatenate([rng.normal(10, 0.02, 28), rng.normal(11, 0.02, 12)])
    verdict = compare_samples(base, cand, Thresholds())
    assert abs(verdict.shift) < verdict.floor_us        # the median barely moved
    assert verdict.tail_shift > 0.5 and verdict.p_value < 0.01
    assert verdict.direction == "slower"


def test_host_time_of_a_cpu_trace_is_never_time_gated():
    trace = FIXTURES / "traces" / "cpu-runs"
    tables = [load_trace(p) for p in sorted(trace.rglob("*.pt.trace.json.gz"))[:1]]
    baseline = build_baseline(profile_traces(tables))
    outcome = _timing(check_tables(tables, RULES, baseline=baseline)[-1])["KL804"]
    assert outcome.status == "not-applicable" and "host time" in outcome.reason


def test_strict_timing_makes_an_unknown_timing_a_finding(tmp_path):
    """Five candidate runs 1.4% slower, against a noisy 20-run baseline (one process each: the floor is 1.5%,
    3 x the between-process prior): for the GEMM and the total the interval reaches both below and above it.
    Without --strict-timing that is a note and a warning (passed); with it, a KL804 finding."""
    from baseline_traces import fp8_linear_trace
    from kernlint.pipeline import BaselineInput, CheckRequest, Inputs, run_check

    baseline = build_baseline(profile_traces([load_trace(fp8_linear_trace(tmp_path / "b.json", runs=20, seed=1))]))
    cand = load_trace(fp8_linear_trace(tmp_path / "c.json", runs=5, seed=3, slowdown={"*": 1.014}))
    plain = run_check(CheckRequest(rules=RULES, inputs=Inputs(tables=[cand]),
                                  baseline=BaselineInput(baseline))).reports[-1]
    kl804 = _timing(plain)["KL804"]
    assert kl804.status == "passed" and "unknown" in kl804.note and "more run(s)" in kl804.note
    strict = run_check(CheckRequest(rules=RULES, inputs=Inputs(tables=[cand]),
                                   baseline=BaselineInput(baseline, strict_timing=True))).reports[-1]
    found = _timing(strict)["KL804"].findings
    assert len(found) == 2 and all("unknown" in f.message and f.message.endswith("(--strict-timing)") for f in found)
    assert all(f.details["runs_needed"] >= 1 for f in found)


@pytest.mark.parametrize("fmt", ["text", "json", "github", "markdown", "sarif", "junit"])
def test_an_unknown_timing_is_shown_in_every_format(tmp_path, fmt):
    from baseline_traces import fp8_linear_trace
    from kernlint.pipeline import BaselineInput, CheckRequest, Inputs, run_check
    from kernlint.report import RenderContext, get_format

    baseline = build_baseline(profile_traces([load_trace(fp8_linear_trace(tmp_path / "b.json", runs=20, seed=1))]))
    cand = load_trace(fp8_linear_trace(tmp_path / "c.json", runs=5, seed=3, slowdown={"*": 1.014}))
    result = run_check(CheckRequest(rules=RULES, inputs=Inputs(tables=[cand]), baseline=BaselineInput(baseline)))
    assert result.exit_code == 0
    rendered = get_format(fmt).renderer("check")(result, RenderContext())
    if not isinstance(rendered, str):   # text: a rich renderable
        from rich.console import Console

        console = Console(width=400, record=True, file=open(tmp_path / "out.txt", "w"))
        console.print(rendered)
        rendered = console.export_text()
    assert "unknown" in rendered and "more run(s)" in rendered, fmt


# -- issue 35: a baseline of one process (fixtures/traces/gpu-timing-1proc) ---------------------------------

ONE = FIXTURES / "traces" / "gpu-timing-1proc"


def _one(name: str):
    return load_trace(ONE / f"tiny-decoder-{name}.pt.trace.json.gz")


@pytest.fixture(scope="module")
def one_process_baseline():
    return build_baseline(profile_traces([_one("base-20runs")]))


@pytest.fixture(scope="module")
def unchanged_processes():
    return [_one(f"aa-p{i:02d}") for i in range(1, 13)]


def test_a_one_process_baseline_gives_no_false_alarm_on_12_unchanged_processes(one_process_baseline,
                                                                               unchanged_processes):
    """The baseline of one process (20 runs) against 12 fresh processes of the same code (10 runs each): no
    KL804, and every timing says its between-process spread was assumed, not measured as 0."""
    from kernlint.baseline.compare import compare

    flagged = []
    for table in unchanged_processes:
        kl804 = _timing(check_tables([table], RULES, baseline=one_process_baseline)[-1])["KL804"]
        assert kl804.status == "passed"
        flagged += kl804.findings
    assert flagged == []
    timings = compare(one_process_baseline, profile_traces([unchanged_processes[0]])).timings
    assert len(timings) == 25 and {t.verdict.between_source for t in timings} == {"prior"}
    assert all(t.verdict.between_noise >= 0.005 for t in timings)


def test_a_shift_below_the_floor_is_not_flagged_through_the_tail_of_one_process():
    """The issue's shape: a 2.43 µs SiLU takes one tick value in all 20 runs of a one-process baseline; a
    candidate process runs it 2 ticks slower (+0.064 µs, 2.6%: below the floor of 2.5 ticks, 0.080 µs), and
    its 10-run tail (90th percentile) is a little slower still (+0.099 µs). The tests see a certain change (the
    whole distribution moved); the tail moved past the floor only by the median's move, which is a shift of
    the process, below the floor: not slower. A tail that widens beyond the median's move still is."""
    base = [2.432] * 20
    cand = [2.496] * 7 + [2.528] * 2 + [2.560]
    verdict = compare_samples(base, cand, Thresholds(), quantum_us=0.032)
    assert verdict.shift == pytest.approx(0.064) and verdict.floor_us == pytest.approx(0.08)
    assert verdict.tail_shift > verdict.floor_us and verdict.p_value < 0.001
    assert verdict.between_source == "prior" and verdict.between_noise == pytest.approx(0.75 * 0.032 / 2.432)
    assert verdict.direction != "slower"
    assert adjust_family([verdict] * 24, Thresholds())[0].direction != "slower"   # nor in a check's family
    wider = compare_samples(base, [2.496] * 7 + [2.720] * 3, Thresholds(), quantum_us=0.032)
    assert wider.shift == pytest.approx(0.064) and wider.tail_widening > 0.2 and wider.direction == "slower"


def test_two_percent_slower_is_caught_against_a_one_process_baseline(one_process_baseline, unchanged_processes):
    """Every kernel 2% slower (the total +1.3 µs of 64.8): caught in 11 of the 12 processes, as without the
    prior (its floor, 3 x 0.5% = 1.5%, stays under 2%); the finding says the spread was assumed."""
    outcomes = [_timing(check_tables([_slowed(table, 1.02, None)], RULES, baseline=one_process_baseline)[-1])["KL804"]
                for table in unchanged_processes]
    assert sum(o.status == "failed" for o in outcomes) >= 11
    (total,) = [f for f in outcomes[0].findings if f.scope == "total device time"]
    details = total.details
    assert details["baseline_processes"] == 1 and details["candidate_processes"] == 1
    assert details["between_process_source"] == "prior" and details["between_process_cv"] == 0.005
    assert details["between_process_prior"] in total.message
    assert ("between processes 0.50% assumed (prior: the larger of 0.5% of the median and 0.75 ticks of 32 ns; "
            "one process on each side)") in total.message


@pytest.mark.parametrize("process", ["p01", "p02"])
def test_17_tokens_instead_of_16_fails_the_gate(tmp_path, process):
    """A batch change (+6%): cuBLAS picks other GEMM kernels, so the launch sequence changed (KL801)."""
    from click.testing import CliRunner

    from kernlint.cli import main

    baseline = tmp_path / "base.json"
    recorded = CliRunner().invoke(main, ["baseline", "record", str(ONE / "tiny-decoder-base-20runs.pt.trace.json.gz"),
                                         "-o", str(baseline), "--isolated"])
    assert recorded.exit_code == 0, recorded.output
    result = CliRunner().invoke(main, ["check", str(ONE / f"tiny-decoder-tok17-{process}.pt.trace.json.gz"),
                                       "--baseline", str(baseline), "--isolated", "--format", "json"])
    assert result.exit_code == 1, result.output
    found = {f["rule"] for f in json.loads(result.output)["findings"]}
    assert "KL801" in found


def test_a_timing_finding_carries_the_per_run_durations_of_both_sides(tiny):
    """The HTML report draws each side's runs (a strip plot), so the details carry them: in run order, with the
    process of each run where a side had several, and their medians are the verdict's."""
    baseline = build_baseline(profile_traces([tiny["p01"], tiny["p02"], tiny["p03"]]))
    slower = _timing(check_tables([_slowed(tiny["p06"], 1.02, None)], RULES, baseline=baseline)[-1])["KL804"]
    assert slower.findings
    for finding in slower.findings:
        d = finding.details
        assert len(d["baseline_runs_us"]) == d["baseline_runs"] == 30 and len(d["candidate_runs_us"]) == 10
        assert d["baseline_run_process"] == [0] * 10 + [1] * 10 + [2] * 10 and "candidate_run_process" not in d
        assert float(np.median(d["baseline_runs_us"])) == pytest.approx(d["baseline_median_us"], abs=1e-3)
        assert float(np.median(d["candidate_runs_us"])) == pytest.approx(d["candidate_median_us"], abs=1e-3)
    json.dumps(slower.findings[0].details)   # plain data, as every output format writes it
    # A long side is thinned evenly, and says so.
    verdict = compare_samples(list(np.linspace(10, 11, 2500)), [12.0] * 20, Thresholds())
    details = verdict.as_details()
    assert details["baseline_runs_step"] == 3 and len(details["baseline_runs_us"]) == 834
    assert details["candidate_runs_us"] == [12.0] * 20 and "candidate_runs_step" not in details
