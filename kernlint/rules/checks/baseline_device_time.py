"""baseline-device-time: kernels (and the program's total device time) that got slower, or faster, than in
the baseline, by the three-way timing verdict of kernlint.baseline.stats (slower / faster, the same, or
unknown with the runs that would decide). Only launches the alignment matched are timed; unknown timings
are findings only with --strict-timing."""
from __future__ import annotations

from typing import Literal

from kernlint.rules.checks.base import CheckKind, CheckSpec, baseline_finding, register
from kernlint.rules.result import STATUS_INCOMPLETE, STATUS_PASSED, RuleOutcome, decided, not_applicable


class BaselineDeviceTime(CheckSpec, tag="baseline-device-time"):
    direction: Literal["slower", "faster"] = "slower"


def _us(value: float, signed: bool = True) -> str:
    """Microseconds with as many decimals as their size deserves."""
    digits = 0 if abs(value) >= 100 else 2 if abs(value) >= 1 else 3
    return f"{value:+.{digits}f}" if signed else f"{value:.{digits}f}"


def _subject(change) -> str:
    placed = change.placed
    return change.subject if placed is None else (
        f"{change.subject} in {placed.scope} (launch {placed.index_in_scope + 1} of {placed.scope_length})")


def _evidence(verdict, limits) -> str:
    """What the verdict rests on: the runs and processes per side, the tests, the floor and its parts."""
    processes = f", {verdict.base_processes} vs {verdict.cand_processes} processes"
    tick = f", tick {verdict.quantum_us * 1000:.0f} ns" if verdict.quantum_us else ""
    if verdict.between_source == "prior":
        between = f", between processes {verdict.between_noise:.2%} assumed (prior: {verdict.between_prior})"
    elif verdict.between_source == "candidate":
        between = (f", between processes {verdict.between_noise:.2%} (measured on the candidate's processes; one "
                   f"process on the baseline side)")
    else:
        between = f", between processes {verdict.between_noise:.2%}" if verdict.base_processes > 1 else ""
    return (f"p = {verdict.p_value:.2g} (min of Mann-Whitney and Kolmogorov-Smirnov, doubled), "
            f"{verdict.p_adjusted:.2g} adjusted (Benjamini-Hochberg) over {verdict.tests} timing(s); "
            f"{verdict.base_runs} vs {verdict.cand_runs} runs{processes}; needed > {_us(verdict.floor_us, False)} "
            f"µs = {verdict.threshold:.1%} (max of {limits.min_effect:.1%}, {limits.noise_multiple:g} x noise "
            f"{verdict.noise:.2%}{between}, {limits.quantum_ticks:g} ticks{tick}, {limits.min_effect_us:g} µs)")


def _message(change, verdict, limits) -> str:
    word = "slower" if verdict.shift > 0 else "faster"
    # Slower by its tail alone (the median moved less than the floor): say what moved.
    tail = (f"; its slowest runs are slower: the 90th percentile {_us(verdict.tail_shift)} µs, "
            f"{_us(verdict.tail_widening)} µs beyond the median's move"
            if verdict.direction == "slower" and verdict.shift <= verdict.floor_us else "")
    return (f"{_subject(change)} is {abs(verdict.relative):.1%} {word}: {_us(verdict.shift)} µs a run "
            f"({limits.confidence:.0%} CI {_us(verdict.ci_low)} to {_us(verdict.ci_high)} µs; median "
            f"{_us(verdict.base_median, False)} -> {_us(verdict.cand_median, False)} µs{tail}); "
            + _evidence(verdict, limits))


def _unknown_message(change, verdict, limits) -> str:
    return (f"timing of {_subject(change)} is unknown: {_us(verdict.shift)} µs a run ({limits.confidence:.0%} CI "
            f"{_us(verdict.ci_low)} to {_us(verdict.ci_high)} µs) neither rules out nor shows a change of "
            f"{_us(verdict.floor_us, False)} µs; about {verdict.runs_needed} more run(s) would decide; "
            + _evidence(verdict, limits))


def run_baseline(rule, comparison) -> RuleOutcome:
    direction = rule.spec.check.direction
    timed = comparison.timings
    reasons = [f"{p.name}: {p.timing_note}" for p in comparison.programs if p.timing_note and not p.timing]
    if not timed:
        return not_applicable(rule, "; ".join(reasons) or "no program met its baseline")
    if comparison.timing_refused:
        outcome = not_applicable(rule, "")
        outcome.status = STATUS_INCOMPLETE
        outcome.reason = ("timing not judged (--strict-env): " + "; ".join(comparison.environment_warnings))
        return outcome
    findings = []
    unknown = comparison.unknown_timings
    for change in timed:
        strict_unknown = comparison.strict_timing and direction == "slower" and change.verdict.direction == "unknown"
        if change.verdict.direction != direction and not strict_unknown:
            continue
        launch = change.placed.launch if change.placed else None
        message = (_unknown_message if strict_unknown else _message)(change, change.verdict, comparison.thresholds)
        findings.append(baseline_finding(
            rule, comparison, change.program, message + (" (--strict-timing)" if strict_unknown else ""),
            trace=change.trace, scope=change.scope or change.subject, launch=launch,
            device_us=round(change.verdict.shift, 4), details=change.verdict.as_details(),
            improvement=direction == "faster"))
    same = sum(1 for c in timed if c.verdict.direction == "same")
    notes = [f"{len(timed)} timings compared: {same} the same, {len(unknown)} unknown"]
    if unknown and not (comparison.strict_timing and direction == "slower"):
        most = unknown[0]
        notes.append(f"unknown is not a failure (--strict-timing makes it one); the most undecided, "
                     f"{_subject(most)}, needs about {most.verdict.runs_needed} more run(s)")
    notes += [f"{p.name}: {p.timing_note}" for p in comparison.programs if p.timing_note]
    if comparison.environment_warnings:
        notes.append("timing environment: " + "; ".join(comparison.environment_warnings))
    if direction == "faster":
        return RuleOutcome(rule.id, rule.name, rule.severity, STATUS_PASSED, instances=len(timed),
                           findings=findings, note="; ".join(notes))
    return decided(rule, findings, None, len(timed), "; ".join(notes))


register(CheckKind(
    type="baseline-device-time", spec=BaselineDeviceTime, run_baseline=run_baseline,
    baseline_change=lambda spec: spec.direction,
    summary="Kernels slower (or faster) than in the baseline, by a two-sample test over repeated runs."))
