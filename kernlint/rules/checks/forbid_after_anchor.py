"""forbid-after-anchor: nothing of the listed categories runs in an anchor's own scope after it, before the
next GEMM (the consumer): the work that reshapes what the anchor wrote before the GEMM reads it."""
from __future__ import annotations

import msgspec
import numpy as np

from kernlint.rules.checks._cost_text import cost_phrase
from kernlint.rules.checks.base import CheckKind, CheckSpec, make_finding, register
from kernlint.rules.checks.forbid_before_anchor import op_level_note, scoped_anchors
from kernlint.rules.cost import finding_cost
from kernlint.rules.evidence import op_args
from kernlint.rules.fields import Categories, DeviceCategories, OpCategories
from kernlint.rules.result import decided, not_applicable
from kernlint.trace.rows import category_ok, outermost
from kernlint.trace.scopes import AnchorSet, Scope

# Dtypes of block scales: fp32, UE8M0 (one byte, or four packed into an int32).
_SCALE_DTYPES = frozenset({"float32", "int32", "float8_e8m0fnu"})


class ForbidAfterAnchor(CheckSpec, tag="forbid-after-anchor"):
    device_categories: DeviceCategories = []    # kernels, memcpy, memset after the anchor kernel
    op_categories: OpCategories = []        # working ops after the anchor op (traces without GPU events)
    # Where the anchor's consumer starts: the search ends at the first event of these categories.
    until_categories: Categories = msgspec.field(default_factory=lambda: ["gemm"])
    # The advice the finding ends with (what to do instead).
    advice: str = ""


def _what_is_copied(index, args, row: int) -> tuple[str, str]:
    """(the op that launched the event, what it copied: `its scales`, `its FP8 output`, or the tensor's
    dtype and shape) from the op's recorded inputs; the op's name alone where none were recorded."""
    op = row if index.kind[row] == "op" else int(index.op[row])
    if op < 0:
        return str(index.short_name[row]), ""
    # The outermost op of the copy (aten::contiguous, not the aten::copy_ inside it) says what the code did.
    while int(index.parent_op[op]) >= 0 and category_ok(index, int(index.parent_op[op]), ["copy"]):
        op = int(index.parent_op[op])
    found = args.get(op) if args is not None else None
    tensor = found.tensor(0) if found is not None else None
    if tensor is None:
        return str(index.short_name[op]), ""
    shape, dtype, _ = tensor
    dims = "x".join(str(d) for d in shape)
    if dtype in _SCALE_DTYPES:
        return str(index.short_name[op]), f"its scales ({dtype} [{dims}])"
    if dtype.startswith("float8"):
        return str(index.short_name[op]), f"its FP8 output ({dtype} [{dims}])"
    return str(index.short_name[op]), f"a {dtype} [{dims}] tensor"


def _consumer_start(index, host: int, after: float, scope: Scope) -> float:
    """When the call that issued the consumer (the GEMM's op or launch `host`) began: the earliest Python frame
    or op of the scope that starts after the anchor and encloses it (`block_scaled_mm(...)`, whose dequantizing
    copies on the CPU are the GEMM's own work, not a copy after the quantization)."""
    units = index.rows_in_scope(scope, index.rows_of(("python", "op")), key="ts")
    ts, end = index.ts[units], index.end[units]
    at = float(index.ts[host])
    around = units[(ts >= after) & (ts <= at) & (end >= index.end[host])]
    return float(index.ts[around].min()) if len(around) else at


def _after(index, level: str, anchor: int, scope: Scope, stop_cats: list[str], anchor_set: set) -> list[int]:
    """The events of the anchor's scope after it, up to the call that issued the first one of `stop_cats`
    (the GEMM) or another anchor."""
    if level == "kernel":
        rows = index.device_events_between(scope.thread, float(index.launch_ts[anchor]), scope.end)
        rows = rows[np.lexsort((rows, index.launch_ts[rows]))].tolist()
        host_of = index.launcher
        launcher = int(index.launcher[anchor])
        after = float(index.end[launcher]) if launcher >= 0 else float(index.launch_ts[anchor])
    else:
        after = float(index.end[anchor])
        rows = [r for r in index.work_ops_between(scope.thread, after, scope.end).tolist()
                if float(index.ts[r]) >= after]
        rows = sorted(outermost(index, rows), key=lambda r: (float(index.ts[r]), r))
        host_of = None
    out = []
    for r in rows:
        if r == anchor:
            continue
        if r in anchor_set or category_ok(index, r, stop_cats):
            host = int(host_of[r]) if host_of is not None else r
            if host >= 0:
                start = _consumer_start(index, host, after, scope)
                out = [c for c in out if float(index.launch_ts[c]) < start]
            break
        out.append(r)
    return out


def _check(rule, index, level, anchors: list[int], findings: list, where: str = "") -> list[int]:
    check = rule.spec.check
    cats = check.device_categories if level == "kernel" else check.op_categories
    args = op_args(index.table)
    anchor_set = set(anchors)
    by_thread = AnchorSet(index, anchors)
    unscoped = []
    for a in anchors:
        scope = index.anchor_scope(a, level, by_thread)
        if scope.kind == "anchor":
            unscoped.append(a)
            continue
        anchor_name = str(index.short_name[a])
        for r in _after(index, level, a, scope, check.until_categories, anchor_set):
            if not category_ok(index, r, cats):
                continue
            op_name, what = _what_is_copied(index, args, r)
            cost = cost_phrase(finding_cost(index, r, scope=scope))
            detail = ", ".join(p for p in (f"{op_name} of {what}" if what else op_name,
                                           str(index.short_name[r]) if index.kind[r] != "op" else "", cost) if p)
            message = (f"a {index.category[r]} after the FP8 quantization {anchor_name} in {scope.label}"
                       f"{where}, before the GEMM ({detail})" + (f": {check.advice}" if check.advice else ""))
            findings.append(make_finding(rule, index, r, scope, message, anchor_name))
    return unscoped


def run(rule, table, index):
    found = scoped_anchors(rule, table, index)
    if not isinstance(found, tuple):
        return found
    level, anchors = found
    notes = []
    groups: dict[int, list[int]] = {-1: anchors.tolist()}
    if level == "kernel":
        replay = index.replay[anchors]
        groups = {-1: anchors[replay < 0].tolist()}
        for a, r in zip(anchors.tolist(), replay.tolist()):
            if r >= 0:
                groups.setdefault(int(r), []).append(a)
    elif rule.spec.anchor.kernel:
        notes.append(op_level_note(rule, table))
    findings: list = []
    unscoped: list[int] = []
    for replay, group in groups.items():
        if not group:
            continue
        if replay < 0:
            unscoped += _check(rule, index, level, group, findings)
            continue
        # A replay's kernels are judged in the scope of the captured launch each is attributed to; one that
        # no capture attributes has no scope here and is not checked.
        with index.in_replay(replay):
            unscoped += _check(rule, index, level, group, findings,
                               f" (graph replay {index.replay_number(replay)})")
    checked = len(anchors)
    if checked and len(unscoped) == checked:
        return not_applicable(rule, "no anchor lies in a unit of one layer (every enclosing module, range or "
                                    "Python frame holds several GEMMs, modules or anchors; or the trace has no "
                                    "ranges, modules or stacks): there is no scope to check")
    if unscoped:
        notes.append(f"{len(unscoped)} of {checked} anchor(s) lie in no unit of one layer: not checked")
    return decided(rule, findings, level, checked, "; ".join(notes) or None)


register(CheckKind(
    type="forbid-after-anchor", spec=ForbidAfterAnchor, run=run, needs_anchor=True,
    summary="Nothing of the listed categories runs in each anchor's own scope after it, before the next GEMM."))
