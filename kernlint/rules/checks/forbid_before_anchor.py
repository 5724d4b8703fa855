"""forbid-before-anchor: nothing of the listed categories runs in an anchor's own scope before it."""
from __future__ import annotations

import numpy as np

from kernlint.rules.checks.base import CheckKind, CheckSpec, make_finding, named_scopes, register
from kernlint.rules.result import decided, not_applicable
from kernlint.trace import names
from kernlint.trace.rows import category_ok, drop_nested, inside_any, outermost, rows_matching
from kernlint.trace.scopes import AnchorSet
from kernlint.trace.table import DEVICE_KINDS


class ForbidBeforeAnchor(CheckSpec, tag="forbid-before-anchor"):
    device_categories: list[str] = []    # kernels, memcpy, memset before the anchor kernel; ["*"] = any
    op_categories: list[str] = []        # working ops before the anchor op (traces without GPU events)


def find_anchors(rule, table, index) -> tuple[str | None, np.ndarray]:
    """Kernel-level anchors where the trace has GPU events and a kernel matches; else op-level ones."""
    anchor = rule.spec.anchor
    if anchor.kernel and table.has_device_events:
        rows = rows_matching(index, DEVICE_KINDS, anchor.kernel)
        if len(rows):
            return "kernel", rows
    if anchor.op:
        rows = drop_nested(index, rows_matching(index, ("op", "annotation"), anchor.op))
        if len(rows):
            return "op", rows
    return None, np.empty(0, dtype=np.int64)


def anchor_reason(rule, table) -> str:
    anchor = rule.spec.anchor
    parts = []
    if anchor.kernel:
        parts.append(f"no kernel matches {names.pattern_label(anchor.kernel)}" if table.has_device_events
                     else "the trace has no GPU events (kernel-level check)")
    if anchor.op:
        parts.append(f"no op or range matches {names.pattern_label(anchor.op)}")
    return "; ".join(parts)


def _graph_replayed(index, anchors: np.ndarray) -> np.ndarray:
    """Anchor kernels replayed from a CUDA graph share one launch call: their launching scope is unknown."""
    launcher = index.launcher[anchors]
    return np.array([lr >= 0 and names.is_graph_launch(str(index.name[lr])) for lr in launcher.tolist()],
                    dtype=bool)


def run(rule, table, index):
    level, anchors = find_anchors(rule, table, index)
    if level is None:
        return not_applicable(rule, anchor_reason(rule, table), absent=True)
    if rule.spec.scope.is_named:
        anchors = np.array(inside_any(index, named_scopes(index, rule), anchors.tolist()), dtype=np.int64)
        if not len(anchors):
            return not_applicable(rule, "no anchor lies inside the rule's [scope]")
    notes = []
    if level == "kernel":
        graph = _graph_replayed(index, anchors)
        if graph.all():
            return not_applicable(rule, "every anchor kernel was replayed from a CUDA graph (no per-kernel launch "
                                        "to attribute)")
        if graph.any():
            notes.append(f"{int(graph.sum())} anchor kernel(s) replayed from CUDA graphs were not checked")
        anchors = anchors[~graph]
    elif rule.spec.anchor.kernel:
        notes.append("kernel-level check not applicable: the trace has no GPU events; checked at op level"
                     if not table.has_device_events else
                     f"no kernel matches {names.pattern_label(rule.spec.anchor.kernel)}; checked at op level")
    check = rule.spec.check
    anchor_list = anchors.tolist()
    anchor_set = set(anchor_list)
    by_thread = AnchorSet(index, anchor_list)
    findings = []
    unscoped = 0
    for a in anchor_list:
        scope = index.anchor_scope(a, level, by_thread)
        anchor_name = str(index.short_name[a])
        if scope.kind == "anchor":
            unscoped += 1  # no unit of one layer encloses its launch: nothing can be said about "before"
            continue
        if level == "kernel":
            rows = [r for r in index.device_events_between(scope.thread, scope.ts, index.launch_ts[a]).tolist()
                    if r not in anchor_set and category_ok(index, r, check.device_categories)]
        else:
            a_ts, a_end = index.ts[a], index.end[a]
            cand = index.work_ops_between(scope.thread, scope.ts, a_ts).tolist()
            rows = [r for r in cand if index.end[r] <= a_ts or not (index.ts[r] <= a_ts and index.end[r] >= a_end)]
            rows = outermost(index, [r for r in rows if category_ok(index, r, check.op_categories)])
        for r in rows:
            event = str(index.short_name[r])
            findings.append(make_finding(rule, index, r, scope, f"{event} ({index.category[r]}) runs before "
                                         f"{anchor_name} in {scope.label}", anchor_name))
    if anchor_list and unscoped == len(anchor_list):
        return not_applicable(rule, "no anchor lies in a unit of one layer (every enclosing module, range or "
                                    "Python frame holds several GEMMs, modules or anchors, and so does the "
                                    "top-level op; or the trace has no ranges, modules or stacks): there is "
                                    "no scope to check")
    if unscoped:
        notes.append(f"{unscoped} of {len(anchor_list)} anchor(s) lie in no unit of one layer (only coarse "
                     "ranges, modules or frames enclose them): not checked")
    return decided(rule, findings, level, len(anchor_list), "; ".join(notes) or None)


register(CheckKind(
    type="forbid-before-anchor", spec=ForbidBeforeAnchor, run=run, needs_anchor=True,
    summary="Nothing of the listed categories runs in each anchor's own scope before the anchor."))
