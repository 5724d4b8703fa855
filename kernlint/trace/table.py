"""The event table: one row per trace event, typed columns, links and nesting resolved.

Public API. `EventTable.frame` is a pandas DataFrame whose row label is the event's position (`row`);
every link column holds a row label, or -1 where there is no such event. Columns:

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
| launcher | device events: the runtime/driver call that launched them |
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

import operator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from kernlint.errors import TraceError
from kernlint.trace import names
from kernlint.trace.dtypes import dtype_from_code, dtype_from_input_type
from kernlint.trace.schema import RawTrace, raw_list

KINDS = ("kernel", "memcpy", "memset", "runtime", "op", "annotation", "gpu_annotation", "python", "module",
         "alloc", "free", "other")
DEVICE_KINDS = frozenset({"kernel", "memcpy", "memset"})

_CAT_TO_KIND = {
    "kernel": "kernel",
    "gpu_memcpy": "memcpy", "memcpy": "memcpy",
    "gpu_memset": "memset", "memset": "memset",
    "cuda_runtime": "runtime", "cuda_driver": "runtime", "runtime": "runtime", "driver": "runtime",
    "cpu_op": "op", "operator": "op",
    "user_annotation": "annotation", "nvtx": "annotation",
    "gpu_user_annotation": "gpu_annotation",
    "python_function": "python", "python": "python",
}
_STEP_RANGE = names.named_pattern("profiler-step-range")
_SKIPPED_PHASES = frozenset({"M", "s", "f", "t", "b", "e", "n"})

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
BAD_THREAD = "?"                        # the pid / tid text of an event whose pid / tid is unusable
_INT64_LIMIT = 2 ** 63
_NONE = type(None)
_MODULE_PREFIX = "nn.Module: "

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


@dataclass
class EventTable:
    """One loaded trace: its events as a DataFrame plus what the trace says about itself."""

    frame: pd.DataFrame
    meta: TraceMeta
    # Derived indexes built once per table (kernlint.trace.scopes.ScopeIndex.of keeps its own here).
    derived: dict[Any, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def path(self) -> str:
        return self.meta.path

    @property
    def has_device_events(self) -> bool:
        return self._has_kind(DEVICE_KINDS)

    @property
    def has_stacks(self) -> bool:
        return self._has_kind(("python",))

    def _has_kind(self, kinds) -> bool:
        column = self.frame["kind"]
        if isinstance(column.dtype, pd.CategoricalDtype):   # the codes: no string compare per row
            categories = list(column.cat.categories)
            codes = [categories.index(k) for k in kinds if k in categories]
            return bool(np.isin(column.cat.codes.to_numpy(), codes).any())
        return bool(column.isin(list(kinds)).any())

    def of_kind(self, *kinds: str) -> pd.DataFrame:
        return self.frame[self.frame["kind"].isin(kinds)]

    def __len__(self) -> int:
        return len(self.frame)


def _int_or(value: Any, default: int | None = -1) -> int | None:
    """An integer from a trace value (int, integral float, integer text), else `default`."""
    if value is None or isinstance(value, bool):
        return default
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value) if value.is_integer() else default
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            return default
    return default


def _float_or_nan(value: Any) -> float:
    if value is None or isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return float("nan")
    try:
        return float(value)
    except (TypeError, ValueError, OverflowError):
        return float("nan")


def _float_column(values: list) -> np.ndarray:
    """Numbers (or numeric strings) to float64, NaN where missing or not a number; the common all-numeric case
    stays in C. Infinities stay (callers that need finite values test for them)."""
    if set(map(type, values)) <= {int, float, _NONE}:  # numpy turns None into NaN
        try:
            return np.array(values, dtype=np.float64)
        except OverflowError:  # an int beyond float range
            pass
    return np.fromiter((_float_or_nan(v) for v in values), dtype=np.float64, count=len(values))


def _int_column(values: list, default: int = -1) -> np.ndarray:
    """Integers to int64, `default` where missing, not a number, or out of int64 range (never a warning)."""
    n = len(values)
    if set(map(type, values)) <= {int, _NONE}:
        present = np.fromiter((v is not None for v in values), dtype=bool, count=n)
        try:
            ints = np.array([v for v in values if v is not None], dtype=np.int64)
        except OverflowError:
            pass
        else:
            out = np.full(n, default, dtype=np.int64)
            out[present] = ints
            return out
    floats = _float_column(values)
    ok = np.isfinite(floats) & (np.abs(floats) < _INT64_LIMIT)
    out = np.full(n, default, dtype=np.int64)
    out[ok] = floats[ok].astype(np.int64)
    return out


_BAD = object()


def _as_id(value: Any) -> Any:
    """A kineto id as an exact Python int; None when absent; _BAD when not a non-negative integer."""
    if value is None:
        return None
    t = type(value)
    if t is int:
        return value if value >= 0 else _BAD
    if t is float:
        return int(value) if value.is_integer() and value >= 0 else _BAD
    if t is str:
        text = value.strip()
        return int(text) if text.isascii() and text.isdigit() else _BAD
    return _BAD


def _id_column(values: list) -> tuple[np.ndarray, np.ndarray]:
    """Correlation / External ids -> (int64 column, unusable mask). Ids are compared exactly, never through
    float64: where they all fit in int64 the column holds them as they are; otherwise it holds an
    order-preserving dense code of each (pandas.factorize over the exact Python ints). -1 where absent or
    unusable."""
    n = len(values)
    out = np.full(n, -1, dtype=np.int64)
    bad = np.zeros(n, dtype=bool)
    if set(map(type, values)) <= {int, _NONE}:  # the usual case: ints and absent values only
        present = np.fromiter((v is not None for v in values), dtype=bool, count=n)
        try:
            ids = np.array([v for v in values if v is not None], dtype=np.int64)
        except OverflowError:
            pass
        else:
            negative = ids < 0
            if negative.any():
                rows = np.flatnonzero(present)
                bad[rows[negative]] = True
                ids[negative] = -1
            out[present] = ids
            return out, bad
    parsed = [_as_id(v) for v in values]
    bad = np.fromiter((p is _BAD for p in parsed), dtype=bool, count=n)
    present = np.fromiter((p is not None and p is not _BAD for p in parsed), dtype=bool, count=n)
    ids = [p for p in parsed if p is not None and p is not _BAD]
    if not ids:
        return out, bad
    if max(ids) < _INT64_LIMIT:
        out[present] = np.array(ids, dtype=np.int64)
    else:
        codes, _uniques = pd.factorize(np.array(ids, dtype=object), sort=True)
        out[present] = codes
    return out, bad


def _time_column(values: list) -> tuple[np.ndarray, np.ndarray]:
    """ts / dur values -> (float64 with NaN where unusable, unusable mask: missing, not a number, not finite)."""
    floats = _float_column(values)
    bad = ~np.isfinite(floats)
    floats[bad] = np.nan
    return floats, bad


def _thread_text(value: Any) -> str | None:
    """pid / tid as text: an int, an integral float (1.0 -> "1") or a name; None when missing or unusable."""
    t = type(value)
    if t is str:
        return value
    if t is int:
        return str(value)
    if t is float and value.is_integer():
        return str(int(value))
    return None


def _thread_column(values: list) -> tuple[list[str], np.ndarray]:
    """pid / tid column as text, and the mask of values that are missing or unusable (BAD_THREAD there)."""
    n = len(values)
    if set(map(type, values)) <= {int, str}:
        return list(map(str, values)), np.zeros(n, dtype=bool)
    texts = [_thread_text(v) for v in values]
    bad = np.fromiter((t is None for t in texts), dtype=bool, count=n)
    return [BAD_THREAD if t is None else t for t in texts], bad


_get_name, _get_cat, _get_ts, _get_dur, _get_pid, _get_tid = (
    operator.attrgetter(a) for a in ("name", "cat", "ts", "dur", "pid", "tid"))
_get_correlation, _get_external_id, _get_stream, _get_device_type, _get_addr = (
    operator.attrgetter(a) for a in ("correlation", "external_id", "stream", "device_type", "addr"))
_get_input_types, _get_concrete_inputs = operator.attrgetter("input_types"), operator.attrgetter("concrete_inputs")
_get_python_id, _get_python_parent_id = operator.attrgetter("python_id"), operator.attrgetter("python_parent_id")


def _str_column(values: list) -> tuple[np.ndarray, np.ndarray]:
    """Strings as an object array; a number as its text, "" for anything else (null, a list, an object);
    and the mask of values that were not strings."""
    n = len(values)
    bad = np.fromiter((type(v) is not str for v in values), dtype=bool, count=n)
    if not bad.any():
        return np.array(values, dtype=object).reshape(n), bad
    out = np.empty(n, dtype=object)
    out[:] = [v if type(v) is str else str(v) if type(v) in (int, float) else "" for v in values]
    return out, bad


def _kinds(names_: np.ndarray, cats: np.ndarray, nbytes: np.ndarray) -> np.ndarray:
    """The kind column, from the category (case-insensitive), `[memory]` events and module frames."""
    lowered = pd.Series(cats, dtype=object).str.lower()
    kinds = lowered.map(_CAT_TO_KIND).to_numpy(dtype=object)
    unknown = pd.isna(kinds)
    memory = unknown & (names_ == "[memory]")
    kinds[memory] = np.where(nbytes[memory] < 0, "free", "alloc")
    kinds[unknown & ~memory] = "other"
    python = np.flatnonzero(kinds == "python")
    if len(python):
        is_module = pd.Series(names_[python], dtype=object).str.startswith(_MODULE_PREFIX).to_numpy(dtype=bool)
        kinds[python[is_module]] = "module"
    # Kineto before PyTorch 1.10 recorded record_function ranges as cpu_op: the profiler's own step range
    # (names table: profiler-step-range) is a range whatever its category says.
    ops = np.flatnonzero(kinds == "op")
    if len(ops):
        is_step = pd.Series(names_[ops], dtype=object).str.contains(_STEP_RANGE, regex=True).to_numpy(dtype=bool)
        kinds[ops[is_step]] = "annotation"
    return kinds


def build_event_table(raw: RawTrace, path: str | Path) -> EventTable:
    """Raw decoded trace -> EventTable with links, nesting, scopes inputs and allocation dtypes.

    A trace with no events besides metadata raises TraceError. Events whose essential fields are unusable
    are kept, flagged in the `damage` column and left out of what they would make wrong (nesting, links)."""
    events = [e for e in raw.trace_events if e.ph not in _SKIPPED_PHASES and e.cat not in ("ac2g", "flow")]
    if not events:
        others = len(raw.trace_events)
        raise TraceError(path, "holds no trace events" + (
            f" (only {others} metadata or flow event{'s' if others != 1 else ''})" if others else ""))

    args = [e.args if e.args is not None else _NO_ARGS for e in events]
    names_, bad_name = _str_column(list(map(_get_name, events)))
    cats, bad_cat = _str_column(list(map(_get_cat, events)))
    nbytes = _int_column([a.nbytes if a.nbytes is not None else a.memcpy_bytes for a in args], 0)
    ts, bad_ts = _time_column(list(map(_get_ts, events)))
    dur, bad_dur = _time_column(list(map(_get_dur, events)))
    complete = np.array([e.ph for e in events], dtype=object) == "X"
    bad_dur = complete & (bad_dur | (dur < 0))   # an instant has no dur; a complete event must have one
    dur[~(dur >= 0)] = 0.0                        # NaN and negative -> 0: the event is no one's parent
    pid, bad_pid = _thread_column(list(map(_get_pid, events)))
    tid, bad_tid = _thread_column(list(map(_get_tid, events)))
    correlation, bad_corr = _id_column(list(map(_get_correlation, args)))
    external_id, bad_ext = _id_column(list(map(_get_external_id, args)))
    bad_cat &= complete   # instants without a category occur in real traces ("Record Window End")
    damage = np.zeros(len(events), dtype=np.uint16)
    for mask, bit in ((bad_ts, BAD_TS), (bad_dur, BAD_DUR), (bad_pid, BAD_PID), (bad_tid, BAD_TID),
                      (bad_corr, BAD_CORRELATION), (bad_ext, BAD_EXTERNAL_ID), (bad_name, BAD_NAME),
                      (bad_cat, BAD_CAT)):
        damage[mask] |= bit
    frame = pd.DataFrame({
        "kind": _kinds(names_, cats, nbytes),
        "name": names_,
        "cat": cats,
        "ts": ts,
        "dur": dur,
        "pid": pid,
        "tid": tid,
        "correlation": correlation,
        "external_id": external_id,
        "stream": _int_column(list(map(_get_stream, args))),
        "device": _int_column([a.device if a.device is not None else a.device_id for a in args]),
        "device_type": _int_column(list(map(_get_device_type, args))),
        "addr": _int_column(list(map(_get_addr, args)), 0),
        "bytes": nbytes,
        "input_types": list(map(_get_input_types, args)),
        "concrete_inputs": list(map(_get_concrete_inputs, args)),
        "damage": damage,
    })
    frame["end"] = frame["ts"] + frame["dur"]
    frame.index.name = "row"

    _name_columns(frame)
    _link_launches(frame)
    _nest_host_events(frame)
    _check_frame_tree(frame, args)
    _inherit_from_launcher(frame)
    _allocation_dtypes_and_pairs(frame)
    _work_flags(frame)
    _sources(frame)
    frame = frame.drop(columns=["input_types", "concrete_inputs"])
    frame["kind"] = pd.Categorical(frame["kind"], categories=KINDS)

    meta = _meta(raw, path)
    table = EventTable(frame=frame, meta=meta)
    table.derived[OP_ARGS_KEY] = _op_args_raw(frame, args)
    return table


# EventTable.derived key: {op row: (Input Dims, Input type, Concrete Inputs, Input Strides)} as raw JSON bytes,
# for the ops that recorded shapes; decoded only by the checks that follow tensors (kernlint.rules.checks).
OP_ARGS_KEY = "op-args-raw"


def _op_args_raw(frame: pd.DataFrame, args: list) -> dict[int, tuple[bytes, bytes, bytes, bytes]]:
    """Copies (not views: the decoded file is not kept alive) of the shape arguments of every op."""
    out = {}
    for row in np.flatnonzero(frame["kind"].to_numpy() == "op").tolist():
        a = args[row]
        if len(a.input_dims):
            out[row] = (bytes(a.input_dims), bytes(a.input_types), bytes(a.concrete_inputs),
                        bytes(a.input_strides))
    return out


class _NoArgs:
    external_id = correlation = input_types = concrete_inputs = addr = nbytes = device_type = None
    device_id = device = stream = memcpy_bytes = python_id = python_parent_id = None
    input_dims = input_strides = b""


_NO_ARGS = _NoArgs()


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


def _name_columns(frame: pd.DataFrame) -> None:
    kinds = frame["kind"].to_numpy()
    names_ = frame["name"].to_numpy()
    short = names_.copy()
    category = np.full(len(frame), "", dtype=object)
    for i, (k, name) in enumerate(zip(kinds, names_)):
        if k in DEVICE_KINDS:
            short[i] = names.short_kernel_name(name)
            category[i] = names.classify_kernel(name)
        elif k == "runtime":
            category[i] = names.classify_runtime(name)
        elif k == "op":
            category[i] = names.classify_op(name)
    frame["short_name"] = short
    frame["category"] = category


def _link_launches(frame: pd.DataFrame) -> None:
    """Device event -> the runtime/driver call with the same correlation id (exact equality of the ids).

    One call may launch several device events (cudaGraphLaunch replays a whole graph). A device event whose
    id two or more calls share (a damaged trace) is not linked to any of them: it is flagged
    AMBIGUOUS_LINK instead of silently taking the last call."""
    kinds = frame["kind"].to_numpy()
    corr = frame["correlation"].to_numpy()
    call_rows = np.flatnonzero((kinds == "runtime") & (corr >= 0))
    ids, first, counts = np.unique(corr[call_rows], return_index=True, return_counts=True)
    launcher = np.full(len(frame), -1, dtype=np.int64)
    device_rows = np.flatnonzero(np.isin(kinds, list(DEVICE_KINDS)) & (corr >= 0))
    if len(ids) and len(device_rows):
        at = np.minimum(np.searchsorted(ids, corr[device_rows]), len(ids) - 1)
        found = ids[at] == corr[device_rows]
        single = found & (counts[at] == 1)
        launcher[device_rows[single]] = call_rows[first[at[single]]]
        shared = device_rows[found & (counts[at] > 1)]
        if len(shared):
            damage = frame["damage"].to_numpy().copy()
            damage[shared] |= AMBIGUOUS_LINK
            frame["damage"] = damage
    frame["launcher"] = launcher


def _nest_host_events(frame: pd.DataFrame) -> None:
    """Interval nesting per host thread: innermost enclosing op, annotation, module and Python frames."""
    n = len(frame)
    kinds = frame["kind"].to_numpy()
    host = ~np.isin(kinds, list(DEVICE_KINDS | {"gpu_annotation", "other"}))
    # Events whose ts, pid or tid is unusable cannot be placed: no parent, no children, no scope.
    placed = (frame["damage"].to_numpy() & UNPLACED) == 0
    rows = np.flatnonzero(host & placed)
    ts = frame["ts"].to_numpy()
    end = frame["end"].to_numpy()
    dur = frame["dur"].to_numpy()
    thread = (frame["pid"] + ":" + frame["tid"]).to_numpy()
    frame["thread"] = thread
    names_ = frame["name"].to_numpy()
    library = {}
    # Sort by thread, then start, then longest first so that a parent precedes a child with the same start.
    order = rows[np.lexsort((-dur[rows], ts[rows], thread[rows]))]
    # Plain lists: indexing them in the loop is several times faster than indexing numpy arrays.
    ts_l, end_l, dur_l, kind_l, thread_l = ts.tolist(), end.tolist(), dur.tolist(), list(kinds), list(thread)
    op_c, parent_c, top_c, ann_c, mod_c, frame_c, user_c = ([-1] * n for _ in range(7))
    op_s: list = []
    ann_s: list = []
    mod_s: list = []
    py_s: list = []
    user_s: list = []
    all_stacks = (op_s, ann_s, mod_s, py_s, user_s)
    current_thread = None
    for row in order.tolist():
        if thread_l[row] != current_thread:
            current_thread = thread_l[row]
            for stack in all_stacks:
                stack.clear()
        t = ts_l[row]
        for stack in all_stacks:
            while stack and t >= stack[-1][0]:
                stack.pop()
        k = kind_l[row]
        if op_s:
            op_c[row] = parent_c[row] = op_s[-1][1]
            top_c[row] = op_s[0][1]
        elif k == "op":
            top_c[row] = row
        if ann_s:
            ann_c[row] = ann_s[-1][1]
        if mod_s:
            mod_c[row] = mod_s[-1][1]
        if py_s:
            frame_c[row] = py_s[-1][1]
        if user_s:
            user_c[row] = user_s[-1][1]
        if dur_l[row] <= 0:
            continue
        entry = (end_l[row], row)
        if k == "op":
            op_s.append(entry)
        elif k == "python":
            py_s.append(entry)
            name = names_[row]
            is_lib = library.get(name)
            if is_lib is None:
                is_lib = library[name] = names.is_library_frame(name)
            if not is_lib:
                user_s.append(entry)
        elif k == "annotation":
            ann_s.append(entry)
        elif k == "module":
            mod_s.append(entry)
    cols = {"op": op_c, "parent_op": parent_c, "top_op": top_c, "annotation": ann_c, "module": mod_c,
            "frame": frame_c, "user_frame": user_c}
    for c, values in cols.items():
        frame[c] = np.array(values, dtype=np.int64)
    frame["launch_ts"] = frame["ts"]
    is_python = kinds == "python"
    frame["library_frame"] = np.array([bool(library.get(nm, False)) if p else False
                                       for nm, p in zip(names_, is_python)], dtype=bool)


def _check_frame_tree(frame: pd.DataFrame, args: list) -> None:
    """Flag FRAME_OUTSIDE_PARENT on Python frames that disagree with the tree kineto recorded: the frame its
    `Python parent id` names must be a Python frame on the same thread whose interval holds it (within the
    float rounding of `ts + dur`). Real traces always agree; a moved or re-categorised frame does not (a
    parent id that names no frame, or an event that is no longer a frame, is flagged alike)."""
    kinds = frame["kind"].to_numpy()
    frames = np.flatnonzero((kinds == "python") | (kinds == "module"))
    if not len(frames):
        return
    frame_args = [args[i] for i in frames.tolist()]
    both, _ = _id_column(list(map(_get_python_id, frame_args)) + list(map(_get_python_parent_id, frame_args)))
    ids, parents = both[:len(frames)], both[len(frames):]   # one column, so that large ids get one coding
    has_parent = parents >= 0
    if not has_parent.any():
        return
    child = frames[has_parent]
    known = ids >= 0
    order = np.argsort(ids[known], kind="stable")
    sorted_ids, holders = ids[known][order], frames[known][order]
    parent = np.full(len(child), -1, dtype=np.int64)
    if len(sorted_ids):
        at = np.minimum(np.searchsorted(sorted_ids, parents[has_parent]), len(sorted_ids) - 1)
        found = sorted_ids[at] == parents[has_parent]
        parent[found] = holders[at[found]]
    damage = frame["damage"].to_numpy().copy()
    placed = (damage & UNPLACED) == 0
    has = parent >= 0
    p = np.where(has, parent, 0)
    # Counted already: a frame, or the frame it names, with an unusable ts, pid or tid.
    judged = placed[child] & (~has | placed[p])
    ts, end = frame["ts"].to_numpy(), frame["end"].to_numpy()
    thread = frame["thread"].to_numpy()   # set by _nest_host_events
    with np.errstate(invalid="ignore"):
        slack = 1e-3 + 4 * np.spacing(np.maximum(np.abs(end[p]), np.abs(end[child])))
        inside = (ts[p] <= ts[child] + slack) & (end[child] <= end[p] + slack)
    ok = has & (thread[p] == thread[child]) & inside
    damage[child[judged & ~ok]] |= FRAME_OUTSIDE_PARENT
    frame["damage"] = damage


def _inherit_from_launcher(frame: pd.DataFrame) -> None:
    """Device events take their host-side context from the call that launched them."""
    launcher = frame["launcher"].to_numpy()
    dev = np.flatnonzero(launcher >= 0)
    if not len(dev):
        return
    src = launcher[dev]
    src_of = dict(zip(dev.tolist(), src.tolist()))
    for c in ("op", "top_op", "annotation", "module", "frame", "user_frame", "thread"):
        values = frame[c].to_numpy().copy()
        values[dev] = values[src]
        frame[c] = values
    launch_ts = frame["launch_ts"].to_numpy().copy()
    launch_ts[dev] = launch_ts[src]
    frame["launch_ts"] = launch_ts
    # Device events on the same device share a device index: prefer the explicit arg, else the pid.
    device = frame["device"].to_numpy().copy()
    pids = frame["pid"].to_numpy()
    for row in np.flatnonzero(np.isin(frame["kind"].to_numpy(), list(DEVICE_KINDS)) & (device < 0)).tolist():
        device[row] = _int_or(pids[row])
    frame["device"] = device
    # A launch whose op was a dtype-changing copy is a cast; an otherwise unknown kernel launched through
    # the driver (cuLaunchKernel / cuLaunchKernelEx, as Triton does) is a Triton kernel. A call whose device
    # event blocks the host (a device-to-host copy into pageable memory) is a sync, whatever its name.
    cat = frame["category"].to_numpy().copy()
    names_ = frame["name"].to_numpy()
    for row in dev.tolist():
        launcher_row = src_of[row]
        if cat[row] == "other" and names.is_triton_launch(names_[launcher_row]):
            cat[row] = "triton"
        if names.makes_launcher_sync(names_[row]):
            cat[launcher_row] = "sync"
    ops = frame["op"].to_numpy()
    top = frame["top_op"].to_numpy()
    parent = frame["parent_op"].to_numpy()
    for row in dev.tolist():
        if cat[row] != "copy":
            continue
        op = ops[row]
        while op >= 0:
            if names_[op] in names.CASTING_OPS:
                cat[row] = "cast"
                break
            op = parent[op] if op != top[row] else -1
    frame["category"] = cat


def _allocation_dtypes_and_pairs(frame: pd.DataFrame) -> None:
    """dtype of each allocation from its enclosing op; alloc <-> free pairing by device and address."""
    n = len(frame)
    kinds = frame["kind"].to_numpy()
    dtype = np.full(n, "", dtype=object)
    names_ = frame["name"].to_numpy()
    ops = frame["op"].to_numpy()
    parent = frame["parent_op"].to_numpy()
    concrete = frame["concrete_inputs"].to_numpy()
    input_types = frame["input_types"].to_numpy()
    alloc_rows = np.flatnonzero(kinds == "alloc")
    for row in alloc_rows.tolist():
        dtype[row] = _op_output_dtype(ops[row], names_, concrete, input_types, parent) or ""
    # Memory events: device index from Device Id for any accelerator (CUDA 1, HIP 6, XPU 12, MPS 13, MTIA 19,
    # ...), -1 for host memory (Device Type 0). The codes are c10's DeviceType (kernlint.trace.dtypes).
    from kernlint.trace.dtypes import HOST_DEVICE_TYPE_CODES

    device = frame["device"].to_numpy().copy()
    dev_type = frame["device_type"].to_numpy()
    mem = np.flatnonzero((kinds == "alloc") | (kinds == "free"))
    device[mem] = np.where(np.isin(dev_type[mem], list(HOST_DEVICE_TYPE_CODES)), -1, device[mem])
    frame["device"] = device
    paired = np.full(n, -1, dtype=np.int64)
    addr = frame["addr"].to_numpy()
    ts = frame["ts"].to_numpy()
    mem = mem[np.isfinite(ts[mem])]  # an allocation with no usable time cannot be paired
    open_allocs: dict[tuple[int, int], int] = {}
    for row in mem[np.argsort(ts[mem], kind="stable")].tolist():
        key = (int(device[row]), int(addr[row]))
        if kinds[row] == "alloc":
            open_allocs[key] = row
        else:
            a = open_allocs.pop(key, -1)
            if a >= 0:
                paired[a] = row
                paired[row] = a
                dtype[row] = dtype[a]
    frame["dtype"] = dtype
    frame["paired"] = paired


def _op_output_dtype(op: int, names_, concrete, input_types, parent) -> str | None:
    """Best guess of the dtype an op allocates: the dtype argument of a factory op, else its first input's."""
    while op >= 0:
        name = names_[op]
        ci = raw_list(concrete[op])
        pos = _DTYPE_ARG_POSITION.get(name)
        if pos is not None and pos < len(ci):
            found = dtype_from_code(ci[pos])
            if found:
                return found
        types = raw_list(input_types[op])
        if name in _DTYPE_ARG_POSITION or not name.startswith("aten::empty"):
            for t in types:
                found = dtype_from_input_type(t) if isinstance(t, str) else None
                if found:
                    return found
        op = parent[op]
    return None


# Composite ops that only forward to a child: with no child below them they did nothing.
_FORWARDING_OPS = frozenset({"aten::contiguous", "aten::to", "aten::type_as", "aten::_to_copy", "aten::clone",
                             "aten::reshape", "aten::flatten", "aten::repeat_interleave"})


def _work_flags(frame: pd.DataFrame) -> None:
    """Whether an op does work: device work on a GPU, compute on a CPU (not just allocation or views).

    An op in a working category does work; so does any op above a working op. A forwarding op
    (`contiguous`, `to`) with nothing below it was a no-op. Op-level (CPU) checks use this flag.
    """
    kinds = frame["kind"].to_numpy()
    cat = frame["category"].to_numpy()
    names_ = frame["name"].to_numpy()
    parent = frame["parent_op"].to_numpy()
    op_rows = np.flatnonzero(kinds == "op")
    has_child = np.zeros(len(frame), dtype=bool)
    child_parents = parent[op_rows]
    has_child[child_parents[child_parents >= 0]] = True
    work = np.zeros(len(frame), dtype=bool)
    for row in op_rows.tolist():
        if cat[row] in ("alloc", "view") or (not has_child[row] and names_[row] in _FORWARDING_OPS):
            continue
        p = row
        while p >= 0 and not work[p]:
            work[p] = True
            p = parent[p]
    frame["does_work"] = work


def _sources(frame: pd.DataFrame) -> None:
    user = frame["user_frame"].to_numpy()
    names_ = frame["name"].to_numpy()
    cache: dict[int, str] = {}
    source = np.full(len(frame), None, dtype=object)
    for row in np.flatnonzero(user >= 0).tolist():
        f = int(user[row])
        s = cache.get(f)
        if s is None:
            file, line, _func = names.frame_parts(names_[f])
            s = cache[f] = f"{file}:{line}" if file else names_[f]
        source[row] = s
    # An object column: pandas would infer its string dtype and turn the missing sources into NaN.
    frame["source"] = pd.Series(source, index=frame.index, dtype=object)
