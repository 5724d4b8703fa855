"""Severity follows cost: a right finding whose cause costs less than its rule's `min-cost` is info, with the
context "negligible (x µs, y% of the step)".

Real traces judged finding by finding (issue 37) were full of right but useless findings: per-tensor uploads
of a pipeline, first-iteration syncs, tokenizer lifts, each a few µs in a step of tens of ms. A gate that
fails on them is switched off. So, after the findings of every trace are made (one pipeline: the CLI, the API,
the pytest fixture and the audit all pass here), each cause (kernlint.rules.causes.cause_key: one rule at one
source line, however many layers, steps, replays and ranks repeat it) is costed per step: its instances'
measured costs (Finding.cost) summed within each step (a trace's rank and `ProfilerStep#N` / graph replay, or
its whole window where it has no step). The cause is negligible when in every step it costs less than the
absolute floor `us`, or less than `share` of that step. Then its findings at warning or error become info:
they still show, they no longer fail the gate. A rule outcome left with no finding at its severity passes.

What is never negligible:
- a rule whose min-cost is "none": the mission's structural rules (KL001's fill before the quantization
  kernel costs about 1 µs a linear and 2% end to end; KL002's FP8 temporary is memory, not time), those
  whose harm is not time (random scales in dummy init, a sync inside graph capture), and the cross-rank
  rules (a rank doing work the others do not is a straggler they all wait for at the next collective,
  whatever its own cost);
- the baseline rules: a change against a recorded baseline is judged by its own thresholds;
- a cause with an instance whose cost the trace cannot measure on the device timeline (no cost; an
  allocation; an op's host time on a trace without device events): nothing proves it small.

Defaults (docs/configuration.md, `[min-cost]`): share 0.5% of the step, floor 0.5 µs a step (less than
the device time of the smallest kernel launch). A rule file may
set its own (`[min-cost] share = ..., us = ...`, or `min-cost = "none"`); `kernlint.toml`'s `[min-cost]`
sets the global values and per-rule ones over both.
"""
from __future__ import annotations

import dataclasses
import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from kernlint.rules.causes import cause_key, instance_step, number
from kernlint.rules.cost import DEVICE_TIME, HOST_WORK, SYNC, UPLOAD
from kernlint.rules.result import STATUS_FAILED, STATUS_PASSED, Finding, TraceReport, failing_floor
from kernlint.rules.schema import MinCostSpec
from kernlint.rules.severity import SEVERITY_ORDER

# The costs measured on the device timeline. An op's host time on a trace without device events (basis
# "host time") says nothing of what the op costs on a GPU (a CPU `.item()` is no sync): never negligible.
DECISIVE_BASES = frozenset({SYNC, UPLOAD, DEVICE_TIME, HOST_WORK})
DEFAULT_MIN_SHARE = 0.005
DEFAULT_MIN_US = 0.5
NEGLIGIBLE = "negligible"
NEGLIGIBLE_SEVERITY = "info"


def min_cost_of(rule) -> MinCostSpec | None:
    """The rule's min-cost (its file's, the configured or default values filling what it leaves out; a cause
    costing less than `us` µs, or less than `share` of the step, in each of its steps is negligible), or None
    when its findings keep their severity whatever they cost."""
    spec = rule.spec.min_cost
    if rule.needs_baseline or spec == "none":
        return None
    spec = spec or MinCostSpec()
    return MinCostSpec(share=DEFAULT_MIN_SHARE if spec.share is None else spec.share,
                       us=DEFAULT_MIN_US if spec.us is None else spec.us)


@dataclass(frozen=True)
class StepCost:
    """A cause's cost in its costliest step: µs, and the share of that step (None where unknown)."""

    us: float
    share: float | None
    of: str | None


def step_costs(findings: Sequence[Finding]) -> list[StepCost] | None:
    """The cause's cost in each step it ran in (its instances' costs summed per trace, rank and step), or None
    when an instance's cost was not measured."""
    per_step: dict[tuple, list] = defaultdict(list)
    for f in findings:
        us = number(f.cost.us) if f.cost is not None and f.cost.basis in DECISIVE_BASES else None
        if us is None:
            return None
        per_step[(f.trace, f.rank, instance_step(f))].append(f.cost)
    out = []
    for costs in per_step.values():
        shares = [number(c.share) for c in costs]
        ofs = {c.of for c in costs}
        share = math.fsum(shares) if None not in shares and len(ofs) == 1 else None
        out.append(StepCost(us=math.fsum(float(c.us) for c in costs), share=share, of=next(iter(ofs))))
    return out


def is_negligible(costs: Sequence[StepCost], limit: MinCostSpec) -> bool:
    """Below the floor, or below the share of its step, in every step."""
    return bool(costs) and all(c.us < limit.us or (c.share is not None and c.share < limit.share) for c in costs)


def describe(cost: StepCost) -> str:
    """`negligible (3.2 µs, 0.01% of the step)`: the costliest step's figures."""
    what = f"{cost.us:.1f} µs"
    if cost.share is not None:
        of = (cost.of or "the step").replace("the profiled window", "the window")
        what += f", {100 * cost.share:.2g}% of {of}"
    return f"{NEGLIGIBLE} ({what})"


def apply_min_cost(reports: list[TraceReport], rules: Sequence) -> list[TraceReport]:
    """The reports with each negligible cause's findings at warning or error made info, and the outcomes that
    no longer hold a finding at their severity passed. Reports are changed in place and returned."""
    limits = {r.id: min_cost_of(r) for r in rules}
    by_cause: dict[tuple, list[Finding]] = defaultdict(list)
    for report in reports:
        for f in report.findings:
            if limits.get(f.rule) is not None:
                by_cause[cause_key(f)].append(f)
    demoted: dict[int, str] = {}
    for key, found in by_cause.items():
        if all(SEVERITY_ORDER.get(f.severity, 0) <= SEVERITY_ORDER[NEGLIGIBLE_SEVERITY] for f in found):
            continue
        costs = step_costs(found)
        if costs is None or not is_negligible(costs, limits[key[0]]):
            continue
        context = describe(max(costs, key=lambda c: c.us))
        for f in found:
            demoted[id(f)] = context
    if not demoted:
        return reports
    by_id = {r.id: r for r in rules}
    for report in reports:
        for outcome in report.outcomes:
            if not any(id(f) in demoted for f in outcome.findings):
                continue
            outcome.findings = [_demote(f, demoted[id(f)]) if id(f) in demoted else f for f in outcome.findings]
            rule = by_id.get(outcome.rule)
            if outcome.status == STATUS_FAILED and rule is not None and not any(
                    SEVERITY_ORDER.get(f.severity, 0) >= failing_floor(rule) for f in outcome.findings):
                outcome.status = STATUS_PASSED
                extra = "its findings cost less than the rule's min-cost (negligible: info)"
                outcome.note = f"{outcome.note}; {extra}" if outcome.note else extra
    return reports


def _demote(f: Finding, context: str) -> Finding:
    if SEVERITY_ORDER.get(f.severity, 0) <= SEVERITY_ORDER[NEGLIGIBLE_SEVERITY]:
        return f
    details = dict(f.details or {})
    details["severity_before"] = f.severity
    return dataclasses.replace(f, severity=NEGLIGIBLE_SEVERITY, context=f.context or context, details=details)
