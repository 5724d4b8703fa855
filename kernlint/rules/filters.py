"""Which events a scoped check looks at: the events of one scope instance that pass a filter, whether the
trace holds any event of a rule's kind at all (else its verdict is not applicable), and the filter a kind
needs. Shared by forbid-in-scope, forbid-sync-in-scope and max-count."""
from __future__ import annotations

import numpy as np

from kernlint.trace.rows import HOST_KINDS, EventFilter, outermost


def scope_rows(index, scope, event_filter: EventFilter, nested: bool, passes: np.ndarray | None = None
               ) -> list[int]:
    """Events issued inside one scope instance that pass the filter (or the mask `passes`), in issue order.
    Without `nested`, an op counts only when no other op of the scope encloses it (aten::linear, not the copy_
    it runs); with it, every matching op counts."""
    passes = event_filter.mask(index) if passes is None else passes
    device = index.device_events_between(scope.thread, scope.ts, scope.end)
    host = index.rows_in_scope(scope, index.rows_of(HOST_KINDS), key="ts")
    host = host[host != scope.row]
    is_op = index.kind_code[host] == index.kind_code_of("op")
    if not nested:
        # An op counts only when its enclosing op is outside the scope instance. Runtime calls and device
        # events are not ops: they count wherever they match (a sync inside `.cpu()`), but not twice when
        # the op around them matches too (see `outermost`).
        host = host[~is_op | ~np.isin(index.parent_op[host], host[is_op])]
    candidates = np.concatenate([device[passes[device]], host[passes[host]]]).tolist()
    rows = [r for r in candidates if not index.in_machinery(r)]
    if nested:
        return sorted(rows, key=lambda r: index.launch_ts[r])
    return sorted(outermost(index, rows), key=lambda r: index.launch_ts[r])

def needs_a_filter(rule):
    c = rule.spec.check
    if not (c.kinds or c.names or c.device_categories or c.op_categories):
        return f"{c.type} needs at least one of kinds, names, device-categories, op-categories", ["check", "type"]
    return None

def kind_filter(flt: EventFilter) -> EventFilter:
    """The events of the rule's kind: its kinds and categories, names aside when it has categories (a pinned
    upload is of KL501's kind, an upload it judges and passes; a trace with no upload at all has none)."""
    if flt.device_categories or flt.op_categories:
        return EventFilter(flt.kinds, (), flt.device_categories, flt.op_categories)
    return flt


def present_anywhere(index, mask: np.ndarray, left_out=None) -> bool:
    """Whether any event that is not set-up machinery (the profiler's, torch's compiler's and graph capture's
    own work: ScopeIndex.in_machinery) passes `mask` (and is not `left_out(row)`, the
    rule's own exclusions): where none does, a pass would be vacuous (an upload rule on a trace that uploads
    nothing, a from-Python-data rule where the only lift is torch.from_numpy's), so the verdict is not
    applicable."""
    return any(not index.in_machinery(r) and not (left_out and left_out(r))
               for r in np.flatnonzero(mask)[:10_000].tolist())
