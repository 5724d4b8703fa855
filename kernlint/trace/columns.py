"""Raw trace events -> columns, one chunk of events at a time.

Where the C extension kernlint.trace._kineto_chunk is built (kernlint.trace.native_chunk), a chunk of plain
events goes straight from its JSON into the columns; any chunk it does not answer exactly (a value of an
unexpected type, a repeated key, anything unusual) takes the path below, with every damage rule.

The loader decodes the top level of a trace with each event kept as raw JSON (`msgspec.Raw`: a view of the
file's bytes, no Python object per field). This module decodes those events CHUNK_EVENTS at a time into
typed structs and writes each chunk into columns made once for the whole trace, then drops the structs:
the structs of a whole trace (about twice the JSON in memory) never exist at once.

Text columns are held as codes into the distinct values (a kernel name, a category, a thread id is one
Python string however many events carry it). Ids keep the exact-integer rules of kernlint.trace.table:
int64 while every id is a plain non-negative int, else the whole column falls back to exact Python values.
Unusable values are parsed here exactly as the table documents them (NaN / -1 / "?" with a mask), and the
table builder turns the masks into its damage flags.
"""
from __future__ import annotations

import operator
import re
from dataclasses import dataclass
from typing import Any

import msgspec
import numpy as np

from kernlint.errors import TraceError
from kernlint.trace.native_chunk import DecodedChunk, add_chunk_native
from kernlint.trace.schema import NO_RAW, RawEvent

CHUNK_EVENTS = 8192   # events decoded at a time: ~10 MB of structs that are freed before the next chunk
# Phases and categories that are not events of their own (metadata, flow arrows, async pairs).
SKIPPED_PHASES = frozenset({"M", "s", "f", "t", "b", "e", "n"})
SKIPPED_CATS = ("ac2g", "flow")   # a tuple: a damaged category can be a list (unhashable)
_NONE = type(None)
_ABSENT = -(2 ** 63)   # a missing id, inside int64 (real ids are never negative)
_chunk_decoder = msgspec.json.Decoder(list[RawEvent])
_AT_INDEX = re.compile(r"\$\[(\d+)\]")


_ID_FIELDS = ("correlation", "external_id", "python_id", "python_parent_id", "graph_node")
_ID_GETTERS = {f: operator.attrgetter(f) for f in _ID_FIELDS[:-1]}
# A graph node id under either name kineto and CUPTI-based writers use.
_ID_GETTERS["graph_node"] = lambda a: a.graph_node_id if a.graph_node_id is not None else a.graph_node_id_alt


class TextCodes:
    """Distinct strings of a column and each row's code into them, written chunk by chunk into one array
    made up front (per-chunk arrays would leave small survivors pinning the memory of every chunk)."""

    def __init__(self, capacity: int) -> None:
        self._index: dict[str, int] = {}
        self.values: list[str] = []
        self._codes = np.zeros(capacity, dtype=np.int32)
        self.bad = np.zeros(capacity, dtype=bool)   # the value was unusable (its text is a stand-in)

    def grow(self, capacity: int) -> None:
        self._codes, self.bad = _grown(self._codes, capacity), _grown(self.bad, capacity)

    def add(self, at: int, texts: list[str]) -> None:
        index = self._index
        for text in dict.fromkeys(texts):   # the chunk's distinct strings, first seen first
            if text not in index:
                index[text] = len(self.values)
                self.values.append(text)
        self._codes[at:at + len(texts)] = np.fromiter(map(index.__getitem__, texts), dtype=np.int32,
                                                      count=len(texts))

    def add_coded(self, at: int, codes: np.ndarray, uniques: list[str]) -> None:
        """Rows from `at` on, already coded: each row's code into `uniques` (distinct strings)."""
        index = self._index
        local = np.empty(len(uniques), dtype=np.int32)
        for i, text in enumerate(uniques):
            code = index.get(text)
            if code is None:
                code = index[text] = len(self.values)
                self.values.append(text)
            local[i] = code
        np.take(local, codes, out=self._codes[at:at + len(codes)])

    def codes(self, n: int) -> np.ndarray:
        return self._codes[:n]

    def column(self, n: int) -> np.ndarray:
        """One object per row, every row pointing at the one string of its value."""
        values = np.empty(max(len(self.values), 1), dtype=object)
        values[:len(self.values)] = self.values
        return values[self._codes[:n]]


class IdValues:
    """An id column (External id, correlation, Python ids) chunk by chunk: int64 while every value is a
    non-negative int that fits (-1 where absent); the raw values of every row once a chunk holds anything
    else (ids above 2**63, negative or fractional ids, text): kernlint.trace.table judges those exactly."""

    def __init__(self, capacity: int) -> None:
        # Every row below the table's length is written (-1 where absent); np.empty leaves the pages of a
        # capacity larger than the trace untouched (a streamed trace's capacity is an estimate).
        self._array = np.empty(capacity, dtype=np.int64)
        self._raw: list | None = None

    def grow(self, capacity: int) -> None:
        if self._raw is None:
            self._array = _grown(self._array, capacity)

    @property
    def plain(self) -> bool:
        return self._raw is None

    def add(self, at: int, values: list) -> None:
        if self._raw is None and set(map(type, values)) <= {int, _NONE}:
            try:
                if _ABSENT in values:   # the stand-in itself as a value: judged on the raw values
                    raise OverflowError
                arr = np.array([_ABSENT if v is None else v for v in values], dtype=np.int64)
            except OverflowError:
                pass
            else:
                absent = arr == _ABSENT
                if not (arr[~absent] < 0).any():   # a negative id is damage: judged on the raw values
                    arr[absent] = -1
                    self._array[at:at + len(arr)] = arr
                    return
        if self._raw is None:   # back to exact Python values for the rows kept as int64 so far
            self._raw = [None if v == -1 else v for v in self._array[:at].tolist()]
            self._array = np.empty(0, dtype=np.int64)
        # An id written as a list or an object is no id: kept as its JSON text, judged as a text id is (it links
        # to nothing), never hashed as a list (issue 38, item 8: it was an internal error).
        self._raw.extend(msgspec.json.encode(v).decode() if isinstance(v, (list, dict)) else v for v in values)

    def result(self, n: int) -> np.ndarray | list:
        """An int64 array (-1 where absent) when every value was a plain non-negative int, else the raw
        values of every row as a list."""
        return self._array[:n] if self._raw is None else self._raw[:n]


@dataclass
class OpArgsStore:
    """The raw JSON of the shape arguments (Input Dims, Input type, Concrete Inputs, Input Strides) of every
    event that recorded them, in one buffer: `rows` (sorted) and, per row, four (start, stop) offsets."""

    rows: np.ndarray
    offsets: np.ndarray   # [len(rows), 5]: field k of row i is blob[offsets[i, k]:offsets[i, k + 1]]
    blob: bytes

    DIMS, TYPES, CONCRETE, STRIDES = range(4)
    def position(self, row: int) -> int:
        i = int(np.searchsorted(self.rows, row))
        return i if i < len(self.rows) and self.rows[i] == row else -1

    def field(self, position: int, which: int) -> bytes:
        start, stop = self.offsets[position, which], self.offsets[position, which + 1]
        return self.blob[start:stop]

    def fields(self, row: int) -> tuple[bytes, bytes, bytes, bytes] | None:
        i = self.position(row)
        if i < 0:
            return None
        o = self.offsets[i].tolist()
        b = self.blob
        return b[o[0]:o[1]], b[o[1]:o[2]], b[o[2]:o[3]], b[o[3]:o[4]]

    def has_dims(self) -> np.ndarray:
        return self.offsets[:, 1] > self.offsets[:, 0]


class RawColumns:
    """Every kept event of a trace as columns (rows in file order, metadata and flow events left out), in
    arrays made once for the number of raw events. Values are parsed as kernlint.trace.table documents:
    unusable ones are NaN / -1 / "?" with a mask saying so."""

    INT_FIELDS = ("bytes", "device", "stream", "device_type", "addr")

    def __init__(self, capacity: int) -> None:
        self.n = 0
        self.others = 0    # metadata and flow events left out
        self.complete = np.zeros(capacity, dtype=bool)   # ph == "X"
        # Text: not a string -> its number's text or "" (bad); pid / tid: "?" where unusable (bad).
        self.name, self.cat, self.pid, self.tid = (TextCodes(capacity) for _ in range(4))
        self.launch_kernel = TextCodes(capacity)   # "" where the event names no kernel
        self.ts, self.dur = np.empty(capacity), np.empty(capacity)
        self.bad_ts, self.bad_dur = np.zeros(capacity, dtype=bool), np.zeros(capacity, dtype=bool)
        self.ints = {f: np.empty(capacity, dtype=np.int64) for f in self.INT_FIELDS}
        self.ids = {f: IdValues(capacity) for f in _ID_FIELDS}
        self.op_args: OpArgsStore | None = None
        self.capacity = capacity

    def reserve(self, rows: int) -> None:
        """Room for `rows` more rows after `n`: every column grows by half at least (a streamed trace's
        event count is not known up front)."""
        if self.n + rows <= self.capacity:
            return
        capacity = max(self.n + rows, self.capacity + self.capacity // 2)
        for name in ("complete", "ts", "dur", "bad_ts", "bad_dur"):
            setattr(self, name, _grown(getattr(self, name), capacity))
        for codes in (self.name, self.cat, self.pid, self.tid, self.launch_kernel):
            codes.grow(capacity)
        self.ints = {f: _grown(a, capacity) for f, a in self.ints.items()}
        for ids in self.ids.values():
            ids.grow(capacity)
        self.capacity = capacity

    def text(self, which: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[str]]:
        """(column of shared strings, unusable mask, codes, distinct strings)."""
        codes: TextCodes = getattr(self, which)
        return codes.column(self.n), codes.bad[:self.n], codes.codes(self.n), codes.values

    def text_codes(self, which: str) -> tuple[np.ndarray, np.ndarray, list[str]]:
        """(unusable mask, codes, distinct strings): the column without its one object per row."""
        codes: TextCodes = getattr(self, which)
        return codes.bad[:self.n], codes.codes(self.n), codes.values

    def floats(self, which: str) -> tuple[np.ndarray, np.ndarray]:
        return getattr(self, which)[:self.n], getattr(self, "bad_" + which)[:self.n]

    def int_column(self, which: str) -> np.ndarray:
        return self.ints[which][:self.n]

    def id_values(self, which: str) -> np.ndarray | list:
        return self.ids[which].result(self.n)

    def id_column(self, which: str) -> tuple[np.ndarray, np.ndarray]:
        """(int64 ids, -1 where absent or unusable; the unusable mask), exact as _id_column makes them."""
        values = self.id_values(which)
        if isinstance(values, np.ndarray):
            return values, np.zeros(len(values), dtype=bool)
        return _id_column(values)


def _grown(values: np.ndarray, capacity: int) -> np.ndarray:
    """`values` at the start of a zeroed array of `capacity` rows (pages past the copy stay untouched)."""
    out = np.zeros(capacity, dtype=values.dtype)
    out[:len(values)] = values
    return out


_get_name, _get_cat, _get_ts, _get_dur, _get_pid, _get_tid, _get_args, _get_ph = (
    operator.attrgetter(f) for f in ("name", "cat", "ts", "dur", "pid", "tid", "args", "ph"))
_get_launch_kernel = operator.attrgetter("launch_kernel")


def decode_events(raw_events: list, path, events_at: str = "$.traceEvents") -> RawColumns:
    """Decode `raw_events` (msgspec.Raw, one per event) chunk by chunk into RawColumns. `events_at` says
    where the events are in the file, for error messages."""
    assembly = ColumnAssembly(len(raw_events))
    assembly.add_events(raw_events, path, events_at)
    return assembly.result()


class ColumnAssembly:
    """RawColumns filled chunk after chunk (`add` after each chunk is decoded into `out`), with the chunks'
    shape arguments gathered into one OpArgsStore at the end."""

    def __init__(self, capacity: int) -> None:
        self.out = RawColumns(capacity)
        self._arg_rows: list[np.ndarray] = []
        self._arg_lengths: list[np.ndarray] = []
        self._blobs: list[bytes] = []

    def add_events(self, raw_events: list, path, events_at: str = "$.traceEvents", first: int = 0) -> None:
        """`raw_events` (msgspec.Raw or bytes, one per event; the first is event `first` of the trace) chunk
        by chunk into `out`: by the native reader (kernlint.trace.native_chunk) where it is built and the
        chunk is plain, exact where it answers; else through msgspec and _add_chunk, with every damage rule."""
        for start, joined, count in joined_chunks(raw_events):
            self.out.reserve(count)
            chunk = add_chunk_native(self.out, joined, count)
            if chunk is None:
                chunk = python_chunk(self.out, joined, count, path, events_at, first + start)
            del joined
            self.add(chunk)

    def add(self, chunk: DecodedChunk) -> None:
        if chunk.arg_rows is not None:
            self._arg_rows.append(chunk.arg_rows)
            self._arg_lengths.append(chunk.arg_lengths)
            self._blobs.append(chunk.arg_blob)
        self.out.n += chunk.kept

    def result(self) -> RawColumns:
        out = self.out
        if self._arg_rows:
            lengths = np.concatenate(self._arg_lengths)
            offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
            np.cumsum(lengths, out=offsets[1:])
            table = np.empty((len(lengths) // 4, 5), dtype=np.int64)
            table[:, :4] = offsets[:-1].reshape(-1, 4)
            table[:, 4] = offsets[4::4]
            blob = b"".join(self._blobs)
            self._blobs.clear()
            out.op_args = OpArgsStore(rows=np.concatenate(self._arg_rows), offsets=table, blob=blob)
        return out


def joined_chunks(raw_events: list):
    """(index of the chunk's first event, its events as one JSON array, their number), CHUNK_EVENTS events at
    a time."""
    for start in range(0, len(raw_events), CHUNK_EVENTS):
        part = raw_events[start:start + CHUNK_EVENTS]
        # "[e0,e1,...]" in one copy: the brackets go onto the first and last event (small copies).
        part[0] = b"[" + part[0]
        part[-1] = bytes(part[-1]) + b"]"
        yield start, b",".join(part), len(part)


def python_chunk(out: RawColumns, joined: bytes, count: int, path="<chunk>", events_at: str = "$.traceEvents",
                 first: int = 0) -> DecodedChunk:
    """One chunk (`joined`: the JSON array of `count` events, the first of them event `first` of the trace)
    through msgspec and _add_chunk, into `out` from row `out.n` on; `out.n` is left to the caller."""
    try:
        events = _chunk_decoder.decode(joined)
    except msgspec.ValidationError as exc:
        message = _AT_INDEX.sub(lambda m: f"{events_at}[{first + int(m.group(1))}]", str(exc))
        raise TraceError(path, f"unexpected trace schema: {message}") from None
    except msgspec.DecodeError as exc:   # the top level was valid JSON: an event cannot be invalid
        raise TraceError(path, f"not valid JSON: {exc}") from None
    events = [e for e in events if e.ph not in SKIPPED_PHASES and e.cat not in SKIPPED_CATS]
    out.others += count - len(events)
    if not events:
        return DecodedChunk(0)
    _add_chunk(out, events)
    # Shape arguments: four raw JSON texts per event that has any.
    args = list(map(_get_args, events))
    local = [i for i, a in enumerate(args) if a is not None and (
        a.input_dims is not NO_RAW or a.input_types is not NO_RAW or a.concrete_inputs is not NO_RAW
        or a.input_strides is not NO_RAW or a.input_dims_2021 is not NO_RAW)]
    if not local:
        return DecodedChunk(len(events))
    pieces = []
    for i in local:
        a = args[i]
        dims = a.input_dims if a.input_dims is not NO_RAW else a.input_dims_2021
        pieces += (dims, a.input_types, a.concrete_inputs, a.input_strides)
    return DecodedChunk(len(events), np.array(local, dtype=np.int64) + out.n,
                        np.fromiter(map(len, pieces), dtype=np.int64, count=len(pieces)), b"".join(pieces))


def _add_chunk(out: RawColumns, events: list) -> None:
    at, stop = out.n, out.n + len(events)
    out.complete[at:stop] = [p == "X" for p in map(_get_ph, events)]
    for column, getter in ((out.name, _get_name), (out.cat, _get_cat)):
        texts, bad = _str_column(list(map(getter, events)))
        column.add(at, texts.tolist())
        column.bad[at:stop] = bad
    for column, getter in ((out.pid, _get_pid), (out.tid, _get_tid)):
        _add_thread_chunk(column, at, list(map(getter, events)))
    out.ts[at:stop], out.bad_ts[at:stop] = _time_column(list(map(_get_ts, events)))
    out.dur[at:stop], out.bad_dur[at:stop] = _time_column(list(map(_get_dur, events)))
    present = [a if a is not None else _NO_ARGS for a in map(_get_args, events)]
    ints = out.ints
    ints["bytes"][at:stop] = _int_column([a.nbytes if a.nbytes is not None else a.memcpy_bytes for a in present], 0)
    ints["device"][at:stop] = _int_column([a.device if a.device is not None else a.device_id for a in present])
    ints["stream"][at:stop] = _int_column([a.stream for a in present])
    ints["device_type"][at:stop] = _int_column([a.device_type for a in present])
    ints["addr"][at:stop] = _int_column([a.addr for a in present], 0)
    for f in _ID_FIELDS:
        out.ids[f].add(at, list(map(_ID_GETTERS[f], present)))
    out.launch_kernel.add(at, [k if isinstance(k, str) else "" for k in map(_get_launch_kernel, present)])


def _add_thread_chunk(column: TextCodes, at: int, values: list) -> None:
    if set(map(type, values)) == {int}:   # the usual case: the text of each distinct id only
        distinct = {v: i for i, v in enumerate(dict.fromkeys(values))}
        local = np.fromiter(map(distinct.__getitem__, values), dtype=np.int64, count=len(values))
        column.add_coded(at, local, [str(u) for u in distinct])
        return
    texts, bad = _thread_column(values)
    column.add(at, texts)
    column.bad[at:at + len(values)] = bad


# -- raw values -> typed values (kineto writes numbers as numbers; damaged traces write anything) ---------------

BAD_THREAD = "?"   # the pid / tid text of an event whose pid / tid is unusable
_INT64_LIMIT = 2 ** 63


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
    types = set(map(type, values))
    if types <= {int, _NONE}:
        try:
            return np.array([default if v is None else v for v in values] if _NONE in types else values,
                            dtype=np.int64)
        except OverflowError:
            pass
    floats = _float_column(values)
    ok = np.isfinite(floats) & (np.abs(floats) < _INT64_LIMIT)
    out = np.full(n, default, dtype=np.int64)
    out[ok] = floats[ok].astype(np.int64)
    return out


_BAD = object()
_ABSENT_ID = -(2 ** 63)   # stands for a missing id inside int64 (a real id is never negative)


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
    order-preserving dense code of each (its rank among the distinct exact Python ints). -1 where absent or
    unusable."""
    n = len(values)
    out = np.full(n, -1, dtype=np.int64)
    bad = np.zeros(n, dtype=bool)
    if set(map(type, values)) <= {int, _NONE} and _ABSENT_ID not in values:  # the usual case: ints, absent
        try:
            ids = np.array([_ABSENT_ID if v is None else v for v in values], dtype=np.int64)
        except OverflowError:
            pass
        else:
            absent = ids == _ABSENT_ID
            negative = (ids < 0) & ~absent
            bad[negative] = True
            ids[negative | absent] = -1
            return ids, bad
    parsed = [_as_id(v) for v in values]
    bad = np.fromiter((p is _BAD for p in parsed), dtype=bool, count=n)
    present = np.fromiter((p is not None and p is not _BAD for p in parsed), dtype=bool, count=n)
    ids = [p for p in parsed if p is not None and p is not _BAD]
    if not ids:
        return out, bad
    if max(ids) < _INT64_LIMIT:
        out[present] = np.array(ids, dtype=np.int64)
    else:
        rank = {v: i for i, v in enumerate(sorted(set(ids)))}
        out[present] = np.fromiter(map(rank.__getitem__, ids), dtype=np.int64, count=len(ids))
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



def _str_column(values: list) -> tuple[np.ndarray, np.ndarray]:
    """Strings as an object array; a number as its text, "" for anything else (null, a list, an object);
    and the mask of values that were not strings."""
    n = len(values)
    if set(map(type, values)) == {str}:
        out = np.empty(n, dtype=object)
        out[:] = values
        return out, np.zeros(n, dtype=bool)
    bad = np.fromiter((type(v) is not str for v in values), dtype=bool, count=n)
    out = np.empty(n, dtype=object)
    out[:] = [v if type(v) is str else str(v) if type(v) in (int, float) else "" for v in values]
    return out, bad



class _NoArgs:   # an event without args: RawArgs' defaults
    external_id = correlation = nbytes = device = python_id = python_parent_id = launch_kernel = None
    graph_node_id = graph_node_id_alt = None
    addr = memcpy_bytes = 0
    device_type = device_id = stream = -1
    input_dims = input_dims_2021 = input_types = concrete_inputs = input_strides = NO_RAW


_NO_ARGS: Any = _NoArgs()
