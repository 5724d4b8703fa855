"""baseline-device-time: kernels (and the program's total device time) that got slower, or faster, than in
the baseline: a Mann-Whitney test over repeated runs with an effect size scaled to each kernel's noise
(kernlint.baseline.stats). Only launches the alignment matched are timed."""
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


def _message(change, verdict, limits) -> str:
    placed = change.placed
    subject = change.subject if placed is None else (
        f"{change.subject} in {placed.scope} (launch {placed.index_in_scope + 1} of {placed.scope_length})")
    word = "slower" if verdict.shift > 0 else "faster"
    return (f"{subject} is {abs(verdict.relative):.1%} {word}: {_us(verdict.shift)} µs a run "
            f"({limits.confidence:.0%} CI {_us(verdict.ci_low)} to {_us(verdict.ci_high)} µs; median "
            f"{_us(verdict.base_median, False)} -> {_us(verdict.cand_median, False)} µs), "
            f"p = {verdict.p_value:.2g} (Mann-Whitney, "
            f"{verdict.base_runs} vs {verdict.cand_runs} runs); needed > {verdict.threshold:.1%} "
            f"(max of {limits.min_effect:.1%} and {limits.noise_multiple:g} x noise {verdict.noise:.2%})")


def run_baseline(rule, comparison) -> RuleOutcome:
    direction = rule.spec.check.direction
    timed = [c for p in comparison.programs for c in p.timing]
    reasons = [f"{p.name}: {p.timing_note}" for p in comparison.programs if p.timing_note and not p.timing]
    if not timed:
        return not_applicable(rule, "; ".join(reasons) or "no program met its baseline")
    if comparison.timing_refused:
        outcome = not_applicable(rule, "")
        outcome.status = STATUS_INCOMPLETE
        outcome.reason = ("timing not judged (--strict-env): " + "; ".join(comparison.environment_warnings))
        return outcome
    findings = []
    for change in timed:
        if change.verdict.direction != direction:
            continue
        launch = change.placed.launch if change.placed else None
        findings.append(baseline_finding(
            rule, comparison, change.program, _message(change, change.verdict, comparison.thresholds),
            trace=change.trace, scope=change.scope or change.subject, launch=launch,
            device_us=round(change.verdict.shift, 4), details=change.verdict.as_details(),
            improvement=direction == "faster"))
    notes = [f"{len(timed)} timings compared"] + [f"{p.name}: {p.timing_note}" for p in comparison.programs
                                                    if p.timing_note]
    if comparison.environment_warnings:
        notes.append("timing environment: " + "; ".join(comparison.environment_warnings))
    if direction == "faster":
        return RuleOutcome(rule.id, rule.name, rule.severity, STATUS_PASSED, instances=len(timed),
                           findings=findings, note="; ".join(notes))
    return decided(rule, findings, None, len(timed), "; ".join(notes))


register(CheckKind(
    type="baseline-device-time", spec=BaselineDeviceTime, run_baseline=run_baseline,
    summary="Kernels slower (or faster) than in the baseline, by a two-sample test over repeated runs."))
