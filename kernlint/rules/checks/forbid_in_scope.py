"""forbid-in-scope: no event that passes the filter inside any instance of the named scope."""
from __future__ import annotations

import numpy as np

from kernlint.rules.checks._cost_text import cost_phrase
from kernlint.rules.checks.base import CheckKind, CheckSpec, make_finding, named_scopes, register, under_frames
from kernlint.rules.cost import finding_cost
from kernlint.rules.evidence import op_args
from kernlint.rules.fields import DeviceCategories, EventKinds, OpCategories, Patterns
from kernlint.rules.filters import kind_filter, needs_a_filter, present_anywhere, scope_rows
from kernlint.rules.noise import CONTEXT_SEVERITY, DATA_LOADING, under_data_loader
from kernlint.rules.result import decided, not_applicable
from kernlint.trace.kinds import DEVICE_KINDS, category_mask
from kernlint.trace.rows import EventFilter


class ForbidInScope(CheckSpec, tag="forbid-in-scope"):
    kinds: EventKinds = []                # event kinds (kernel, op, runtime, ...)
    names: Patterns = []                # regexes searched in printed event names
    device_categories: DeviceCategories = []
    op_categories: OpCategories = []
    nested: bool = False                 # also count ops that run inside a counted op
    # An op whose first argument was recorded as 0-dim does not count: a Python scalar lifted to a tensor
    # (`x[mask] = -inf`), not data built on the host. Needs shapes: without them the rule is not applicable.
    skip_scalar_inputs: bool = False
    # Python frames (regexes, or @names) under which an event does not count: torch.from_numpy's lift is of
    # a NumPy array it shares, not of Python data.
    exclude_frames: Patterns = []
    # Also a device event of the filter's kinds and device categories, whatever its name, whose launching call
    # blocks the host (runtime category sync): ROCm names a pageable upload `Host -> Device`, not `Pageable`,
    # and issues it with the blocking hipMemcpyWithStream.
    blocking_launches: bool = False
    # An event under the DataLoader's range (collate building CPU tensors) is right but not the step's:
    # info, with context "data loading" (kernlint.rules.noise).
    rank_noise: bool = False
    # Say each finding's measured cost (µs and share of the step) in its message.
    cost_in_message: bool = False


def _scalar_input(args, row: int) -> bool:
    """Whether the op's first argument was 0-dim, or its shapes were not recorded (nothing to tell)."""
    a = args.get(row)
    return a is None or not a.dims or a.dims[0] == []


def _blocking_launch_mask(index, flt: EventFilter) -> np.ndarray:
    """The filter's rows, and the device events of its kinds and device categories, whatever their names,
    whose launching call blocks the host."""
    unnamed = EventFilter(flt.kinds, (), flt.device_categories, flt.op_categories).mask(index)
    launcher = index.launcher
    blocking = np.zeros(len(launcher), dtype=bool)
    linked = launcher >= 0
    blocking[linked] = category_mask(index.columns, ("sync",))[launcher[linked]]
    return flt.mask(index) | (unnamed & blocking & index.is_kind(*DEVICE_KINDS))


def run(rule, table, index):
    scopes = named_scopes(index, rule)
    if not scopes:
        return not_applicable(rule, "no annotation, module, frame or op matches the rule's [scope]", absent=True)
    c = rule.spec.check
    flt = EventFilter.of(c)
    passes = _blocking_launch_mask(index, flt) if c.blocking_launches else None
    args = None
    if c.skip_scalar_inputs:
        args = op_args(table)
        if not args:
            return not_applicable(rule, "the trace has no input shapes (record with record_shapes=True): a Python "
                                        "scalar lifted to a tensor cannot be told from data built on the host")
    cache: dict = {}

    def left_out(r: int) -> bool:
        """A Python scalar lifted to a tensor, or an event under an excluded frame: not of the rule's kind."""
        return (args is not None and index.kind[r] == "op" and _scalar_input(args, r)) or bool(
            c.exclude_frames and under_frames(index, r, c.exclude_frames, cache))

    if not present_anywhere(index, kind_filter(flt).mask(index), left_out):
        return not_applicable(rule, "nothing of the rule's kind anywhere in the trace (no event of its kinds "
                                    "and categories)")
    findings = []
    for scope in scopes:
        for r in scope_rows(index, scope, flt, c.nested, passes):
            if left_out(r):
                continue
            event = str(index.short_name[r])
            context = DATA_LOADING if c.rank_noise and under_data_loader(index, r) else None
            cost = finding_cost(index, r, scope=scope) if c.cost_in_message else None
            findings.append(make_finding(rule, index, r, scope, f"{event} in {scope.label}"
                                         + "".join(f" ({p})" for p in (cost and cost_phrase(cost), context) if p),
                                         None, severity=CONTEXT_SEVERITY if context else None, context=context,
                                         cost=cost))
    return decided(rule, findings, "kernel" if table.has_device_events else "op", len(scopes))


register(CheckKind(
    type="forbid-in-scope", spec=ForbidInScope, run=run, needs_scope=True, validate=needs_a_filter,
    summary="No event that passes the filter inside any instance of the named scope."))
