"""forbid-before-anchor: nothing of the listed categories runs in an anchor's own scope before it."""
from __future__ import annotations

import msgspec
import numpy as np

from kernlint.rules.anchors import find_anchors
from kernlint.rules.checks.base import CheckKind, CheckSpec, make_finding, named_scopes, register
from kernlint.rules.fields import DeviceCategories, OpCategories
from kernlint.rules.noise import CONTEXT_SEVERITY, replay_prologue_context
from kernlint.rules.result import decided, not_applicable
from kernlint.trace import names
from kernlint.trace.graphs import graph_replays
from kernlint.trace.patterns import compile_pattern
from kernlint.trace.rows import category_ok, inside_any, outermost
from kernlint.trace.scopes import AnchorSet, Scope


class ForbidBeforeAnchor(CheckSpec, tag="forbid-before-anchor"):
    device_categories: DeviceCategories = []    # kernels, memcpy, memset before the anchor kernel; ["*"] = any
    op_categories: OpCategories = []        # working ops before the anchor op (traces without GPU events)
    # Graph replays that nothing attributes: what, between the previous GEMM and the anchor, is a finding.
    kernel_order_categories: DeviceCategories = msgspec.field(default_factory=lambda: ["fill", "memset"])


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
    """Anchor kernels replayed from a CUDA graph that no capture attributed: they share one launch call, the
    graph launch, so their launching scope is unknown (kernel order is all there is)."""
    launcher = index.launcher[anchors]
    return np.array([lr >= 0 and names.is_graph_launch(str(index.name[lr])) for lr in launcher.tolist()],
                    dtype=bool)


def _in_backward(index, anchors: np.ndarray, level: str) -> np.ndarray:
    """Anchors issued inside an autograd backward node (the names table's `backward-node-op`)."""
    pattern = compile_pattern(names.named_pattern("backward-node-op"))
    out = np.zeros(len(anchors), dtype=bool)
    for i, a in enumerate(anchors.tolist()):
        host = int(index.launcher[a]) if level == "kernel" and index.launcher[a] >= 0 else a
        op = int(index.op[host]) if index.kind[host] != "op" else host
        while op >= 0:
            if pattern.search(str(index.name[op])):
                out[i] = True
                break
            op = int(index.parent_op[op])
    return out


def _replay_label(index, replay: int) -> str:
    label = graph_replays(index.table).labels.get(replay)
    return f"graph replay {index.replay_number(replay)}" + (f" of {label}" if label else "")


def _check_scoped(rule, index, level, anchors: list[int], replay: int, findings: list) -> list[int]:
    """Findings for anchors scoped by their launching unit (eager, or one attributed replay); returns the
    anchors that lie in no unit of one layer."""
    check = rule.spec.check
    anchor_set = set(anchors)
    by_thread = AnchorSet(index, anchors)
    unscoped = []
    where = f" ({_replay_label(index, replay)})" if replay >= 0 else ""
    for a in anchors:
        scope = index.anchor_scope(a, level, by_thread)
        anchor_name = str(index.short_name[a])
        if scope.kind == "anchor":
            unscoped.append(a)  # no unit of one layer encloses its launch: nothing can be said about "before"
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
            context = replay_prologue_context(index, r)   # torch's own fills before a graph launch
            findings.append(make_finding(rule, index, r, scope, f"{event} ({index.category[r]}) runs before "
                                         f"{anchor_name} in {scope.label}{where}", anchor_name,
                                         severity=CONTEXT_SEVERITY if context else None, context=context))
    return unscoped


def _check_by_kernel_order(rule, index, anchors: list[int], findings: list) -> None:
    """Anchors replayed from a graph with no unit to scope them: the replay's own kernel stream decides. The
    layer's unit runs from the end of the previous one (a GEMM or another anchor) to the anchor; a kernel of
    `kernel-order-categories` (fills, memsets) there is a finding, said to rest on kernel order only."""
    check = rule.spec.check
    replay_of = index.replay
    ts = index.ts
    by_replay: dict[int, np.ndarray] = {}
    anchor_set = set(anchors)
    for a in anchors:
        r = int(replay_of[a])
        if r < 0:
            continue
        stream = by_replay.get(r)
        if stream is None:
            rows = np.flatnonzero(replay_of == r)
            stream = by_replay[r] = rows[np.lexsort((rows, ts[rows]))]
        at = int(np.flatnonzero(stream == a)[0])
        before = []
        for d in stream[:at][::-1].tolist():
            if d in anchor_set or index.category[d] == "gemm":
                break
            before.append(d)
        label = _replay_label(index, r)
        scope = Scope(row=r, kind="graph", name=label.removeprefix("graph "), thread=str(index.thread[r]),
                      ts=float(index.ts[r]), end=float(index.end[r]))
        anchor_name = str(index.short_name[a])
        why = ("its capture records no module, range or stack to scope it" if index.launcher[a] != r
               else "no capture attributes the replayed kernels")
        for d in reversed(before):
            if category_ok(index, d, check.kernel_order_categories):
                findings.append(make_finding(
                    rule, index, d, scope, f"{index.short_name[d]} ({index.category[d]}) runs before "
                    f"{anchor_name} in {label}, after the previous GEMM (from the kernel order only: {why})",
                    anchor_name))


def _compiled_call(index, anchor: int) -> int:
    """The compiled-graph call op (`## Call CompiledFxGraph ##`, the names table's `compiled-graph-call-op`)
    the anchor kernel was launched in (by its launching call, or the captured launch a replay attributes it
    to), else -1."""
    pattern = compile_pattern(names.named_pattern("compiled-graph-call-op"))
    host = int(index.launcher[anchor])
    op = int(index.op[host]) if host >= 0 else -1
    while op >= 0:
        if pattern.search(str(index.name[op])):
            return op
        op = int(index.parent_op[op])
    return -1


def _writes_constants(index, args, kernel: int) -> bool:
    """A kernel that the compiler generated to write a buffer from constants (a fill: `new_ones`, `zeros`,
    `full`, made by inductor as a kernel of its own): its launching op is an inductor kernel whose recorded
    arguments hold one tensor, the buffer it writes. (Inductor names kernels after every op of the nodes it
    fused, so a name does not tell a fill from the norm beside it; the arguments do.)"""
    host = int(index.launcher[kernel])
    op = int(index.op[host]) if host >= 0 else -1
    if op < 0 or args is None or not compile_pattern(names.named_pattern("inductor-kernel-op")).search(
            str(index.name[op])):
        return False
    found = args.get(op)
    if found is None:
        return False
    tensors = [d for d in found.dims if isinstance(d, list) and d]
    return len(tensors) == 1


def _check_compiled_by_kernel_order(rule, index, anchors: list[int], findings: list) -> int:
    """Anchors launched inside a compiled graph (torch.compile): the compiler launches the graph's kernels from
    its generated code, so a fill it made for the layer (a placeholder passed to the quantization op, kept
    because the op takes it) has no module or frame of the layer; the graph's own kernel order decides. The
    layer runs from the previous GEMM (or anchor) to the anchor; a kernel there of `kernel-order-categories`, or
    one the compiler generated to write constants, is a finding. Returns how many anchors were judged so."""
    from kernlint.rules.evidence import op_args

    check = rule.spec.check
    args = op_args(index.table)
    anchor_set = set(anchors)
    judged = 0
    streams: dict[tuple, list[int]] = {}
    for a in anchors:
        call = _compiled_call(index, a)
        if call < 0:
            continue
        judged += 1
        replay = int(index.replay[a])
        key = (call, replay)
        stream = streams.get(key)
        if stream is None:
            if replay >= 0:
                rows = np.flatnonzero(index.replay == replay)
            else:
                rows = index.device_events_between(str(index.thread[call]), float(index.ts[call]),
                                                   float(index.end[call]))
            rows = np.asarray(rows, dtype=np.int64)
            keys = index.ts[rows] if replay >= 0 else index.launch_ts[rows]
            stream = streams[key] = rows[np.lexsort((rows, keys))].tolist()
        if a not in stream:
            continue
        before = []
        for d in stream[:stream.index(a)][::-1]:
            if d in anchor_set or index.category[d] == "gemm":
                break
            before.append(d)
        where = str(index.name[call])
        label = (_replay_label(index, replay) + ", " if replay >= 0 else "") + where
        scope = Scope(row=call, kind="graph", name=label, thread=str(index.thread[call]),
                      ts=float(index.ts[call]), end=float(index.end[call]))
        anchor_name = str(index.short_name[a])
        for d in reversed(before):
            constants = _writes_constants(index, args, d)
            if not (constants or category_ok(index, d, check.kernel_order_categories)):
                continue
            what = "a kernel the compiler generated to write a constant buffer" if constants else index.category[d]
            context = replay_prologue_context(index, d)
            findings.append(make_finding(
                rule, index, d, scope, f"{index.short_name[d]} ({what}) runs before {anchor_name} in the compiled "
                f"graph {label}, after the previous GEMM (from the compiled graph's kernel order: the compiler "
                "launched it from its generated code, outside the layer's module and frames)", anchor_name,
                severity=CONTEXT_SEVERITY if context else None, context=context))
    return judged


def op_level_note(rule, table) -> str:
    """Why a rule with a kernel anchor was checked at op level."""
    if not table.has_device_events:
        return "kernel-level check not applicable: the trace has no GPU events; checked at op level"
    return f"no kernel matches {names.pattern_label(rule.spec.anchor.kernel)}; checked at op level"


def scoped_anchors(rule, table, index):
    """(level, anchors) of the rule, those inside its [scope] where it names one; or the not-applicable outcome
    when there is none (forbid-before-anchor, forbid-after-anchor)."""
    level, anchors = find_anchors(rule, table, index)
    if level is None:
        return not_applicable(rule, anchor_reason(rule, table), absent=True)
    if rule.spec.scope.is_named:
        anchors = np.array(inside_any(index, named_scopes(index, rule), anchors.tolist()), dtype=np.int64)
        if not len(anchors):
            return not_applicable(rule, "no anchor lies inside the rule's [scope]")
    return level, anchors


def run(rule, table, index):
    found = scoped_anchors(rule, table, index)
    if not isinstance(found, tuple):
        return found
    level, anchors = found
    notes = []
    backward = _in_backward(index, anchors, level)
    if backward.any():
        # The rule is about forward layers: a backward node recomputes and casts back before its own quant.
        notes.append(f"{int(backward.sum())} anchor(s) in autograd backward nodes not checked (forward layers only)")
        anchors = anchors[~backward]
        if not len(anchors):
            return not_applicable(rule, "every anchor runs in an autograd backward node: the rule judges forward "
                                        "layers")
    groups: dict[int, list[int]] = {-1: anchors.tolist()}
    by_order: list[int] = []
    if level == "kernel":
        unattributed = _graph_replayed(index, anchors)
        by_order = anchors[unattributed].tolist()
        replay = index.replay[anchors]
        groups = {-1: anchors[~unattributed & (replay < 0)].tolist()}
        for a, r in zip(anchors.tolist(), replay.tolist()):
            if r >= 0 and a not in by_order:
                groups.setdefault(int(r), []).append(a)
        if by_order:
            notes.append(f"{len(by_order)} anchor kernel(s) replayed from CUDA graphs with no capture to attribute "
                         "them: checked from the kernel order only (the kernel-order categories between the "
                         "previous GEMM and the anchor)")
    elif rule.spec.anchor.kernel:
        notes.append(op_level_note(rule, table))
    findings: list = []
    unscoped: list[int] = []
    for replay, group in groups.items():
        if not group:
            continue
        if replay < 0:
            unscoped += _check_scoped(rule, index, level, group, replay, findings)
            continue
        with index.in_replay(replay):
            missed = _check_scoped(rule, index, level, group, replay, findings)
        by_order += missed   # a replay whose capture has no modules, ranges or stacks: kernel order decides
    if level == "kernel":
        compiled = _check_compiled_by_kernel_order(rule, index, [a for a in anchors.tolist() if a not in by_order],
                                                   findings)
        if compiled:
            notes.append(f"{compiled} anchor kernel(s) launched inside compiled graphs: also checked from the "
                         "graph's kernel order (fills and compiler-generated constant writes between the previous "
                         "GEMM and the anchor)")
    if by_order:
        _check_by_kernel_order(rule, index, by_order, findings)
        if len(by_order) > len(unscoped) and not any("kernel order" in n for n in notes):
            notes.append(f"{len(by_order)} replayed anchor kernel(s) whose capture has no module, range or stack "
                         "to scope them: checked from the kernel order only")
    checked = len(anchors)
    if checked and len(unscoped) == checked:
        return not_applicable(rule, "no anchor lies in a unit of one layer (every enclosing module, range or "
                                    "Python frame holds several GEMMs, modules or anchors, and so does the "
                                    "top-level op; or the trace has no ranges, modules or stacks): there is "
                                    "no scope to check")
    if unscoped:
        notes.append(f"{len(unscoped)} of {checked} anchor(s) lie in no unit of one layer (only coarse "
                     "ranges, modules or frames enclose them): not checked")
    return decided(rule, findings, level, checked, "; ".join(notes) or None)


register(CheckKind(
    type="forbid-before-anchor", spec=ForbidBeforeAnchor, run=run, needs_anchor=True,
    summary="Nothing of the listed categories runs in each anchor's own scope before the anchor."))
