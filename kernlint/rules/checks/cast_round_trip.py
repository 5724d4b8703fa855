"""cast-round-trip: a cast a -> b whose result is next used by a cast back b -> a (zoo family R3).

Both casts are outermost `aten::_to_copy` ops on one thread; the intermediate is followed by shape and dtype
(the trace names no tensors): the first op after the first cast that takes a tensor of its shape and dtype b
(a top-level op: `aten::to` around the `_to_copy`) must be the cast back to a, inside the same scope
instance. A TensorList argument records its members' shapes but no dtypes: an op taking a list with a member
of that shape (`_foreach_copy_`) may be the copy's next use, and ends the search. A top-level op that records
no arguments (torch.compile's `Torch-Compiled Region: 0/0`) hides nothing: the ops inside it that record them
are uses too (kernlint.rules.evidence.uses_by_thread), so the copy of a CUDA-graph replay's inputs into its
static buffers is the next use it is. Not applicable on traces without input shapes.
"""
from __future__ import annotations

import numpy as np

from kernlint.rules.checks.base import CheckKind, CheckSpec, make_finding, register
from kernlint.rules.evidence import casts, scoped_evidence, use_of, uses_by_thread
from kernlint.rules.result import RuleOutcome, decided, not_applicable


class CastRoundTrip(CheckSpec, tag="cast-round-trip"):
    min_numel: int = 0


def run(rule, table, index):
    found = scoped_evidence(rule, table, index)
    if isinstance(found, RuleOutcome):
        return found
    scopes, args = found
    found = {r: (shape, src, to) for r, shape, src, to in casts(index, args) if src != to}
    if not found:
        return not_applicable(rule, "no cast between dtypes anywhere in the trace: nothing of the rule's kind to "
                                    "judge")
    # The use-level op around each cast (`aten::to` around `aten::_to_copy`): what the next-use search sees.
    by_top = {use_of(index, args, r): v for r, v in found.items()}
    by_thread = uses_by_thread(index, args)
    findings = []
    cast_rows = np.array(sorted(found), dtype=np.int64)
    for scope in scopes:
        firsts = index.rows_in_scope(scope, cast_rows, key="ts").tolist()
        for r in firsts:
            shape, src, mid = found[r]
            n = 1
            for d in shape:
                n *= int(d)
            if src == mid or n < rule.spec.check.min_numel:
                continue
            rows = by_thread.get(index.thread[r], np.array([], dtype=np.int64))
            top = use_of(index, args, r)
            start = int(np.searchsorted(index.ts[rows], index.end[top], "left"))
            for o in rows[start:].tolist():
                if index.ts[o] >= scope.end:
                    break
                oa = args.get(o)
                if oa is None:
                    continue
                if not any((t := oa.tensor(i)) is not None and t[0] == shape and t[1] == mid
                           for i in range(len(oa.types))):
                    if oa.list_holds_shape(shape):
                        break   # a TensorList consumer (`_foreach_copy_`) may take the copy: its next use
                    continue
                back = by_top.get(o)
                if back is not None and back[0] == shape and back[1] == mid and back[2] == src:
                    findings.append(make_finding(
                        rule, index, r, scope,
                        f"{src} -> {mid} -> {src} round trip of a tensor of shape {list(shape)} in {scope.label}: "
                        f"the {mid} copy's next use is the cast back", None,
                        event=f"aten::_to_copy {src} -> {mid} -> {src} {list(shape)}"))
                break
    return decided(rule, findings, "kernel" if table.has_device_events else "op", len(scopes))


register(CheckKind(
    type="cast-round-trip", spec=CastRoundTrip, run=run, needs_scope=True,
    summary="No cast a -> b whose next use is the cast back b -> a, in the named scopes."))
