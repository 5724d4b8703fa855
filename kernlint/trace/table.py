"""The event table: one row per trace event, typed columns, links and nesting resolved.

Public API. `EventTable.columns` holds one numpy array per column (kernlint.trace.event_columns), what
kernlint itself reads; `EventTable.frame` is the same events as a pandas DataFrame (made on first use: pandas
is imported only there) whose row label is the event's position (`row`). Every link column holds a row
position, or -1 where there is no such event. Columns:

| column | meaning |
|---|---|
| kind | kernel, memcpy, memset, runtime (CUDA runtime or driver call), op, annotation (record_function / NVTX, CPU side), gpu_annotation, python (a Python frame), module (an nn.Module frame), alloc, free, other |
| name, short_name | raw name; readable name (kernels: `vectorized_elementwise_kernel[FillFunctor<BFloat16>]`) |
| category | kernels: fill, copy, cast, elementwise, reduce, gemm, quant, rng, memcpy_htod/dtoh/dtod/other, memset, triton, comm, other; runtime calls: sync, launch, memcpy_call, alloc_call, runtime_other; ops: fill, copy, cast, alloc, view, rng, gemm, reduce, sync_op, comm, quant, elementwise, other |
| cat | the raw Chrome-trace category |
| ts, dur, end | microseconds (float; numeric strings are parsed); instants have dur 0. ts is NaN only where it was missing or not a number (such an event is in no nesting and no scope); an unusable dur is 0 |
| pid, tid | as in the trace, as text (GPU events: device and stream); an integral float (1.0) is written as the integer; "?" where missing or unusable (a fraction, a list, an object) |
| device, stream | GPU index and stream for device events; allocation device index for alloc/free (-1 = CPU) |
| correlation, external_id | kineto link ids (-1 when absent or unusable). Where every id of the trace fits in int64 (the usual case) the id itself; otherwise (uint64 ids above 2**63, larger probes) an order-preserving dense code of it: equal ids get equal codes and order is kept, which is all linking and the window edges use |
| damage | bit flags (BAD_* below): which essential fields of the event could not be used, and whether its correlation id was shared by several launches; kernlint.trace.damage counts them |
| graph_node | a replayed kernel's CUDA-graph node id, or a captured launch's, where the trace records one (`graph node id`); else -1 |
| launch_kernel | launch calls that name their kernel (ROCm's `kernel` argument, during stream capture too): the name; else "" |
| launcher | device events: the runtime/driver call that launched them; a kernel replayed from a CUDA graph: the graph launch, or the captured launch it was matched to (kernlint.trace.graphs) |
| op | innermost op enclosing the event (device events: the op that launched them) |
| top_op | outermost op enclosing the event (for an op: itself when it has no parent) |
| parent_op | for ops and calls: the enclosing op (-1 for top-level ops) |
| annotation, module, frame, user_frame | innermost enclosing record_function range, nn.Module frame, Python frame, and Python frame outside torch/triton/stdlib |
| launch_ts | when the event was issued from the host: device events use their launcher's ts |
| thread | "pid:tid" of the host thread that issued the event |
| dtype, bytes, addr | allocations: inferred dtype (from the enclosing op), bytes (+ alloc, - free), address |
| paired | alloc -> its free, free -> its alloc |
| does_work | ops: whether the op (or an op below it) does device work (not just allocation or views) |
| source | `file.py:line` of the innermost user Python frame, when the trace has stacks (torch's Python tracer records the line where that function starts) |
| scope | on demand (`kernlint.trace.scopes.add_scope_column(table)`; no check needs it): label of the innermost scope unit the event was issued from (`module Fp8BlockLinear_0`, `annotation fp8_linear`, `frame file.py(12): fp8_linear`) |
| library_frame | Python frames: whether it belongs to torch, triton or the standard library |
"""
from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from kernlint.errors import TraceError
from kernlint.trace import names
from kernlint.trace.columns import OpArgsStore, RawColumns, _id_column, _int_or, decode_events
from kernlint.trace.dtypes import dtype_from_code, dtype_from_input_type
from kernlint.trace.event_columns import EventColumns
from kernlint.trace.native_chunk import nest_walk_native
from kernlint.trace.schema import RawTrace, raw_list

if TYPE_CHECKING:
    import pandas as pd

KINDS = ("kernel", "memcpy", "memset", "runtime", "op", "annotation", "gpu_annotation", "python", "module",
         "alloc", "free", "other")
DEVICE_KINDS = frozenset({"kernel", "memcpy", "memset"})

CATEGORY_KIND = {
    "kernel": "kernel",
    "gpu_memcpy": "memcpy", "memcpy": "memcpy",
    "gpu_memset": "memset", "memset": "memset",
    "cuda_runtime": "runtime", "cuda_driver": "runtime", "runtime": "runtime", "driver": "runtime",
    # Other devices' runtimes (kineto's names): their calls are runtime calls, even where no table line
    # names them (an MTIA trace records no CUDA or HIP runtime, but a runtime all the same).
    "xpu_runtime": "runtime", "xpu_driver": "runtime", "mtia_runtime": "runtime",
    "privateuse1_runtime": "runtime", "privateuse1_driver": "runtime",
    "cpu_op": "op", "operator": "op",
    "user_annotation": "annotation", "nvtx": "annotation",
    "gpu_user_annotation": "gpu_annotation",
    "python_function": "python", "python": "python",
}
# The categories of runtime and driver calls (what the capture-trace merge and the pairing scan for).
RUNTIME_CATEGORIES = tuple(c for c, k in CATEGORY_KIND.items() if k == "runtime")
_STEP_RANGE = names.named_pattern("profiler-step-range")

# Bits of the `damage` column. BAD_<field>: the field was missing or unusable (ts not a number, dur of a
# complete event missing, negative or not a number, pid/tid not an integer or a name, an id not a
# non-negative integer). AMBIGUOUS_LINK: a device event whose correlation id two or more runtime/driver
# calls share, so that which one launched it is unknown (it is left unlinked).
# FRAME_OUTSIDE_PARENT: a Python frame that does not lie inside (same thread, same interval) the frame its
# `Python parent id` names, or whose parent id names no frame: the time nesting of frames cannot be trusted.
# BAD_NAME: an event whose name is missing or not a string; BAD_CAT: a complete event without a category.
(BAD_TS, BAD_DUR, BAD_PID, BAD_TID, BAD_CORRELATION, BAD_EXTERNAL_ID, AMBIGUOUS_LINK, FRAME_OUTSIDE_PARENT,
 BAD_NAME, BAD_CAT) = (1 << i for i in range(10))
BAD_FIELD_BITS = {"ts": BAD_TS, "dur": BAD_DUR, "pid": BAD_PID, "tid": BAD_TID, "name": BAD_NAME, "cat": BAD_CAT,
                  "correlation": BAD_CORRELATION, "external_id": BAD_EXTERNAL_ID}
UNPLACED = BAD_TS | BAD_PID | BAD_TID   # events left out of interval nesting: when or on which thread is unknown
_MODULE_PREFIX = names.MODULE_PREFIX

# Which `Concrete Inputs` position holds the dtype, for factory ops whose output an allocation is.
_DTYPE_ARG_POSITION = {
    "aten::empty": 1, "aten::empty_strided": 2, "aten::empty_like": 1, "aten::new_empty": 2,
    "aten::new_empty_strided": 3, "aten::zeros": 1, "aten::ones": 1, "aten::full": 2, "aten::zeros_like": 1,
    "aten::ones_like": 1, "aten::full_like": 2, "aten::new_zeros": 2, "aten::new_ones": 2,
    "aten::new_full": 3, "aten::_to_copy": 1, "aten::empty_permuted": 2, "aten::randn": 1, "aten::rand": 1,
}


@dataclass
class TraceMeta:
    """What the trace says about where it was recorded."""

    path: str
    device_properties: list[dict[str, Any]] = field(default_factory=list)
    distributed: dict[str, Any] | None = None
    rank: int | None = None
    base_time_ns: int | None = None
    with_stack: bool | None = None
    record_shapes: bool | None = None
    profile_memory: bool | None = None
    run_metadata: dict[str, Any] | None = None
    host_name: str | None = None   # top-level `host_name` (or `hostname`) when the writer recorded it
    trace_id: str | None = None    # top-level `trace_id` (kineto: one per trace, not per run)
    captures: tuple[str, ...] = ()  # capture traces merged in for the graph replays (kernlint.trace.graphs)


class EventTable:
    """One loaded trace: its events as columns (`columns`: name -> numpy array, one row per event) plus what
    the trace says about itself. `frame` is the same events as a pandas DataFrame, for the Python API."""

    def __init__(self, columns: EventColumns | None = None, meta: TraceMeta | None = None,
                 derived: dict[Any, Any] | None = None, *, frame: pd.DataFrame | None = None) -> None:
        if (columns is None) == (frame is None):
            raise TypeError("EventTable takes the events as columns or as a frame, one of them")
        self._columns = columns
        self._assigned: pd.DataFrame | None = None
        self._frame: tuple[EventColumns, int, pd.DataFrame] | None = None   # (made from, at version, frame)
        if frame is not None:
            self.frame = frame
        self.meta = meta
        # Derived indexes built once per table (kernlint.trace.scopes.ScopeIndex.of keeps its own here).
        self.derived: dict[Any, Any] = {} if derived is None else derived

    def __repr__(self) -> str:
        return f"EventTable({self.meta.path!r}, {len(self)} events)"

    @property
    def columns(self) -> EventColumns:
        if self._columns is None:   # a DataFrame was assigned: its columns, as it is now
            self._columns = _columns_of(self._assigned)
            self._frame = (self._columns, self._columns.version, self._assigned)
            self._assigned = None
        return self._columns

    @columns.setter
    def columns(self, columns: EventColumns) -> None:
        self._columns, self._assigned, self._frame = columns, None, None

    @property
    def frame(self) -> pd.DataFrame:
        """The events as a pandas DataFrame (index `row`, the event's position; `kind` a Categorical of
        KINDS), made from the columns on first use and again after a column changes. A copy: changing it
        changes nothing the checks see, except a frame assigned here (`table.frame = f`), whose columns are
        read from it when next needed."""
        if self._assigned is not None:
            return self._assigned
        columns = self.columns
        made = self._frame
        if made is None or made[0] is not columns or made[1] != columns.version:
            made = self._frame = (columns, columns.version, _frame_of(columns))
        return made[2]

    @frame.setter
    def frame(self, frame: pd.DataFrame) -> None:
        self._columns, self._assigned, self._frame = None, frame, None

    @property
    def path(self) -> str:
        return self.meta.path

    @property
    def has_device_events(self) -> bool:
        return self.has_kind(DEVICE_KINDS)

    @property
    def has_stacks(self) -> bool:
        return self.has_kind(("python",))

    def kind_codes(self) -> tuple[np.ndarray, np.ndarray]:
        """(code per row, the kinds the codes stand for): codes into KINDS for a loaded table."""
        return self.columns.coded("kind")

    def has_kind(self, kinds: Iterable[str]) -> bool:
        """Whether any event is of one of `kinds`."""
        # Asked by every rule: answered once per kind column (a column put in its place is asked again).
        key = ("has-kind", frozenset(kinds))
        column = self.columns["kind"]
        found = self.derived.get(key)
        if found is None or found[0] is not column:
            found = self.derived[key] = (column, self._count_kind(kinds))
        return found[1]

    def _count_kind(self, kinds) -> bool:
        return bool(is_kind(self.columns, *kinds).any())

    def of_kind(self, *kinds: str) -> pd.DataFrame:
        frame = self.frame
        return frame[frame["kind"].isin(kinds)]

    def __len__(self) -> int:
        return len(self._assigned) if self._assigned is not None else len(self.columns)


def is_kind(columns: EventColumns, *kinds: str) -> np.ndarray:
    """Whether each row is of one of `kinds` (through the kind codes: no string compare per row)."""
    codes, values = columns.coded("kind")
    return kind_mask(codes, [i for i, k in enumerate(values.tolist()) if k in kinds], len(values))


def kind_mask(codes: np.ndarray, wanted: list[int], kinds: int) -> np.ndarray:
    """Whether each row's code (into `kinds` distinct kinds) is one of `wanted`: a look-up table, where
    np.isin costs far more on small tables and a string compare per row on large ones."""
    table = np.zeros(kinds + 1, dtype=bool)   # the last entry, never set, answers code -1
    table[wanted] = True
    return table[codes]


def _frame_of(columns: EventColumns) -> pd.DataFrame:
    """The DataFrame of the Python API, with the dtypes pandas gave the columns when the table was one."""
    import pandas as pd

    data: dict[str, Any] = {}
    for name in columns.names:
        values = columns[name]
        if name == "kind":
            codes, kinds = columns.coded("kind")
            data[name] = (pd.Categorical.from_codes(codes, categories=KINDS) if tuple(kinds.tolist()) == KINDS
                          else pd.Categorical(values, categories=KINDS))
        elif name in columns.object_columns:
            data[name] = pd.Series(values, dtype=object)
        else:
            data[name] = values
    frame = pd.DataFrame(data, copy=True)
    frame.index.name = "row"
    return frame


def _columns_of(frame: pd.DataFrame) -> EventColumns:
    """A DataFrame's columns (copies): object columns stay object columns."""
    columns = EventColumns(len(frame))
    for name in frame.columns:
        series = frame[name]
        values = np.array(series.to_numpy(), copy=True)
        if series.dtype == object:
            columns.set_object(str(name), values)
        else:
            columns[str(name)] = values
    return columns


def recorded_launcher(columns: EventColumns) -> np.ndarray:
    """The launch call the trace itself links each device event to: for a kernel replayed from a CUDA graph,
    its graph launch, not the captured launch kernlint.trace.graphs attributed it to. What the window's
    edges and the damage checks judge."""
    launcher = columns["launcher"]
    if "replay" not in columns:
        return launcher
    replay = columns["replay"]
    return np.where(replay >= 0, replay, launcher)


def _kinds(name_codes: np.ndarray, name_values: list[str], cat_codes: np.ndarray, cat_values: list[str],
           nbytes: np.ndarray) -> np.ndarray:
    """The kind of each event as its code into KINDS, from the category (case-insensitive), `[memory]`
    events and module frames; each distinct category and name is looked at once."""
    code = _KIND_CODE
    kind_of_cat = np.array([code.get(CATEGORY_KIND.get(c.lower(), ""), -1) for c in cat_values] or [-1], dtype=np.int8)
    kinds = kind_of_cat[cat_codes] if len(cat_values) else np.full(len(cat_codes), -1, dtype=np.int8)
    unknown = kinds < 0
    is_memory_name = np.array([n == "[memory]" for n in name_values] or [False], dtype=bool)
    memory = unknown & is_memory_name[name_codes]
    kinds[memory] = np.where(nbytes[memory] < 0, code["free"], code["alloc"])
    kinds[unknown & ~memory] = code["other"]
    is_module_name = np.array([n.startswith(_MODULE_PREFIX) for n in name_values] or [False], dtype=bool)
    kinds[(kinds == code["python"]) & is_module_name[name_codes]] = code["module"]
    # Kineto before PyTorch 1.10 recorded record_function ranges as cpu_op: the profiler's own step range
    # (names table: profiler-step-range) is a range whatever its category says.
    step = re.compile(_STEP_RANGE)
    is_step = np.array([step.search(n) is not None for n in name_values] or [False], dtype=bool)
    kinds[(kinds == code["op"]) & is_step[name_codes]] = code["annotation"]
    return kinds


def build_event_table(raw: RawTrace, path: str | Path, cols: RawColumns | None = None) -> EventTable:
    """Raw decoded trace -> EventTable with links, nesting, scopes inputs and allocation dtypes. `cols`: the
    events already decoded (a streamed trace, kernlint.trace.event_stream), else `raw.trace_events` are.

    A trace with no events besides metadata raises TraceError. Events whose essential fields are unusable
    are kept, flagged in the `damage` column and left out of what they would make wrong (nesting, links)."""
    if cols is None:
        cols = decode_events(raw.trace_events, path, raw.events_at if isinstance(raw.events_at, str) else "$")
    meta = _meta(raw, path)
    raw.trace_events = []   # the events' raw JSON (and through it the file's bytes) is no longer needed
    if not cols.n:
        others = cols.others
        raise TraceError(path, "holds no trace events" + (
            f" (only {others} metadata or flow event{'s' if others != 1 else ''})" if others else ""))
    n = cols.n
    bad_name, name_codes, name_values = cols.text_codes("name")
    cats, bad_cat, cat_codes, cat_values = cols.text("cat")
    nbytes = cols.int_column("bytes")
    ts, bad_ts = cols.floats("ts")
    dur, bad_dur = cols.floats("dur")
    complete = cols.complete[:n]
    bad_dur = complete & (bad_dur | (dur < 0))   # an instant has no dur; a complete event must have one
    dur[~(dur >= 0)] = 0.0                        # NaN and negative -> 0: the event is no one's parent
    bad_pid, pid_codes, pid_values = cols.text_codes("pid")
    bad_tid, tid_codes, tid_values = cols.text_codes("tid")
    correlation, bad_corr = cols.id_column("correlation")
    external_id, bad_ext = cols.id_column("external_id")
    bad_cat &= complete   # instants without a category occur in real traces ("Record Window End")
    damage = np.zeros(n, dtype=np.uint16)
    for mask, bit in ((bad_ts, BAD_TS), (bad_dur, BAD_DUR), (bad_pid, BAD_PID), (bad_tid, BAD_TID),
                      (bad_corr, BAD_CORRELATION), (bad_ext, BAD_EXTERNAL_ID), (bad_name, BAD_NAME),
                      (bad_cat, BAD_CAT)):
        damage[mask] |= bit
    # "pid:tid" text, one string per distinct pair; codes in the order of the texts (ScopeIndex sorts by them).
    width = max(len(tid_values), 1)
    pairs, pair_codes = unique_codes(pid_codes.astype(np.int64) * width + tid_codes, len(pid_values) * width)
    pair_texts = [f"{pid_values[p // width]}:{tid_values[p % width]}" for p in pairs.tolist()]
    thread_values = np.empty(len(set(pair_texts)), dtype=object)
    thread_values[:] = sorted(set(pair_texts))
    text_code = {t: i for i, t in enumerate(thread_values.tolist())}
    thread_codes = np.array([text_code[t] for t in pair_texts], dtype=np.int32)[pair_codes.reshape(-1)]
    kind_codes = _kinds(name_codes, name_values, cat_codes, cat_values, nbytes)
    columns = EventColumns(n)
    columns.set_coded("kind", kind_codes, _KIND_VALUES)
    name_codes = _compact(name_codes)
    columns.set_coded("name", name_codes, _object_array(name_values))
    for name, values in (("cat", cats), ("ts", ts), ("dur", dur)):
        columns[name] = _compact(values)
    columns.set_coded("pid", _compact(pid_codes), _object_array(pid_values))
    columns.set_coded("tid", _compact(tid_codes), _object_array(tid_values))
    columns.set_coded("thread", thread_codes, thread_values)
    for name, values in (
            ("correlation", correlation), ("external_id", external_id), ("stream", cols.int_column("stream")),
            ("device", cols.int_column("device")), ("device_type", cols.int_column("device_type")),
            ("addr", cols.int_column("addr")), ("bytes", nbytes), ("damage", damage),
            ("launch_kernel", cols.text("launch_kernel")[0]), ("graph_node", cols.id_column("graph_node")[0])):
        columns[name] = _compact(values)
    del cats, ts, dur, correlation, external_id, nbytes, damage, complete
    cols.name = cols.cat = cols.pid = cols.tid = cols.ts = cols.dur = cols.complete = cols.launch_kernel = None
    cols.ints = {}
    for name in ("correlation", "external_id", "graph_node"):   # copied into the table; the frame ids stay
        cols.ids.pop(name)
    columns["end"] = columns["ts"] + columns["dur"]

    _name_columns(columns, name_codes, name_values)
    _link_launches(columns)
    python_ids, parent_ids = cols.id_values("python_id"), cols.id_values("python_parent_id")
    parents = _frame_parents(columns, python_ids, parent_ids)
    late = _closed_after_parent(columns, parents)
    _nest_host_events(columns, name_codes, name_values, unnested=late)
    tree = _check_frame_tree(columns, parents, late, python_ids, parent_ids)
    del python_ids, parent_ids, parents
    cols.ids.clear()
    _inherit_from_launcher(columns)
    _allocation_dtypes_and_pairs(columns, cols.op_args)
    _work_flags(columns)
    _sources(columns)

    table = EventTable(columns, meta)
    table.derived[OP_ARGS_KEY] = _op_args_of_ops(columns, cols.op_args)
    table.derived[FRAME_TREE_KEY] = tree
    return table


_KIND_CODE = {k: i for i, k in enumerate(KINDS)}
_KIND_VALUES = np.array(KINDS, dtype=object)


def unique_codes(codes: np.ndarray, size: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """np.unique(codes, return_inverse=True) for non-negative integer codes below `size`: through a table of
    the codes present, where the range is small next to the rows (no sort of the rows)."""
    codes = np.asarray(codes)
    if size is None:
        size = int(codes.max()) + 1 if len(codes) else 0
    if codes.dtype.kind not in "iu" or size > 4 * len(codes) + 4096 or (len(codes) and int(codes.min()) < 0):
        uniques, inverse = np.unique(codes, return_inverse=True)
        return uniques, inverse.reshape(-1)
    present = np.zeros(size, dtype=bool)
    present[codes] = True
    uniques = np.flatnonzero(present)
    code_of = np.zeros(size, dtype=np.intp)
    code_of[uniques] = np.arange(len(uniques))
    return uniques.astype(codes.dtype, copy=False), code_of[codes]


def distinct_ints(values: np.ndarray) -> np.ndarray:
    """np.unique(values) for integers: sorted, each once (np.unique's plain form imports numpy.ma, 10 ms of
    a tiny trace's start-up)."""
    values = np.sort(np.asarray(values), kind="stable")
    if len(values) < 2:
        return values
    keep = np.empty(len(values), dtype=bool)
    keep[0] = True
    np.not_equal(values[1:], values[:-1], out=keep[1:])
    return values[keep]


def sorted_order(*keys: np.ndarray) -> np.ndarray:
    """np.lexsort(keys) (the last key primary, ties in row order), one stable argsort per key: the sort
    adapts to runs, so keys nearly in row order already (times of one trace) sort in about one pass, where
    lexsort's merge sorts do not. Small-integer keys (thread codes) take the radix sort."""
    order = None
    for key in keys:
        key = np.asarray(key)
        if key.dtype.kind in "iu" and len(key):
            low, high = int(key.min()), int(key.max())
            if low == high:   # one value (one thread): a stable sort leaves the order as it is
                continue
            if -(2 ** 15) <= low and high < 2 ** 15:
                key = key.astype(np.int16)
        step = np.argsort(key if order is None else key[order], kind="stable")
        order = step if order is None else order[step]
    return order if order is not None else np.arange(len(keys[0]) if keys else 0)


def _search_sorted(values: np.ndarray, queries: np.ndarray, side: str) -> np.ndarray:
    """np.searchsorted(values, queries, side) for ascending `queries` too (NaN last, numpy's order): where
    the values are fewer, each value is searched among the queries instead, and the counts of values
    below each query are a running sum, so that the binary searches are of the shorter array."""
    if len(values) * 2 >= len(queries):
        return np.searchsorted(values, queries, side)
    # values[j] < q (side left) from the first query above values[j]; values[j] <= q (right) from the first
    # query at or above it.
    first = np.searchsorted(queries, values, "right" if side == "left" else "left")
    return np.cumsum(np.bincount(first, minlength=len(queries) + 1)[:len(queries)])


def _distinct(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(distinct values in order of first appearance, the code of each value): for a few hundred values."""
    index: dict = {}
    codes = np.array([index.setdefault(v, len(index)) for v in values.tolist()], dtype=np.intp)
    return _object_array(list(index)), codes


def category_mask(columns: EventColumns, categories: Iterable[str]) -> np.ndarray:
    """Whether each row's category is one of `categories`, through the category codes (one look per distinct
    category; no string compare per row)."""
    codes, values = columns.coded("category")
    wanted = set(categories)
    return kind_mask(codes, [i for i, c in enumerate(values.tolist()) if c in wanted], len(values))


def _object_array(values: list) -> np.ndarray:
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out


def _compact(values: np.ndarray) -> np.ndarray:
    """The values in an array of their own: a slice of the loader's larger buffers would keep all of it."""
    base = values.base
    return values.copy() if base is not None and getattr(base, "nbytes", 0) > values.nbytes else values


# EventTable.derived key: an OpArgsStore holding (Input Dims, Input type, Concrete Inputs, Input Strides) as raw
# JSON of the ops that recorded shapes; decoded only by the checks that follow tensors (kernlint.rules.checks).
OP_ARGS_KEY = "op-args-raw"


def _op_args_of_ops(columns: EventColumns, store: OpArgsStore | None) -> OpArgsStore | None:
    """The shape arguments of the ops that recorded Input Dims (a view of the loader's store)."""
    if store is None:
        return OpArgsStore(rows=np.empty(0, dtype=np.int64), offsets=np.zeros((0, 5), dtype=np.int64), blob=b"")
    is_op = is_kind(columns, "op")[store.rows]
    keep = is_op & store.has_dims()
    return OpArgsStore(rows=store.rows[keep], offsets=store.offsets[keep], blob=store.blob)


def _flag(value: Any) -> bool | None:
    """Trace flags are JSON booleans in some torch versions and 0/1 in others; absent means unknown."""
    return bool(value) if isinstance(value, (bool, int)) else None


def _meta(raw: RawTrace, path: str | Path) -> TraceMeta:
    def text(value: Any) -> str | None:  # a top-level string field; None when absent, empty or not a string
        return (value.strip() or None) if isinstance(value, str) else None

    dist = raw.distributedInfo if isinstance(raw.distributedInfo, dict) else None
    rank = _int_or(dist.get("rank"), -1) if dist else -1
    props = raw.deviceProperties if isinstance(raw.deviceProperties, list) else []
    return TraceMeta(
        path=str(path),
        device_properties=[p for p in props if isinstance(p, dict)],
        distributed=dist,
        rank=None if rank < 0 else rank,
        base_time_ns=_int_or(raw.baseTimeNanoseconds, None),
        with_stack=_flag(raw.with_stack),
        record_shapes=_flag(raw.record_shapes),
        profile_memory=_flag(raw.profile_memory),
        run_metadata=raw.kernlint if isinstance(raw.kernlint, dict) else None,
        host_name=text(raw.host_name) or text(raw.hostname),
        trace_id=text(raw.trace_id),
    )


def _name_columns(columns: EventColumns, name_codes: np.ndarray, name_values: list[str]) -> None:
    """short_name and category, worked out once per distinct (kind, name)."""
    kind_codes, kind_values = columns.coded("kind")
    key = kind_codes.astype(np.int64) * max(len(name_values), 1) + name_codes
    pairs, inverse = unique_codes(key, len(kind_values) * max(len(name_values), 1))
    short = np.empty(len(pairs), dtype=object)
    category = np.empty(len(pairs), dtype=object)
    width = max(len(name_values), 1)
    for i, p in enumerate(pairs.tolist()):
        k, name = kind_values[p // width], name_values[p % width]
        short[i], category[i] = name, ""
        if k in DEVICE_KINDS:
            short[i] = names.short_kernel_name(name)
            category[i] = names.classify_kernel(name)
        elif k == "runtime":
            category[i] = names.classify_runtime(name)
        elif k == "op":
            category[i] = names.classify_op(name)
    columns["short_name"] = short[inverse]
    # Coded: the checks and damage counts ask for categories by code, not by a string compare per row.
    values, category_code = _distinct(category)
    columns.set_coded("category", category_code[inverse], values)


def _link_launches(columns: EventColumns) -> None:
    """Device event -> the runtime/driver call with the same correlation id (exact equality of the ids).

    One call may launch several device events (cudaGraphLaunch replays a whole graph). A device event whose
    id two or more calls share (a damaged trace) is not linked to any of them: it is flagged
    AMBIGUOUS_LINK instead of silently taking the last call."""
    corr = columns["correlation"]
    call_rows = np.flatnonzero(is_kind(columns, "runtime") & (corr >= 0))
    ids, first, counts = np.unique(corr[call_rows], return_index=True, return_counts=True)
    launcher = np.full(len(columns), -1, dtype=np.int64)
    device_rows = np.flatnonzero(is_kind(columns, *DEVICE_KINDS) & (corr >= 0))
    if len(ids) and len(device_rows):
        at = np.minimum(np.searchsorted(ids, corr[device_rows]), len(ids) - 1)
        found = ids[at] == corr[device_rows]
        single = found & (counts[at] == 1)
        launcher[device_rows[single]] = call_rows[first[at[single]]]
        shared = device_rows[found & (counts[at] > 1)]
        if len(shared):
            damage = columns["damage"].copy()
            damage[shared] |= AMBIGUOUS_LINK
            columns["damage"] = damage
    columns["launcher"] = launcher


# The enclosing-event columns _nest_host_events fills, and the kind of event each one follows ("user" is a
# Python frame outside torch, triton and the standard library).
_NEST_STACKS = ("op", "annotation", "module", "python", "user")


def _nest_host_events(columns: EventColumns, name_codes: np.ndarray | None = None, name_values=None, *,
                      vectorized: bool = True, unnested: np.ndarray | None = None) -> None:
    """Interval nesting per host thread: innermost enclosing op, annotation, module and Python frames.

    The rule, per thread in (ts, longest first, row) order: an event's enclosing X is the last earlier X of
    positive duration that has not ended when the event starts (end > ts); `top_op` is the first such op
    still open. Where the events of one kind nest properly (any two are disjoint or one holds the other:
    every real trace), that is a count and a binary search per event (`_nest_thread`); a kind whose events
    do not nest on a thread (Python frames cut by the profiling window, on some real traces) is walked there
    event by event with a stack (`_nest_thread_walk`), which gives the same answer in both cases and is the
    definition. Kinds are independent (each stack holds its own kind), so only that kind is walked.
    `unnested`: rows of Python frames left out of the frame tree (recorded closing after their parent,
    `_closed_after_parent`): they are nested like any event but hold nothing."""
    n = len(columns)
    host = ~is_kind(columns, *DEVICE_KINDS, "gpu_annotation", "other")
    # Events whose ts, pid or tid is unusable cannot be placed: no parent, no children, no scope.
    placed = (columns["damage"] & UNPLACED) == 0
    rows = np.flatnonzero(host & placed)
    ts = columns["ts"]
    end = columns["end"]
    dur = columns["dur"]
    if name_codes is None:
        name_codes, name_values = columns.coded("name")
    # Library frames: judged once per name, for the names of the Python frames that can hold others.
    is_python = is_kind(columns, "python")
    pushed_python = np.flatnonzero(is_python & host & placed & (dur > 0))
    lib_of_code = np.zeros(len(name_values), dtype=np.int8)   # 0 never judged, 1 user code, 2 library
    for c in unique_codes(name_codes[pushed_python], len(name_values))[0].tolist():
        lib_of_code[c] = 2 if names.is_library_frame(name_values[c]) else 1
    library = lib_of_code[name_codes] == 2
    holds = np.ones(n, dtype=bool)
    if unnested is not None and len(unnested):
        holds[unnested] = False
    kind_of = {
        "op": is_kind(columns, "op"), "annotation": is_kind(columns, "annotation"),
        "module": is_kind(columns, "module") & holds,
        "python": is_python & holds, "user": is_python & (lib_of_code[name_codes] == 1) & holds,
    }
    out = {k: np.full(n, -1, dtype=np.int64) for k in _NEST_STACKS}
    top = np.full(n, -1, dtype=np.int64)
    # Sort by thread, then start, then longest first so that a parent precedes a child with the same start
    # (threads are independent: their order is any).
    thread_codes = columns.coded("thread")[0][rows]
    sort = _start_order(ts[rows], dur[rows], thread_codes)
    order = rows[sort]
    cuts = np.flatnonzero(np.diff(thread_codes[sort])) + 1
    for part in np.split(order, cuts) if len(order) else []:
        improper = _nest_thread(part, ts, end, kind_of, out, top) if vectorized else _NEST_STACKS
        if improper:
            _nest_thread_walk(part, ts, end, dur, kind_of, out, top, improper)
    own_top = kind_of["op"] & (top < 0) & host & placed   # placed: in `rows`
    top[own_top] = np.flatnonzero(own_top)   # a placed op with no op around it is its own top
    cols = {"op": out["op"], "parent_op": out["op"], "top_op": top, "annotation": out["annotation"],
            "module": out["module"], "frame": out["python"], "user_frame": out["user"]}
    for c, values in cols.items():
        columns[c] = values   # read-only: op and parent_op may share one array
    columns["launch_ts"] = columns["ts"]
    columns["library_frame"] = is_python & library


def _start_order(ts: np.ndarray, dur: np.ndarray, thread: np.ndarray) -> np.ndarray:
    """np.lexsort((-dur, ts, thread)): by ts, which a trace's rows nearly follow already (one adaptive pass),
    then the rows that share a start by longest first, then by thread (a radix sort of small codes)."""
    order = np.argsort(ts, kind="stable")
    starts = ts[order]
    same = starts[1:] == starts[:-1]
    same |= np.isnan(starts[1:]) & np.isnan(starts[:-1])   # lexsort holds NaNs equal
    if same.any():   # the rows that share a start with a neighbour, resorted among themselves
        tied = np.zeros(len(order), dtype=bool)
        tied[1:] |= same
        tied[:-1] |= same
        sub = order[tied]
        order[tied] = sub[np.lexsort((sub, -dur[sub], ts[sub]))]
    return order[sorted_order(thread[order])]


def _nest_thread(part: np.ndarray, ts, end, kind_of: dict, out: dict, top: np.ndarray) -> tuple[str, ...]:
    """The nesting of one thread's events (`part`, in order) by counting, kind by kind; the kinds whose
    events do not nest properly there, for which nothing is written."""
    positions = np.arange(len(part), dtype=np.int64)
    t = ts[part]
    e = end[part]
    holds = e > t
    improper: list[str] = []
    for k in _NEST_STACKS:
        # An interval that ends where it starts (a duration lost in float rounding) holds nothing: the
        # walk pops it at the next event, before that event looks.
        is_k = kind_of[k][part] & holds
        if not is_k.any():
            continue
        found = _nest_kind(is_k, t, e, positions, outermost=k == "op")
        del is_k
        if found is None:
            improper.append(k)
            continue
        inner, outer = found   # written at once: each kind's working arrays are freed before the next's
        has = inner >= 0
        out[k][part[has]] = part[inner[has]]
        if outer is not None:
            has = outer >= 0
            top[part[has]] = part[outer[has]]
    return tuple(improper)


def _nest_kind(is_k: np.ndarray, t: np.ndarray, e: np.ndarray, positions: np.ndarray,
               outermost: bool) -> tuple[np.ndarray, np.ndarray | None] | None:
    """For one kind of one thread (`is_k` per position in order; starts `t`, ends `e`): the position of the
    innermost open interval of the kind at each position (-1: none), and of the outermost with `outermost`;
    None where the kind's intervals do not nest properly."""
    size = len(is_k)
    k_pos = np.flatnonzero(is_k)
    before = np.cumsum(is_k) - is_k                  # intervals of kind k earlier in the order
    # Of them, those ended by ts (end <= ts): t ascends; the ends nearly do (an adaptive sort).
    closed = _search_sorted(np.sort(e[k_pos], kind="stable"), t, "right")
    open_ = before - closed                          # how many are open: the stack's height
    del closed
    if (open_ < 0).any():
        return None
    depth = open_[k_pos]
    # The innermost open interval is the last earlier one at depth open_ - 1; the outermost at depth 0.
    # Sorted by (depth, position): k_pos ascends, so a stable sort by depth alone.
    width = size + 1
    key_order = sorted_order(depth)
    sorted_pos = k_pos[key_order]
    sorted_keys = depth[key_order] * width + sorted_pos
    del key_order
    # The last interval of kind k that started earlier (its index in k_pos; one exists where one is open).
    last = np.maximum(before - 1, 0)
    del before
    inside = open_ > 0
    inner = _innermost(open_ - 1, inside, last, depth, k_pos, positions, sorted_keys, sorted_pos, width)
    if ((inner >= 0) != inside).any():
        return None
    # Proper nesting: an interval of kind k ends no later than the one it opened inside.
    parent_of_k = inner[k_pos]
    with_parent = parent_of_k >= 0
    if (e[k_pos[with_parent]] > e[parent_of_k[with_parent]]).any():
        return None
    outer = (_innermost(np.zeros(size, dtype=np.int64), inside, last, depth, k_pos, positions, sorted_keys,
                        sorted_pos, width) if outermost else None)
    return inner, outer


def _innermost(level: np.ndarray, inside: np.ndarray, last: np.ndarray, depth: np.ndarray, k_pos: np.ndarray,
               positions: np.ndarray, sorted_keys: np.ndarray, sorted_pos: np.ndarray, width: int) -> np.ndarray:
    """_last_at where an interval is open (`inside`), where the last interval of the kind before each
    position (`last`) is the answer whenever its depth is `level` (no later one can be): only the other
    positions are searched."""
    direct = inside & (depth[last] == level)
    out = np.where(direct, k_pos[last], -1)
    rest = np.flatnonzero(inside & ~direct)
    if len(rest):
        out[rest] = _last_at(level[rest], positions[rest], sorted_keys, sorted_pos, width)
    return out


def _last_at(level: np.ndarray, positions: np.ndarray, sorted_keys: np.ndarray, sorted_pos: np.ndarray,
             width: int) -> np.ndarray:
    """Per position (each inside an open interval), the last earlier interval at nesting depth `level` (-1
    where there is none)."""
    queries = level * width + positions
    # Searched in ascending order (by level, then position; `positions` ascend): a binary search of queries
    # in order is far cheaper.
    order = sorted_order(level)
    at = np.empty(len(queries), dtype=np.intp)
    at[order] = _search_sorted(sorted_keys, queries[order], "left") - 1
    ok = at >= 0
    at = np.where(ok, at, 0)
    ok &= (sorted_keys[at] // width) == level
    return np.where(ok, sorted_pos[at], -1)


def _nest_thread_walk(part: np.ndarray, ts, end, dur, kind_of: dict, out: dict, top: np.ndarray,
                      kinds: tuple[str, ...] = _NEST_STACKS) -> None:
    """The nesting of one thread's events for `kinds`, event by event with a stack per kind (the
    definition); `top` too when the ops are among them. In C where the extension is built (the same walk:
    tests/test_nest_walk.py), else `_nest_thread_walk_python`."""
    op_kind = kinds.index("op") if "op" in kinds else -1
    if not nest_walk_native(part, ts, end, dur, [kind_of[k] for k in kinds], [out[k] for k in kinds], top,
                            op_kind):
        _nest_thread_walk_python(part, ts, end, dur, kind_of, out, top, kinds)


def _nest_thread_walk_python(part: np.ndarray, ts, end, dur, kind_of: dict, out: dict, top: np.ndarray,
                             kinds: tuple[str, ...] = _NEST_STACKS) -> None:
    stacks: dict[str, list] = {k: [] for k in kinds}
    flags = {k: kind_of[k][part].tolist() for k in kinds}
    ts_l, end_l, dur_l, rows = ts[part].tolist(), end[part].tolist(), dur[part].tolist(), part.tolist()
    for i, row in enumerate(rows):
        t = ts_l[i]
        for k, stack in stacks.items():
            while stack and t >= stack[-1][0]:
                stack.pop()
            if stack:
                out[k][row] = stack[-1][1]
        if stacks.get("op"):
            top[row] = stacks["op"][0][1]
        if dur_l[i] <= 0:
            continue
        for k in kinds:
            if flags[k][i]:
                stacks[k].append((end_l[i], row))


_EDGE_US = 10.0   # a frame whose start or end lies this close to the window's is cut by the window


@dataclass(frozen=True)
class FrameTree:
    """Python frames whose `Python parent id` disagrees with the time nesting without damage, as torch's
    Python tracer records compiled regions, custom ops and activation checkpointing (rows of the table):

    - `across_threads`: top-level frames on their thread whose parent id names a frame on another thread of
      the process that started before them but no longer holds them: autograd-engine hooks and checkpoint
      recomputes on the engine's thread name the frame that called backward() in the first step, step after
      step. They nest by time on their own thread.
    - `unnested`: frames that start inside the frame their parent id names and end after it: calls whose
      return the tracer did not see (C functions that re-enter Python, as custom ops under torch.compile do,
      left open to the end of the recording). They cannot nest, so they are left out of the frame tree: they
      hold nothing, and what ran after them nests in the frames that really held it.
    """

    across_threads: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int64))
    unnested: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int64))

    def notes(self) -> list[str]:
        """One line per kind of re-parenting found; [] for a trace whose two trees agree."""
        lines = []
        if len(self.across_threads):
            lines.append(f"{len(self.across_threads)} Python frame(s) name a parent on another thread that no "
                         "longer holds them (autograd-engine hooks, checkpoint recomputes): nested by time on "
                         "their own thread")
        if len(self.unnested):
            lines.append(f"{len(self.unnested)} Python frame(s) recorded ending after the frame their parent id "
                         "names (calls whose return the profiler did not see, under compiled regions and custom "
                         "ops): left out of the frame tree")
        return lines


# EventTable.derived key: the table's FrameTree (kernlint.trace.table.frame_tree).
FRAME_TREE_KEY = "frame-tree"


def frame_tree(table: EventTable) -> FrameTree:
    """The re-parented Python frames of a loaded table (an empty FrameTree for a table built otherwise)."""
    return table.derived.get(FRAME_TREE_KEY) or FrameTree()


@dataclass(frozen=True)
class _FrameParents:
    """Python frames that carry a parent id: their rows, and the row of the frame that id names (-1: no
    frame carries it)."""

    frames: np.ndarray
    child: np.ndarray
    parent: np.ndarray


def _frame_parents(columns: EventColumns, python_ids, parent_ids) -> _FrameParents | None:
    """The frame each Python frame's `Python parent id` names; None where no frame carries a parent id."""
    frames = np.flatnonzero(is_kind(columns, "python", "module"))
    if not len(frames):
        return None
    if isinstance(python_ids, np.ndarray) and isinstance(parent_ids, np.ndarray):
        ids, parents = python_ids[frames], parent_ids[frames]
    else:   # one column, so that large ids get one coding
        rows = frames.tolist()
        exact = [python_ids[i] if isinstance(python_ids, list) else (int(python_ids[i]) if python_ids[i] >= 0
                 else None) for i in rows]
        exact += [parent_ids[i] if isinstance(parent_ids, list) else (int(parent_ids[i]) if parent_ids[i] >= 0
                  else None) for i in rows]
        both, _ = _id_column(exact)
        ids, parents = both[:len(frames)], both[len(frames):]
    has_parent = parents >= 0
    if not has_parent.any():
        return None
    child = frames[has_parent]
    known = ids >= 0
    order = np.argsort(ids[known], kind="stable")
    sorted_ids, holders = ids[known][order], frames[known][order]
    parent = np.full(len(child), -1, dtype=np.int64)
    if len(sorted_ids):
        at = np.minimum(np.searchsorted(sorted_ids, parents[has_parent]), len(sorted_ids) - 1)
        found = sorted_ids[at] == parents[has_parent]
        parent[found] = holders[at[found]]
    return _FrameParents(frames, child, parent)


def _slack(end: np.ndarray, p: np.ndarray, child: np.ndarray) -> np.ndarray:
    """How far apart two times of a frame and its parent may be and still be one (the float rounding of
    `ts + dur`)."""
    with np.errstate(invalid="ignore"):
        return 1e-3 + 4 * np.spacing(np.maximum(np.abs(end[p]), np.abs(end[child])))


def _closed_after_parent(columns: EventColumns, parents: _FrameParents | None) -> np.ndarray:
    """Rows of Python frames that start inside the frame their parent id names, on its thread, and end after
    it (not at the window's close, where both are cut): their return was not seen (FrameTree.unnested)."""
    if parents is None:
        return np.empty(0, dtype=np.int64)
    has = parents.parent >= 0
    child, p = parents.child[has], parents.parent[has]
    placed = (columns["damage"] & UNPLACED) == 0
    ts, end = columns["ts"], columns["end"]
    thread = columns.coded("thread")[0]
    slack = _slack(end, p, child)
    hi = np.nanmax(end[parents.frames])
    with np.errstate(invalid="ignore"):
        late = (placed[child] & placed[p] & (thread[p] == thread[child]) & (ts[p] <= ts[child] + slack)
                & (ts[child] < end[p]) & (end[child] > end[p] + slack) & (hi - end[p] > _EDGE_US))
    return child[late]


def _check_frame_tree(columns: EventColumns, parents: _FrameParents | None, unnested: np.ndarray, python_ids,
                      parent_ids) -> FrameTree:
    """Flag FRAME_OUTSIDE_PARENT on Python frames that disagree with the tree kineto recorded: the frame its
    `Python parent id` names must be a Python frame on the same thread whose interval holds it (within the
    float rounding of `ts + dur`). A moved or re-categorised frame does not (a parent id that names no frame,
    or an event that is no longer a frame, is flagged alike). What torch's tracer records that way without
    damage (window edges, the autograd engine's thread, calls whose return it did not see: FrameTree) is
    not flagged; the FrameTree says what was found."""
    if parents is None:
        return FrameTree()
    frames, child, parent = parents.frames, parents.child, parents.parent
    damage = columns["damage"].copy()
    placed = (damage & UNPLACED) == 0
    has = parent >= 0
    p = np.where(has, parent, 0)
    # Counted already: a frame, or the frame it names, with an unusable ts, pid or tid.
    judged = placed[child] & (~has | placed[p])
    ts, end = columns["ts"], columns["end"]
    thread = columns.coded("thread")[0]   # set by _nest_host_events; codes of distinct texts compare alike
    slack = _slack(end, p, child)
    with np.errstate(invalid="ignore"):
        inside = (ts[p] <= ts[child] + slack) & (end[child] <= end[p] + slack)
        started_before = ts[p] <= ts[child] + slack
    same_thread = thread[p] == thread[child]
    ok = has & same_thread & inside
    # Kineto's own cross-thread tree: a Python hook the autograd engine runs on its thread (a top-level frame
    # there: checkpoint recomputes, custom Functions' backward) names the frame that called backward() on the
    # main thread, which held it in the first step and no longer does in later ones. Not damage.
    process = columns.coded("pid")[0]
    top_level = columns["frame"][child] < 0   # no frame of its own thread holds it
    across = has & ~same_thread & top_level & (process[p] == process[child]) & started_before
    ok |= across
    # Calls whose return the tracer did not see: they end after their parent (left out of the frame tree).
    ok |= np.isin(child, unnested)
    # A window edge: a parent frame cut at the window's start or end (it began before the window opened, or
    # ran past its close) no longer holds its child's whole interval. Not damage.
    lo, hi = np.nanmin(ts[frames]), np.nanmax(end[frames])
    with np.errstate(invalid="ignore"):
        cut_start = (ts[p] - lo <= _EDGE_US) & (ts[child] <= ts[p] + slack)
        cut_end = (hi - end[p] <= _EDGE_US) & (end[child] >= end[p] - slack)
    ok |= has & same_thread & (cut_start | cut_end)
    # A parent outside the trace is an edge, not damage: a top-level frame (no frame of the trace holds it)
    # whose parent id no event of the trace carries started under a frame that began before the window, or
    # that was cut away with the rest of the run (TraceLens's vLLM segment). A parent id that another event
    # carries (a frame re-categorised) or a frame that some frame does hold stays damage.
    orphan = np.flatnonzero(~has & (columns["frame"][child] < 0))
    if len(orphan):
        missing = [_parent_id_value(parent_ids, r) for r in child[orphan].tolist()]
        carried = _carried_ids(python_ids)
        ok[orphan] = [m is not None and m not in carried for m in missing]
    damage[child[judged & ~ok]] |= FRAME_OUTSIDE_PARENT
    columns["damage"] = damage
    return FrameTree(across_threads=child[judged & across & ~inside].astype(np.int64),
                     unnested=np.asarray(unnested, dtype=np.int64))


def _parent_id_value(parent_ids, row: int) -> int | None:
    value = parent_ids[row]
    if isinstance(parent_ids, list):
        return value
    return int(value) if value >= 0 else None


def _carried_ids(python_ids) -> set[int]:
    """Every `Python id` that an event of the trace carries, whatever its kind."""
    if isinstance(python_ids, list):
        return {v for v in python_ids if v is not None}
    return set(python_ids[python_ids >= 0].tolist())


def _inherit_from_launcher(columns: EventColumns) -> None:
    """Device events take their host-side context from the call that launched them."""
    launcher = columns["launcher"]
    dev = np.flatnonzero(launcher >= 0)
    if not len(dev):
        return
    src = launcher[dev]
    for c in ("op", "top_op", "annotation", "module", "frame", "user_frame"):
        values = columns[c].copy()
        values[dev] = values[src]
        columns[c] = values
    thread_codes, threads = columns.coded("thread")
    thread_codes = thread_codes.copy()
    thread_codes[dev] = thread_codes[src]
    columns.set_coded("thread", thread_codes, threads)
    launch_ts = columns["launch_ts"].copy()
    launch_ts[dev] = launch_ts[src]
    columns["launch_ts"] = launch_ts
    # Device events on the same device share a device index: prefer the explicit arg, else the pid (read
    # once per distinct pid of those events).
    device = columns["device"].copy()
    pid_codes, pid_values = columns.coded("pid")
    no_device = np.flatnonzero(is_kind(columns, *DEVICE_KINDS) & (device < 0))
    if len(no_device):
        used, local = unique_codes(pid_codes[no_device], len(pid_values))
        device[no_device] = np.array([_int_or(v) for v in pid_values[used].tolist()], dtype=np.int64)[local]
    columns["device"] = device
    # A launch whose op was a dtype-changing copy is a cast; an otherwise unknown kernel launched through
    # the driver (cuLaunchKernel / cuLaunchKernelEx, as Triton does) is a Triton kernel. A call whose device
    # event blocks the host (a device-to-host copy into pageable memory) is a sync, whatever its name. Each
    # name is judged once; device rows are never launchers, so the rows' order does not matter.
    cat_codes, cat_values = columns.coded("category")
    cat_codes = cat_codes.copy()
    cat_values = cat_values.tolist()
    code = {c: i for i, c in enumerate(cat_values)}

    def code_of(category: str) -> int:
        if category not in code:
            code[category] = len(cat_values)
            cat_values.append(category)
        return code[category]

    name_codes, name_values = columns.coded("name")
    name_list = name_values.tolist()

    def by_name(rows: np.ndarray, test) -> np.ndarray:
        used, local = unique_codes(name_codes[rows], len(name_list))
        return np.array([bool(test(name_list[c])) for c in used.tolist()] or [False], dtype=bool)[local]

    other = code.get("other", -1)
    maybe_triton = dev[cat_codes[dev] == other] if other >= 0 else dev[:0]
    if len(maybe_triton):
        triton = maybe_triton[by_name(launcher[maybe_triton], names.is_triton_launch)]
        cat_codes[triton] = code_of("triton")
    if len(dev):
        syncing = src[by_name(dev, names.makes_launcher_sync)]
        cat_codes[syncing] = code_of("sync")
    copy = code.get("copy", -1)
    copies = dev[cat_codes[dev] == copy] if copy >= 0 else dev[:0]
    if len(copies):
        # Up the op chain from the launching op to the top op, all copies at once, a level per step.
        ops, top, parent = columns["op"], columns["top_op"], columns["parent_op"]
        is_cast = np.array([n in names.CASTING_OPS for n in name_list] or [False], dtype=bool)
        rows, op = copies, ops[copies]
        cast = np.zeros(len(columns), dtype=bool)
        while len(rows):
            live = op >= 0
            rows, op = rows[live], op[live]
            hit = is_cast[name_codes[op]]
            cast[rows[hit]] = True
            rows, op = rows[~hit], op[~hit]
            op = np.where(op != top[rows], parent[op], -1)
        cat_codes[cast] = code_of("cast")
    columns.set_coded("category", cat_codes, _object_array(cat_values))


def _allocation_dtypes_and_pairs(columns: EventColumns, store: OpArgsStore | None) -> None:
    """dtype of each allocation from its enclosing op; alloc <-> free pairing by device and address."""
    n = len(columns)
    dtype = np.full(n, "", dtype=object)
    is_alloc = is_kind(columns, "alloc")
    alloc_rows = np.flatnonzero(is_alloc)
    if len(alloc_rows):   # once per allocating op
        owners, owner_of = np.unique(columns["op"][alloc_rows], return_inverse=True)
        found = _op_output_dtypes(owners, columns["name"], store, columns["parent_op"])
        dtype[alloc_rows] = _object_array([d or "" for d in found])[owner_of.reshape(-1)]
    # Memory events: device index from Device Id for any accelerator (CUDA 1, HIP 6, XPU 12, MPS 13, MTIA 19,
    # ...), -1 for host memory (Device Type 0). The codes are c10's DeviceType (kernlint.trace.dtypes).
    from kernlint.trace.dtypes import HOST_DEVICE_TYPE_CODES

    device = columns["device"].copy()
    dev_type = columns["device_type"]
    mem = np.flatnonzero(is_alloc | is_kind(columns, "free"))
    device[mem] = np.where(np.isin(dev_type[mem], list(HOST_DEVICE_TYPE_CODES)), -1, device[mem])
    columns["device"] = device
    paired = np.full(n, -1, dtype=np.int64)
    addr = columns["addr"]
    ts = columns["ts"]
    mem = mem[np.isfinite(ts[mem])]  # an allocation with no usable time cannot be paired
    # In time order, each (device, address) is open from an alloc to the next free: a free pairs with the
    # event just before it on its address when that is an alloc (a later alloc replaces an open one).
    mem = mem[np.argsort(ts[mem], kind="stable")]
    mem = mem[sorted_order(addr[mem], device[mem])]   # by address, each address's events in time order
    if len(mem) > 1:
        same = (device[mem[1:]] == device[mem[:-1]]) & (addr[mem[1:]] == addr[mem[:-1]])
        pair = same & ~is_alloc[mem[1:]] & is_alloc[mem[:-1]]
        frees, allocs = mem[1:][pair], mem[:-1][pair]
        paired[allocs] = frees
        paired[frees] = allocs
        dtype[frees] = dtype[allocs]
    columns["dtype"] = dtype
    columns["paired"] = paired


def _op_output_dtypes(ops: np.ndarray, names_, store: OpArgsStore | None, parent) -> list[str | None]:
    """_op_output_dtype of each of `ops` (distinct, ascending): the ops' own arguments found in one search and
    each form of them decoded once; a walk up the parents only from the ops whose own arguments say nothing."""
    by_args: dict[tuple, str | None] = {}
    own: list[str | None] = [None] * len(ops)
    if store is not None and len(store.rows) and len(ops):
        at = np.minimum(np.searchsorted(store.rows, ops), len(store.rows) - 1)
        hit = np.flatnonzero(store.rows[at] == ops)
        blob = store.blob
        offsets = store.offsets[at[hit]]
        # Ops repeat: a form is the name with Input type and Concrete Inputs (adjacent in the buffer). The
        # forms are told apart by dicts and maps, not a Python loop per op.
        both = list(map(blob.__getitem__, map(slice, offsets[:, 1].tolist(), offsets[:, 3].tolist())))
        forms = list(zip(names_[ops[hit]].tolist(), both, (offsets[:, 2] - offsets[:, 1]).tolist()))
        first = dict(zip(reversed(forms), range(len(forms) - 1, -1, -1)))   # each form's first op
        decoded = {}
        for form, i in first.items():
            name, (o0, o1, o2, o3, o4) = form[0], offsets[i].tolist()
            decoded[form] = by_args[(name, blob[o2:o3], blob[o1:o2])] = _dtype_from_args(
                name, (blob[o0:o1], blob[o1:o2], blob[o2:o3], blob[o3:o4]))
        for i, found in zip(hit.tolist(), map(decoded.__getitem__, forms)):
            own[i] = found
    if all(own):
        return own
    memo = {op: found for op, found in zip(ops.tolist(), own) if found}
    return [found or _op_output_dtype(op, names_, store, parent, memo, by_args)
            for found, op in zip(own, ops.tolist())]


def _op_output_dtype(op: int, names_, store: OpArgsStore | None, parent, memo: dict, by_args: dict) -> str | None:
    """Best guess of the dtype an op allocates: the dtype argument of a factory op, else its first input's."""
    start, seen = op, []
    found = None
    while op >= 0:
        if op in memo:
            found = memo[op]
            break
        seen.append(op)
        found = _own_output_dtype(op, names_[op], store, by_args)
        if found:
            break
        op = parent[op]
    for o in seen:   # what the walk found from each op it passed is what a walk from there would find
        memo[o] = found
    return memo.get(start, found)


def _own_output_dtype(op: int, name: str, store: OpArgsStore | None, seen: dict) -> str | None:
    fields = store.fields(op) if store is not None else None
    if not fields:
        return None
    key = (name, fields[OpArgsStore.CONCRETE], fields[OpArgsStore.TYPES])   # ops repeat: decode each form once
    if key not in seen:
        seen[key] = _dtype_from_args(name, fields)
    return seen[key]


def _dtype_from_args(name: str, fields) -> str | None:
    pos = _DTYPE_ARG_POSITION.get(name)
    if pos is not None:
        ci = raw_list(fields[OpArgsStore.CONCRETE])
        if pos < len(ci):
            found = dtype_from_code(ci[pos])
            if found:
                return found
    if pos is not None or not name.startswith("aten::empty"):
        for t in raw_list(fields[OpArgsStore.TYPES]):
            found = dtype_from_input_type(t) if isinstance(t, str) else None
            if found:
                return found
    return None


# Composite ops that only forward to a child: with no child below them they did nothing.
_FORWARDING_OPS = frozenset({"aten::contiguous", "aten::to", "aten::type_as", "aten::_to_copy", "aten::clone",
                             "aten::reshape", "aten::flatten", "aten::repeat_interleave"})


def _work_flags(columns: EventColumns) -> None:
    """Whether an op does work: device work on a GPU, compute on a CPU (not just allocation or views).

    An op in a working category does work; so does any op above a working op. A forwarding op
    (`contiguous`, `to`) with nothing below it was a no-op. Op-level (CPU) checks use this flag.
    """
    parent = columns["parent_op"]
    is_op = is_kind(columns, "op")
    op_rows = np.flatnonzero(is_op)
    has_child = np.zeros(len(columns), dtype=bool)
    child_parents = parent[op_rows]
    has_child[child_parents[child_parents >= 0]] = True
    name_codes, name_values = columns.coded("name")
    forwarding = np.array([n in _FORWARDING_OPS for n in name_values.tolist()] or [False], dtype=bool)
    seeds = is_op & ~category_mask(columns, ("alloc", "view")) & (has_child | ~forwarding[name_codes])
    # Every working op and every op above it: up the parent links a level at a time, stopping at ops
    # already marked (their own ancestors are marked through them).
    work = np.zeros(len(columns), dtype=bool)
    rows = np.flatnonzero(seeds)
    while len(rows):
        work[rows] = True
        rows = parent[rows]
        rows = rows[rows >= 0]
        rows = distinct_ints(rows[~work[rows]]) if len(rows) else rows
    columns["does_work"] = work


def _sources(columns: EventColumns) -> None:
    """`file.py:line` of each event's innermost user frame, worked out once per frame name."""
    user = columns["user_frame"]
    source = np.full(len(columns), None, dtype=object)
    rows = np.flatnonzero(user >= 0)
    name_codes, name_values = columns.coded("name")
    used, local = unique_codes(name_codes[user[rows]], len(name_values))
    texts = np.empty(len(used), dtype=object)
    for i, name in enumerate(name_values[used].tolist()):
        file, line, _func = names.frame_parts(name)
        texts[i] = f"{file}:{line}" if file else name
    source[rows] = texts[local]
    columns.set_object("source", source)   # None where there is no source
