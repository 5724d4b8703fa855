"""baseline-sequence: launches (kernels, memcpys, memsets, ops on traces without GPU events) or syncs that
the candidate added to, or removed from, the baseline's launch sequence, found by sequence alignment."""
from __future__ import annotations

from typing import Literal

import msgspec

from kernlint.rules.checks.base import CheckKind, CheckSpec, baseline_finding, register
from kernlint.rules.result import STATUS_PASSED, RuleOutcome, decided

_ALL = ["kernel", "memcpy", "memset", "op", "sync"]


class BaselineSequence(CheckSpec, tag="baseline-sequence"):
    change: Literal["added", "removed"] = "added"
    # which launches count
    launches: list[Literal["kernel", "memcpy", "memset", "op", "sync"]] = msgspec.field(
        default_factory=lambda: list(_ALL))


def run_baseline(rule, comparison) -> RuleOutcome:
    import statistics  # here: only a baseline comparison needs it (start-up)

    check = rule.spec.check
    findings = []
    for program in comparison.programs:
        for change in program.sequence:
            launch = change.placed.launch
            if change.change != check.change or launch.kind not in check.launches:
                continue
            what = f"{launch.name} ({launch.category}" + (f", launched by {launch.op}" if launch.op else "") + ")"
            cost = round(statistics.median(launch.us), 3) if launch.us else None
            if check.change == "added":
                message = f"{what} is new in {change.placed.where()}"
            else:
                message = f"{what} is gone from {change.placed.where()} (as in the baseline)"
            if change.runs:
                message += f" in {change.runs} run(s) that launched another sequence than the rest"
            if launch.source:
                message += f"; line {launch.source}"
            if cost is not None:
                message += f"; {cost:g} µs a run"
            findings.append(baseline_finding(
                rule, comparison, program.name, message, trace=change.trace, scope=change.placed.scope,
                launch=launch, device_us=cost, improvement=check.change == "removed", ts=change.ts,
                group=change.group,
                details={"program": program.name, "change": change.change,
                         "position_in_scope": change.placed.index_in_scope + 1,
                         "scope_length": change.placed.scope_length, "position": launch.pos,
                         **({"variant_runs": change.runs} if change.runs else {})}))
    counts = "; ".join(f"{p.name}: " + ", ".join(f"{c} {b} -> {a}" for c, (b, a) in p.counts.items())
                       for p in comparison.programs if p.counts)
    note = f"launches per category: {counts}" if counts and findings else None
    if check.change == "removed":   # an improvement is never a failure
        return RuleOutcome(rule.id, rule.name, rule.severity, STATUS_PASSED, instances=len(comparison.programs),
                           findings=findings, note=note)
    return decided(rule, findings, None, len(comparison.programs), note)


register(CheckKind(
    type="baseline-sequence", spec=BaselineSequence, run_baseline=run_baseline,
    baseline_change=lambda spec: spec.change,
    summary="Launches or syncs added to (or removed from) the baseline's launch sequence, by alignment."))
