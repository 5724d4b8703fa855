"""baseline-scratch: bytes allocated, and peak scratch (bytes allocated and live at once), per scope and per
program, above (or below) the baseline's."""
from __future__ import annotations

from typing import Literal

from kernlint.rules.checks.base import CheckKind, CheckSpec, baseline_finding, register
from kernlint.rules.result import STATUS_PASSED, RuleOutcome, decided


class BaselineScratch(CheckSpec, tag="baseline-scratch"):
    direction: Literal["growth", "reduction"] = "growth"
    min_bytes: int = 4096          # smaller changes are allocator rounding, not a regression
    min_fraction: float = 0.05


def run_baseline(rule, comparison) -> RuleOutcome:
    check = rule.spec.check
    findings = []
    for program in comparison.programs:
        for change in program.scratch:
            delta = change.after - change.before
            grew = delta > 0
            if grew != (check.direction == "growth"):
                continue
            if abs(delta) < check.min_bytes or (change.before and abs(delta) / change.before < check.min_fraction):
                continue
            where = change.scope or f"the whole program ({program.name})"
            message = (f"{change.what} in {where}: {change.before:,} -> {change.after:,} bytes "
                       f"({delta:+,} B)")
            findings.append(baseline_finding(rule, comparison, program.name, message, trace=change.trace,
                                             scope=change.scope, bytes=delta, improvement=not grew,
                                             details={"what": change.what, "before": change.before,
                                                      "after": change.after}))
    if check.direction == "reduction":
        return RuleOutcome(rule.id, rule.name, rule.severity, STATUS_PASSED, instances=len(comparison.programs),
                           findings=findings)
    return decided(rule, findings, None, len(comparison.programs))


register(CheckKind(
    type="baseline-scratch", spec=BaselineScratch, run_baseline=run_baseline,
    baseline_change=lambda spec: "scratch",
    summary="Allocated bytes or peak scratch above (or below) the baseline's, per scope and per program."))
