"""How a check kind says a finding's measured cost in its message (the cost itself: kernlint.rules.cost)."""
from __future__ import annotations

from kernlint.rules.result import Cost


def share_phrase(cost: Cost) -> str:
    """`46.3% of the step's device time`; the µs and basis where the trace gives no share."""
    if cost.share is None or cost.of is None:
        return f"{cost.us:.1f} µs {cost.basis}" if cost.us is not None else "cost unknown"
    return f"{cost.share:.1%} of {cost.of}"


def cost_phrase(cost: Cost) -> str:
    """`4.1 µs device time, 0.9% of the step's device time`; `4.1 µs host time` where no share is known; ""
    where nothing was measured."""
    if cost.us is None:
        return ""
    text = f"{cost.us:.1f} µs {cost.basis}"
    if cost.share is not None and cost.of:
        text += f", {cost.share:.1%} of {cost.of}"
    return text
