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

The op-argument columns the event table drops are read back here from the trace file (`op_args`), once per
table; the other R1-R3 kinds (redundant_repeat, widening_cast, cast_round_trip) share them.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from kernlint.rules.checks.base import CheckKind, CheckSpec, make_finding, named_scopes, register
from kernlint.rules.result import decided, not_applicable
from kernlint.trace.dtypes import dtype_from_code, dtype_from_input_type
from kernlint.trace.names import named_pattern
from kernlint.trace.op_schemas import out_positions
from kernlint.trace.patterns import compile_pattern
from kernlint.trace.rows import rows_matching
from kernlint.trace.schema import raw_list
from kernlint.trace.scopes import Scope
from kernlint.trace.table import OP_ARGS_KEY

# ---------------------------------------------------------------------------------------------------------
# Op arguments, as the loader kept them (raw JSON of Input Dims, Input type, Concrete Inputs, Input Strides).

@dataclass(frozen=True)
class OpArgs:
    dims: list
    types: list
    concrete: list
    strides: list

    def tensor(self, i: int) -> tuple[tuple, str, tuple | None] | None:
        """(shape, dtype, strides) of the i-th argument when it is a tensor of a known dtype."""
        if i >= len(self.types) or i >= len(self.dims) or not isinstance(self.types[i], str):
            return None
        dtype = dtype_from_input_type(self.types[i])
        shape = self.dims[i]
        if not dtype or not isinstance(shape, list) or not all(isinstance(d, int) for d in shape):
            return None
        st = self.strides[i] if i < len(self.strides) else None
        st = tuple(st) if isinstance(st, list) and all(isinstance(s, int) for s in st) and len(st) == len(
            shape) else None
        return tuple(shape), dtype, st


    def list_holds_shape(self, shape: tuple) -> bool:
        """Whether a TensorList argument (`Input type` "TensorList", dims a list of shapes) has a member of
        `shape`; the trace records no dtype for the members."""
        for i, kind in enumerate(self.types):
            if kind == "TensorList" and i < len(self.dims) and isinstance(self.dims[i], list):
                if any(isinstance(m, list) and tuple(m) == tuple(shape) for m in self.dims[i]):
                    return True
        return False


class OpArgsMap(Mapping):
    """{op row: OpArgs} over the raw arguments the loader kept (an OpArgsStore); each row is decoded when
    first asked for (a rule reads the few ops it follows, not the hundreds of thousands a trace holds)."""

    def __init__(self, store):
        self._store = store
        self._decoded: dict[int, OpArgs] = {}

    def __getitem__(self, row: int) -> OpArgs:
        found = self._decoded.get(row)
        if found is None:
            fields = self._store.fields(row)
            if fields is None:
                raise KeyError(row)
            dims, types, concrete, strides = fields
            found = self._decoded[row] = OpArgs(raw_list(dims), raw_list(types), raw_list(concrete), raw_list(strides))
        return found

    def get(self, row, default=None):
        try:
            return self[row]
        except KeyError:
            return default

    def __contains__(self, row) -> bool:
        return isinstance(row, (int, np.integer)) and self._store.position(int(row)) >= 0

    def __iter__(self):
        return iter(self._store.rows.tolist())

    def __len__(self) -> int:
        return len(self._store.rows)

    def any_strides(self) -> bool:
        """Whether any op recorded a non-empty Input Strides list (decoding only the candidates)."""
        o = self._store.offsets
        for i in np.flatnonzero(o[:, 4] - o[:, 3] > 2).tolist():
            if raw_list(self._store.field(i, 3)):
                return True
        return False


def op_args(table) -> OpArgsMap | None:
    """Input shapes, types, concrete values and strides of every op row that recorded them (kept raw by the
    loader, decoded row by row on demand); None for a table built without them."""
    key = "kernlint.checks.op_args"
    if key in table.derived:
        return table.derived[key]
    raw = table.derived.get(OP_ARGS_KEY)
    found = None if raw is None else OpArgsMap(raw)
    table.derived[key] = found
    return found


def contiguous_strides(shape: tuple) -> tuple:
    out, step = [], 1
    for d in reversed(shape):
        out.append(step)
        step *= max(int(d), 1)
    return tuple(reversed(out))


def numel(shape: tuple) -> int:
    n = 1
    for d in shape:
        n *= int(d)
    return n


ITEMSIZE = {"float64": 8, "float32": 4, "int64": 8, "int32": 4, "bfloat16": 2, "float16": 2, "int16": 2,
            "uint8": 1, "int8": 1, "bool": 1, "float8_e4m3fn": 1, "float8_e5m2": 1, "float8_e4m3fnuz": 1,
            "float8_e5m2fnuz": 1, "complex64": 8, "complex128": 16}


def dtype_arg(args: OpArgs, pos: int) -> str | None:
    if pos < len(args.concrete) and isinstance(args.concrete[pos], str):
        return dtype_from_code(args.concrete[pos])
    return None


def unit_of(index, row: int) -> Scope:
    """The innermost scope unit the event was issued from (below the coarse ones); else the innermost range,
    module or user frame around it, coarse or not; else the event's thread."""
    units = index.enclosing_units(row)
    if units:
        return units[0]
    around = [int(c[row]) for c in (index.annotation, index.module, index.user_frame) if int(c[row]) >= 0]
    if around:
        return index.unit(max(around, key=lambda u: index.ts[u]))
    return Scope(row=-1, kind="thread", name=str(index.thread[row]), thread=str(index.thread[row]),
                 ts=float(index.ts[row]), end=float(index.end[row]))


def ops_by_thread(index) -> dict[str, np.ndarray]:
    """Top-level op rows (no op around them) of each thread, ordered by start. A use of a tensor is the
    top-level op that takes it: what an op runs inside itself (the `copy_` inside `clone`) works on that
    op's own buffers."""
    key = "kernlint.checks.ops_by_thread"
    found = index.table.derived.get(key)
    if found is None:
        rows = np.flatnonzero((index.kind == "op") & np.isfinite(index.ts) & (index.parent_op < 0))
        order = np.lexsort((-index.end[rows], index.ts[rows]))
        rows = rows[order]
        found = {}
        threads = index.thread[rows]
        for t in set(threads.tolist()):
            found[t] = rows[threads == t]
        index.table.derived[key] = found
    return found


def evidence_problem(table, index) -> str | None:
    """Why the data flow of ops cannot be followed in this trace, or None."""
    if not (index.kind == "op").any():
        return "the trace has no ops (cpu_op events)"
    if table.meta.record_shapes is False:
        return "the trace has no input shapes (record with record_shapes=True)"
    args = op_args(table)
    if args is None:
        return "the trace's op arguments could not be read back from its file"
    if not args:
        return "the trace has no input shapes (record with record_shapes=True)"
    return None


def scoped_evidence(rule, table, index):
    """The rule's named scopes and the trace's op arguments, or the not-applicable outcome that says which
    of the two the trace lacks (the preamble of every kind that follows tensors by shape)."""
    scopes = named_scopes(index, rule)
    if not scopes:
        return not_applicable(rule, "no annotation, module, frame or op matches the rule's [scope]", absent=True)
    problem = evidence_problem(table, index)
    if problem:
        return not_applicable(rule, problem)
    return scopes, op_args(table)


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
    if table.meta.profile_memory is False or not (index.kind == "alloc").any():
        return not_applicable(rule, "the trace has no [memory] events (record with profile_memory=True): a "
                              "buffer's lifetime is unknown")
    args = op_args(table)
    by_thread = ops_by_thread(index)
    f = index.frame
    kinds, nbytes, paired = index.kind, f["bytes"].to_numpy(), f["paired"].to_numpy()
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
        top = int(index.top_op[r]) if int(index.top_op[r]) >= 0 else r
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
            findings.append(make_finding(rule, index, event_row, unit_of(index, top), msg, None,
                                         event=f"{index.name[top]} -> {name}"))
            break
    level = "kernel" if table.has_device_events else "op"
    # The whole trace is the subject (no anchor, no scope): with shapes and memory events, a trace with no
    # fill was checked and holds no dead fill.
    return decided(rule, findings, level, checked, None if fills else "the trace has no fill outside another op")


register(CheckKind(
    type="dead-fill", spec=DeadFill, run=run,
    summary="No fill whose buffer the next op using it overwrites whole before anything reads it."))
