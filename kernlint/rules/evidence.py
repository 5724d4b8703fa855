"""Evidence that kinds following tensors by shape share: each op's recorded arguments (shapes, dtypes,
strides, concrete values) decoded on demand, the casts among them, and the preamble of a scoped check
(its scopes and the arguments, or why the trace cannot say)."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from kernlint.rules.checks.base import named_scopes
from kernlint.rules.result import not_applicable
from kernlint.trace.arrays import sorted_order
from kernlint.trace.dtypes import dtype_from_code, dtype_from_input_type
from kernlint.trace.names import named_pattern
from kernlint.trace.patterns import compile_pattern
from kernlint.trace.rows import rows_matching
from kernlint.trace.schema import raw_list
from kernlint.trace.scopes import Scope
from kernlint.trace.table import TableMemo


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

    def recorded_rows(self) -> np.ndarray:
        """The rows that recorded arguments (sorted)."""
        return self._store.rows

    def any_strides(self) -> bool:
        """Whether any op recorded a non-empty Input Strides list (decoding only the candidates)."""
        o = self._store.offsets
        for i in np.flatnonzero(o[:, 4] - o[:, 3] > 2).tolist():
            if raw_list(self._store.field(i, 3)):
                return True
        return False

# Decoded op arguments and the uses of tensors by thread, kept with the table (TableCaches.memo).
_OP_ARGS: TableMemo[OpArgsMap | None] = TableMemo("decoded op arguments")
_USES_BY_THREAD: TableMemo[dict[str, np.ndarray]] = TableMemo("tensor uses by thread")


def op_args(table) -> OpArgsMap | None:
    """Input shapes, types, concrete values and strides of every op row that recorded them (kept raw by the
    loader, decoded row by row on demand); None for a table built without them."""
    raw = table.derived.op_args
    return table.caches.memo(_OP_ARGS, lambda: None if raw is None else OpArgsMap(raw))

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

def uses_by_thread(index, args) -> dict[str, np.ndarray]:
    """The ops that can be a tensor's next use, per thread, ordered by start: the top-level ops, and where a
    top-level op records no arguments (torch.compile's `Torch-Compiled Region: 0/0`, autograd's
    `evaluate_function` nodes: wrappers that show none of the tensors they take), the outermost ops inside
    it that record them, so that the wrapper does not hide the op that really takes the tensor (cudagraph
    trees' `_foreach_copy_` of a replay's inputs). What an op with arguments runs inside itself works on that
    op's own buffers (the `copy_` inside `clone`): it is no use of its own."""
    return index.table.caches.memo(_USES_BY_THREAD, lambda: _uses_by_thread(index, args))


def _uses_by_thread(index, args) -> dict[str, np.ndarray]:
    """uses_by_thread, computed."""
    ops = np.flatnonzero(index.is_kind("op") & np.isfinite(index.ts))
    has = np.zeros(len(index.ts), dtype=bool)
    has[args.recorded_rows()] = True
    ancestor = index.parent_op[ops]
    inside_args = np.zeros(len(ops), dtype=bool)   # some op around it records arguments
    while (live := ancestor >= 0).any():
        safe = np.where(live, ancestor, 0)
        inside_args |= live & has[safe]
        ancestor = np.where(live, index.parent_op[safe], -1)
    rows = ops[(index.parent_op[ops] < 0) | (has[ops] & ~inside_args)]
    rows = rows[sorted_order(-index.end[rows], index.ts[rows])]
    found = {}
    threads = index.thread[rows]
    for t in set(threads.tolist()):
        found[t] = rows[threads == t]
    return found


def use_of(index, args, row: int) -> int:
    """The op of uses_by_thread that holds the op `row`: its outermost enclosing op (or itself) that records
    arguments, else its top-level op."""
    top, outer = row, (row if row in args else -1)
    p = int(index.parent_op[row])
    while p >= 0:
        top = p
        if p in args:
            outer = p
        p = int(index.parent_op[p])
    return outer if outer >= 0 else top


def evidence_problem(table, index) -> str | None:
    """Why the data flow of ops cannot be followed in this trace, or None."""
    if not len(index.rows_of(("op",))):
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


def casts(index, args) -> list[tuple[int, tuple, str, str]]:
    """Outermost `_to_copy` ops with a known source tensor and target dtype: (row, shape, from, to)."""
    regex = compile_pattern(named_pattern("cast-op"))
    out = []
    for r in rows_matching(index, ("op",), named_pattern("cast-op")).tolist():
        p = int(index.parent_op[r])
        if p >= 0 and regex.search(str(index.name[p])):
            continue
        a = args.get(r)
        src = a.tensor(0) if a else None
        to = dtype_arg(a, 1) if a else None
        if src is None or not to:
            continue
        out.append((r, src[0], src[1], to))
    return out
