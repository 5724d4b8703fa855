"""redundant-materialization: a `repeat` or `.contiguous()` copy whose next use is an aten op that would
have taken the broadcast or strided input as it was (zoo family R2).

The copy is an outermost op matching `producers` (`aten::repeat`, `aten::contiguous`) that did work (a
`contiguous()` of a contiguous tensor runs nothing and is never counted). Its output is known from its
arguments: a repeat's shape is the input's shape times the repeats, a contiguous copy keeps the shape;
both are contiguous. The output is followed by shape, dtype and strides (a trace names no tensors; a
strided source and its contiguous copy differ in strides): the first op after the copy, on the same thread
and inside the copy's scope unit, that takes a tensor of exactly that shape, dtype and strides is its next
use. When that op's category is one of `consumer-categories` (aten elementwise ops broadcast and take any
strides; reductions and norms take any strides), the copy was not needed. Not applicable on traces without
input shapes.
"""
from __future__ import annotations

import ast

import numpy as np

from kernlint.rules.checks.base import CheckKind, CheckSpec, make_finding, register
from kernlint.rules.evidence import (
    ITEMSIZE,
    contiguous_strides,
    evidence_problem,
    numel,
    op_args,
    unit_of,
    uses_by_thread,
)
from kernlint.rules.fields import OpCategoryNames, Pattern
from kernlint.rules.result import decided, not_applicable
from kernlint.trace.patterns import PatternError, compile_pattern
from kernlint.trace.rows import rows_matching


class RedundantMaterialization(CheckSpec, tag="redundant-materialization"):
    producers: Pattern                           # regex (or @name) of the copying ops
    consumer_categories: OpCategoryNames               # op categories that accept broadcast / strided inputs
    min_bytes: int = 0                           # of the copy's output


def _int_list(text) -> list[int] | None:
    try:
        value = ast.literal_eval(text) if isinstance(text, str) else None
    except (ValueError, SyntaxError):
        return None
    if isinstance(value, int):
        return [value]
    if isinstance(value, (list, tuple)) and all(isinstance(v, int) for v in value):
        return list(value)
    return None


def output_of(name: str, args) -> tuple[tuple, str] | None:
    """(shape, dtype) of a repeat's or contiguous copy's output, from its arguments."""
    src = args.tensor(0)
    if src is None:
        return None
    shape, dtype, _ = src
    if name.endswith("::repeat") or name.endswith("::tile"):
        reps = _int_list(args.concrete[1]) if len(args.concrete) > 1 else None
        if not reps:
            return None
        padded = (1,) * (len(reps) - len(shape)) + tuple(shape)
        if len(reps) < len(padded):
            reps = [1] * (len(padded) - len(reps)) + reps
        return tuple(a * b for a, b in zip(padded, reps)), dtype
    if name.endswith("::contiguous"):
        return tuple(shape), dtype
    return None


def _validate(rule):
    try:
        compile_pattern(rule.spec.check.producers)
    except PatternError as exc:
        return f"redundant-materialization: producers: {exc}", ["check", "producers"]
    return None


def run(rule, table, index):
    problem = evidence_problem(table, index)
    if problem:
        return not_applicable(rule, problem)
    c = rule.spec.check
    regex = compile_pattern(c.producers)
    args = op_args(table)
    by_thread = uses_by_thread(index, args)
    findings, checked = [], 0
    for r in rows_matching(index, ("op",), c.producers).tolist():
        name = str(index.name[r])
        if not index.does_work[r]:
            continue
        p = int(index.parent_op[r])
        if p >= 0 and regex.search(str(index.name[p])):
            continue
        a = args.get(r)
        out = output_of(name, a) if a else None
        if out is None:
            continue
        shape, dtype = out
        src = a.tensor(0)
        if src[2] is not None and src[2] == contiguous_strides(src[0]) and tuple(src[0]) == shape:
            continue   # a copy of a contiguous tensor into the same shape: not this check's pattern
        nbytes = numel(shape) * ITEMSIZE.get(dtype, 4)
        if nbytes < c.min_bytes:
            continue
        checked += 1
        strides = contiguous_strides(shape)
        unit = unit_of(index, r)
        rows = by_thread.get(index.thread[r], np.array([], dtype=np.int64))
        start = int(np.searchsorted(index.ts[rows], index.end[r], "left"))
        for o in rows[start:].tolist():
            if index.ts[o] >= unit.end:
                break
            oa = args.get(o)
            if oa is None or not any((t := oa.tensor(i)) is not None and t[0] == shape and t[1] == dtype
                                     and (t[2] is None or t[2] == strides) for i in range(len(oa.types))):
                continue
            consumer = str(index.name[o])
            if consumer.startswith("aten::") and str(index.category[o]) in c.consumer_categories:
                what = ("broadcasting the smaller input" if "repeat" in name or "tile" in name
                        else "the strided input as it was")
                findings.append(make_finding(
                    rule, index, r, unit,
                    f"{name} materializes a {dtype} tensor of shape {list(shape)} ({nbytes} B) whose next use, "
                    f"{consumer}, would take {what}", None, event=f"{name} -> {consumer}"))
            break
    if not checked:   # nothing to judge is not a pass
        return not_applicable(rule, f"no copy matching {c.producers} of at least {c.min_bytes} B that "
                                    "changes its input's layout or size", absent=True)
    return decided(rule, findings, "kernel" if table.has_device_events else "op", checked)


register(CheckKind(
    type="redundant-materialization", spec=RedundantMaterialization, run=run, validate=_validate,
    summary="No repeat / contiguous copy whose next use is an op that takes broadcast or strided inputs."))
