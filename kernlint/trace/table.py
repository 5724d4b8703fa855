"""The event table: one row per trace event, typed columns, links and nesting resolved.

Public API. `EventTable.columns` holds one numpy array per column (kernlint.trace.event_columns), what
kernlint itself reads; `EventTable.frame` is the same events as a pandas DataFrame (the `pandas` extra; made on first use: pandas
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

import dataclasses
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import numpy as np

from kernlint.errors import TraceError
from kernlint.trace.columns import OpArgsStore, RawColumns, _int_or, decode_events
from kernlint.trace.event_columns import EventColumns
from kernlint.trace.frames import FrameTree
from kernlint.trace.kinds import (
    DEVICE_KINDS,
    KINDS,
    has_kind,
)
from kernlint.trace.schema import RawTrace
from kernlint.trace.table_build import build_columns

if TYPE_CHECKING:
    import pandas as pd

    from kernlint.trace.damage import TraceDamage
    from kernlint.trace.graphs import GraphReplays
    from kernlint.trace.runs import RunIdentity
    from kernlint.trace.scopes import ScopeIndex
    from kernlint.trace.window import WindowEdges

T = TypeVar("T")


@dataclass(frozen=True)
class DeviceInfo:
    """One device of the trace's `deviceProperties` (kineto writes one entry per GPU), the fields kernlint reads,
    typed: each None where the trace leaves it out or records a value of another type. Read once per trace
    (`TraceMeta.devices`), never as dict lookups where it is used."""

    index: int | None = None                          # "id"
    name: str | None = None                           # "name", stripped (None when empty)
    total_memory: int | None = None                   # "totalGlobalMem", bytes
    compute_capability: tuple[int, int] | None = None  # ("computeMajor", "computeMinor")
    sm_count: int | None = None                       # "numSms"

    @classmethod
    def of(cls, props: dict[str, Any]) -> DeviceInfo:
        def whole(key: str) -> int | None:
            value = props.get(key)
            return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None

        name = props.get("name")
        major, minor = whole("computeMajor"), whole("computeMinor")
        return cls(index=whole("id"), name=(name.strip() or None) if isinstance(name, str) else None,
                   total_memory=whole("totalGlobalMem"),
                   compute_capability=(major, minor) if major is not None and minor is not None else None,
                   sm_count=whole("numSms"))


@dataclass
class TraceMeta:
    """What the trace says about where it was recorded. `device_properties`: the entries as recorded (shown in
    reports); `devices`: the same, typed (DeviceInfo)."""

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

    @property
    def devices(self) -> tuple[DeviceInfo, ...]:
        return tuple(DeviceInfo.of(p) for p in self.device_properties if isinstance(p, dict))

    @property
    def gpu_models(self) -> tuple[str, ...]:
        """The distinct device names the trace records, sorted."""
        return tuple(sorted({d.name for d in self.devices if d.name}))


@dataclass
class Derived:
    """What the loader found about a trace's events beside its columns: facts about its rows, not caches, so
    they go wherever the rows go: the table relabelled (`meta` replaced), its columns replaced, the same rows
    with other values (`EventTable.with_columns`: a what-if of slower kernels), a pickled table. A table made
    of other rows has none unless they are given (`EventTable(columns, meta, derived)`)."""

    # The raw JSON of (Input Dims, Input type, Concrete Inputs, Input Strides) of the ops that recorded shapes,
    # decoded only by the checks that follow tensors (kernlint.rules.evidence.op_args); None: a table built
    # without them (from a DataFrame).
    op_args: OpArgsStore | None = None
    # Python frames recorded apart from the time nesting without damage (kernlint.trace.frames).
    frame_tree: FrameTree = field(default_factory=FrameTree)
    # The CUDA-graph replays and how their device events were attributed (kernlint.trace.graphs.
    # attribute_replays; read through graphs.graph_replays); None: no attribution was run.
    graph_replays: GraphReplays | None = None


class TableMemo(Generic[T]):
    """The key of a cache that a floor above the trace's (rules, baseline) keeps with a table
    (`TableCaches.memo`): one object per cache, declared with its type, never a string."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"TableMemo({self.name!r})"


@dataclass
class TableCaches:
    """Indexes computed from a table's columns and meta on first use, each by the one function that makes it.
    Dropped whenever the columns or the meta are replaced (what they were computed from), never pickled or
    copied with the table, and cleared by `EventTable.clear_caches` (an index may point back at its table)."""

    scope_index: ScopeIndex | None = None              # kernlint.trace.scopes.ScopeIndex.of
    damage: TraceDamage | None = None                  # kernlint.trace.damage.trace_damage
    window_edges: WindowEdges | None = None            # kernlint.trace.window.window_edges
    run_identity: RunIdentity | None = None            # kernlint.trace.runs.run_identity
    replay_prologue: frozenset[int] | None = None      # kernlint.trace.graphs.replay_prologue_rows
    capture_spans: dict[str, list[tuple[float, float]]] | None = None   # kernlint.trace.graphs.capture_spans
    _memos: dict[TableMemo[Any], Any] = field(default_factory=dict)

    def memo(self, key: TableMemo[T], make: Callable[[], T]) -> T:
        """The cache `key` of this table, made by `make()` on first use (None is a value too)."""
        if key in self._memos:
            return self._memos[key]
        found = self._memos[key] = make()
        return found


class EventTable:
    """One loaded trace: its events as columns (`columns`: name -> numpy array, one row per event) plus what
    the trace says about itself (`meta`), what the loader found beside the columns (`derived`, typed facts
    that travel with the rows) and the indexes computed from them (`caches`). `frame` is the same events as a
    pandas DataFrame, for the Python API."""

    def __init__(self, columns: EventColumns | None = None, meta: TraceMeta | None = None,
                 derived: Derived | None = None, *, frame: pd.DataFrame | None = None) -> None:
        if (columns is None) == (frame is None):
            raise TypeError("EventTable takes the events as columns or as a frame, one of them")
        if derived is not None and not isinstance(derived, Derived):
            raise TypeError(f"EventTable: derived must be a kernlint.trace.table.Derived, not {type(derived).__name__}")
        self._columns = columns
        self._assigned: pd.DataFrame | None = None
        self._frame: tuple[EventColumns, int, pd.DataFrame] | None = None   # (made from, at version, frame)
        self.caches = TableCaches()
        if frame is not None:
            self.frame = frame
        self._meta = meta
        self.derived: Derived = Derived() if derived is None else derived

    def __repr__(self) -> str:
        return f"EventTable({self.meta.path!r}, {len(self)} events)"

    def __getstate__(self) -> dict[str, Any]:
        """Pickled with its columns, meta and derived facts; the caches are made again where it lands."""
        return {"columns": self.columns, "meta": self._meta, "derived": self.derived}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["columns"], state["meta"], state["derived"])

    def with_columns(self, columns: EventColumns) -> EventTable:
        """Another table of the same events (the same rows, other values: a what-if of slower kernels): this
        table's meta and derived facts, its own caches."""
        if len(columns) != len(self):
            raise ValueError(f"with_columns: {len(columns)} rows for a table of {len(self)}: the derived facts "
                             "name rows of this table")
        return EventTable(columns, self._meta, dataclasses.replace(self.derived))

    def clear_caches(self) -> None:
        """Drop the computed indexes (they point back at the table: the table then goes with its last
        reference, without the cyclic collector). The derived facts stay."""
        self.caches = TableCaches()

    @property
    def meta(self) -> TraceMeta:
        return self._meta

    @meta.setter
    def meta(self, meta: TraceMeta) -> None:
        self._meta = meta
        self.caches = TableCaches()   # the run identity, the run metadata read beside the path

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
        self.caches = TableCaches()

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
        self.caches = TableCaches()

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
        """Whether any event is of one of `kinds` (answered once per kind column: kernlint.trace.kinds)."""
        return has_kind(self.columns, kinds)

    def of_kind(self, *kinds: str) -> pd.DataFrame:
        frame = self.frame
        return frame[frame["kind"].isin(kinds)]

    def __len__(self) -> int:
        return len(self._assigned) if self._assigned is not None else len(self.columns)


def _frame_of(columns: EventColumns) -> pd.DataFrame:
    """The DataFrame of the Python API, with the dtypes pandas gave the columns when the table was one.
    pandas is the `pandas` extra: without it, MissingExtraError naming the extra."""
    from kernlint.extras import require_pandas

    require_pandas("EventTable.frame")
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


def build_event_table(raw: RawTrace, path: str | Path, cols: RawColumns | None = None) -> EventTable:
    """Raw decoded trace -> EventTable with links, nesting, scopes inputs and allocation dtypes. `cols`: the
    events already decoded (a streamed trace, kernlint.trace.event_stream), else `raw.trace_events` are.

    A trace with no events besides metadata raises TraceError. Events whose essential fields are unusable
    are kept, flagged in the `damage` column and left out of what they would make wrong (nesting, links).
    The columns are built by kernlint.trace.table_build."""
    if cols is None:
        cols = decode_events(raw.trace_events, path, raw.events_at if isinstance(raw.events_at, str) else "$")
    meta = _meta(raw, path)
    raw.trace_events = []   # the events' raw JSON (and through it the file's bytes) is no longer needed
    if not cols.n:
        others = cols.others
        raise TraceError(path, "holds no trace events" + (
            f" (only {others} metadata or flow event{'s' if others != 1 else ''})" if others else ""))
    built = build_columns(cols)
    return EventTable(built.columns, meta, Derived(op_args=built.op_args, frame_tree=built.frame_tree))


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
