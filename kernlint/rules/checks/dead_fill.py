"""dead-fill: a fill whose buffer is fully overwritten before anything reads it (zoo family R1).

A trace names no tensors: ops carry their inputs' shapes, dtypes and strides (record_shapes) and the
allocator's `[memory]` events carry addresses and sizes (profile_memory), but no op says which allocation
it reads or writes. The data flow this check follows is therefore the one a trace can prove:

- the fill: an `aten::fill_` / `aten::zero_` that is not run inside some other op's implementation (it may
  sit below a factory op: `zeros`, `full`, `new_ones`, `zeros_like`...). Its buffer is its first argument:
  shape, dtype, strides; when a factory op made it, the allocation the factory made (address, bytes) bounds
  its lifetime (the buffer cannot be written after it is freed);
- the next use: the first top-level op (no op around it) on the same thread, after the fill and while the
  buffer lives, that takes a tensor of exactly the buffer's shape, dtype and strides;
- a full overwrite: that use is a whole-tensor writer with the buffer in its output position: `copy_`
  (and the in-place RNG ops that write every element: `uniform_`, `normal_`...; not another fill) with
  the buffer as `self`, or an op's `out=` argument (positions from the shipped table of torch's operator
  schemas, trace/op_schemas.py: the same verdict with or without torch installed). Anything else (an
  in-place accumulate, a read, a view that may lead to a partial write) ends the search without a finding.

Two tensors of one shape and dtype look alike: when a write's source has the buffer's shape too, the
finding says so. Without `[memory]` events or without input shapes the flow cannot be followed and the
rule is not applicable, with the reason.

The op-argument columns the event table drops are read back from the trace file (kernlint.rules.evidence,
`op_args`), once per table; the other R1-R3 kinds share them.
"""
from __future__ import annotations

import numpy as np

from kernlint.rules.checks.base import CheckKind, CheckSpec, make_finding, register
from kernlint.rules.evidence import (
    ITEMSIZE,
    OpArgs,
    evidence_problem,
    numel,
    op_args,
    unit_of,
    use_of,
    uses_by_thread,
)
from kernlint.rules.noise import CONTEXT_SEVERITY, replay_prologue_context
from kernlint.rules.result import decided, not_applicable
from kernlint.trace.dtypes import dtype_from_input_type
from kernlint.trace.names import named_pattern
from kernlint.trace.op_schemas import out_positions
from kernlint.trace.patterns import compile_pattern
from kernlint.trace.rows import rows_matching

# ---------------------------------------------------------------------------------------------------------
# The check.

class DeadFill(CheckSpec, tag="dead-fill"):
    min_bytes: int = 0            # ignore fills of smaller buffers


def _is(name: str, pattern: str) -> bool:
    return compile_pattern(named_pattern(pattern)).search(name) is not None


def _fills(index) -> list[int]:
    """fill_/zero_ ops that no other op runs as part of its own implementation (factory ops aside)."""
    out = []
    names = index.name
    for r in rows_matching(index, ("op",), named_pattern("dead-fill-fill-op")).tolist():
        p = int(index.parent_op[r])
        if p >= 0 and _is(str(names[p]), "dead-fill-fill-op"):
            continue   # zero_ -> fill_: the outer one counts
        ok = True
        while p >= 0:
            if not _is(str(names[p]), "dead-fill-factory-op"):
                ok = False
                break
            p = int(index.parent_op[p])
        if ok:
            out.append(r)
    return out


def _writes_fully(name: str, args: OpArgs, positions: list[int]) -> bool:
    """Whether the op writes every element of the argument(s) at `positions` without reading them."""
    if positions == [0] and _is(name, "full-overwrite-op"):
        return True
    tensors = tuple(bool(isinstance(t, str) and dtype_from_input_type(t)) for t in args.types)
    outs = out_positions(name, tensors) if name.startswith("aten::") else None
    return bool(outs) and set(positions) <= outs


def run(rule, table, index):
    problem = evidence_problem(table, index)
    if problem:
        return not_applicable(rule, problem)
    if table.meta.profile_memory is False or not len(index.rows_of(("alloc",))):
        return not_applicable(rule, "the trace has no [memory] events (record with profile_memory=True): a "
                              "buffer's lifetime is unknown")
    args = op_args(table)
    by_thread = uses_by_thread(index, args)
    f = index.columns
    kinds, nbytes, paired = index.kind, f["bytes"], f["paired"]
    findings = []
    fills = _fills(index)
    checked = 0
    for r in fills:
        a = args.get(r)
        buf = a.tensor(0) if a else None
        if buf is None:
            continue
        shape, dtype, strides = buf
        size = numel(shape) * ITEMSIZE.get(dtype, 1)
        if size < max(rule.spec.check.min_bytes, 1):
            continue
        checked += 1
        top = use_of(index, args, r)
        thread = index.thread[r]
        # The buffer's lifetime: from the allocation the factory made to its free; else the fill's scope.
        stop = unit_of(index, top).end
        allocs = index.allocs_between(thread, index.ts[top], index.end[top])
        made = [x for x in allocs.tolist() if kinds[x] == "alloc" and nbytes[x] >= size]
        if made:
            free = paired[made[-1]]
            stop = float(index.ts[free]) if free >= 0 else float("inf")
        rows = by_thread.get(thread, np.array([], dtype=np.int64))
        start = int(np.searchsorted(index.ts[rows], index.end[top], "left"))
        for o in rows[start:].tolist():
            if index.ts[o] >= stop:
                break
            oa = args.get(o)
            if oa is None:
                continue
            hits, lookalikes = [], 0
            for i in range(len(oa.types)):
                t = oa.tensor(i)
                if t is None or t[0] != shape or t[1] != dtype:
                    continue
                if strides is not None and t[2] is not None and t[2] != strides:
                    continue
                hits.append(i)
            if not hits:
                continue
            name = str(index.name[o])
            if str(index.category[o]) == "view":
                break  # a view: what happens through it is not followed; no finding
            outs = [i for i in hits if _writes_fully(name, oa, [i])]
            if not outs:
                break  # read (or partly written) first: the fill is needed
            lookalikes = len(hits) - len(outs)
            event_row = top
            kernels = index.device_events_between(thread, index.ts[r], index.end[r]).tolist()
            if kernels:
                event_row = kernels[0]
            note = (f"; {lookalikes} input(s) of {name} have the same shape and dtype (the trace names no "
                    "tensors)") if lookalikes else ""
            msg = (f"{index.name[top]} fills a {dtype} buffer of shape {list(shape)} ({size} B) that the next op "
                   f"using it, {name}, overwrites whole (argument {outs[0]}) before anything reads it{note}")
            context = replay_prologue_context(index, r, top)   # torch's own seed / offset fill before a replay
            findings.append(make_finding(rule, index, event_row, unit_of(index, top), msg, None,
                                         event=f"{index.name[top]} -> {name}",
                                         severity=CONTEXT_SEVERITY if context else None, context=context))
            break
    level = "kernel" if table.has_device_events else "op"
    # The whole trace is the subject (no anchor, no scope): with shapes and memory events, a trace with no
    # fill was checked and holds no dead fill.
    return decided(rule, findings, level, checked, None if fills else "the trace has no fill outside another op")


register(CheckKind(
    type="dead-fill", spec=DeadFill, run=run,
    summary="No fill whose buffer the next op using it overwrites whole before anything reads it."))
