"""contiguous-clone: a `.clone()` of a tensor that is already contiguous, inside the named (hot) scopes
(zoo family R2).

The clone is a top-level `aten::clone` (one that an op runs inside itself, as `.contiguous()` of a strided
tensor or `reshape` do, is not counted); its first argument's strides are the contiguous ones for its
shape. Such a clone is a full device-to-device copy (`Memcpy DtoD` or a copy kernel) and an allocation on
every call. It is needed only when the original is written in place later while the clone must keep the
old values, which a trace cannot show (it names no tensors). Not applicable on traces without input shapes
or strides.
"""
from __future__ import annotations

import numpy as np

from kernlint.rules.checks.base import CheckKind, CheckSpec, make_finding, register
from kernlint.rules.evidence import ITEMSIZE, contiguous_strides, numel, scoped_evidence
from kernlint.rules.result import RuleOutcome, decided, not_applicable
from kernlint.trace.rows import rows_matching


class ContiguousClone(CheckSpec, tag="contiguous-clone"):
    min_bytes: int = 0


def run(rule, table, index):
    found = scoped_evidence(rule, table, index)
    if isinstance(found, RuleOutcome):
        return found
    scopes, args = found
    wanted, info = [], {}
    clones = [r for r in rows_matching(index, ("op",), "^aten::clone$").tolist()
              if int(index.parent_op[r]) < 0]   # only the user's own clone, not one an op runs inside
    if not clones:
        return not_applicable(rule, "no aten::clone of the program's own anywhere in the trace: nothing of the "
                                    "rule's kind to judge")
    for r in clones:
        a = args.get(r)
        src = a.tensor(0) if a else None
        if src is None or src[2] is None or src[2] != contiguous_strides(src[0]):
            continue
        nbytes = numel(src[0]) * ITEMSIZE.get(src[1], 4)
        if nbytes < max(rule.spec.check.min_bytes, 1):
            continue
        wanted.append(r)
        info[r] = (src[0], src[1], nbytes)
    if not args.any_strides():
        return not_applicable(rule, "the trace has no input strides (record with record_shapes=True)")
    rows = np.array(wanted, dtype=np.int64)
    findings = []
    for scope in scopes:
        for r in index.rows_in_scope(scope, rows, key="ts").tolist():
            shape, dtype, nbytes = info[r]
            findings.append(make_finding(
                rule, index, r, scope,
                f"aten::clone copies a contiguous {dtype} tensor of shape {list(shape)} ({nbytes} B) in "
                f"{scope.label}", None, event=f"aten::clone {dtype} {list(shape)}"))
    return decided(rule, findings, "kernel" if table.has_device_events else "op", len(scopes))


register(CheckKind(
    type="contiguous-clone", spec=ContiguousClone, run=run, needs_scope=True,
    summary="No clone of an already contiguous tensor in the named scopes."))
