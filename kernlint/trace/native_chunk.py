"""The native columnar reader's glue: one chunk of events (the joined JSON array kernlint.trace.columns makes)
decoded by the C extension kernlint.trace._kineto_chunk straight into the RawColumns that `_add_chunk`
writes.

The extension answers only the plain case (every field of the type kineto writes, no repeated or escaped
key, numbers that fit) and is exact where it answers; anything else is None here, and the caller decodes that
chunk with the Python path, which keeps every damage rule. The extension is optional (a wheel built without a
C compiler has none): without it every call is None.

KERNLINT_NATIVE=0 in the environment (read once, at the first use) makes kernlint ignore a built extension:
every trace is then read whole and decoded by the Python path, as where none is built (the CI leg that runs
the trace tests without it, `make test-no-native`).
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from kernlint.trace.columns import IdValues, RawColumns

# The extension's column order (kernlint/trace/_kineto_chunk.c, decode_chunk).
INT_FIELDS = ("bytes", "device", "stream", "device_type", "addr")
ID_FIELDS = ("correlation", "external_id", "python_id", "python_parent_id", "graph_node")
TEXT_FIELDS = ("name", "cat", "pid", "tid", "launch_kernel")
_BAD_TEXT = ("name", "cat", "pid", "tid")   # u8 rows 3..6; rows 0..2: complete, bad ts, bad dur

_module = None
_tried = False
# The values of KERNLINT_NATIVE that switch the extension off (anything else, or unset: used where built).
SWITCHED_OFF = frozenset({"0", "off", "no", "false"})


def native_module():
    """The extension module, or None where it was not built or KERNLINT_NATIVE=0 switches it off (imported on
    first use)."""
    global _module, _tried
    if not _tried:
        _tried = True
        if os.environ.get("KERNLINT_NATIVE", "").strip().lower() in SWITCHED_OFF:
            _kineto_chunk = None
        else:
            try:
                from kernlint.trace import _kineto_chunk
            except ImportError:
                _kineto_chunk = None
        _module = _kineto_chunk
    return _module


@dataclass
class DecodedChunk:
    """What decode_events keeps of a chunk besides the columns: the number of kept events, and the shape
    arguments of those that have any, as `decode_events` collects them (rows already offset to the trace)."""

    kept: int
    arg_rows: np.ndarray | None = None      # int64 rows (trace-wide) of the events with shape arguments
    arg_lengths: np.ndarray | None = None   # int64 lengths, 4 per row (Input Dims, type, Concrete, Strides)
    arg_blob: bytes = b""                   # the raw JSON of those fields, concatenated


def add_chunk_native(out: RawColumns, joined: bytes | bytearray, count: int | None = None) -> DecodedChunk | None:
    """Decode one chunk (`joined`: the JSON array of `count` events) into `out` from row `out.n` on, as
    `_add_chunk` would, and add its left-out events to `out.others`. None where the extension is not built or
    does not answer for this chunk: `out` is then untouched. `out.n` is left to the caller."""
    module = native_module()
    if module is None:
        return None
    got = module.decode_chunk(joined)
    if got is None:
        return None
    if count is not None and got[0] + got[1] != count:   # never expected: one raw event is one JSON value
        return None
    return add_decoded(out, got)


def add_decoded(out: RawColumns, got: tuple) -> DecodedChunk:
    """The extension's columns of one chunk (decode_chunk's or decode_events_at's tuple) into `out` from row
    `out.n` on; `out.n` is left to the caller."""
    kept, others, i64, f64, i32, u8, uniques, arg_rows, arg_lengths, blob = got
    out.others += others
    if not kept:
        return DecodedChunk(0)
    at, stop = out.n, out.n + kept
    ints = np.frombuffer(i64, dtype=np.int64).reshape(10, kept)
    times = np.frombuffer(f64, dtype=np.float64).reshape(2, kept)
    codes = np.frombuffer(i32, dtype=np.int32).reshape(5, kept)
    flags = np.frombuffer(u8, dtype=np.bool_).reshape(7, kept)
    out.complete[at:stop] = flags[0]
    out.ts[at:stop], out.dur[at:stop] = times
    out.bad_ts[at:stop], out.bad_dur[at:stop] = flags[1], flags[2]
    for k, which in enumerate(TEXT_FIELDS):
        getattr(out, which).add_coded(at, codes[k], uniques[k])
    for k, which in enumerate(_BAD_TEXT):
        getattr(out, which).bad[at:stop] = flags[3 + k]
    for k, which in enumerate(INT_FIELDS):
        out.ints[which][at:stop] = ints[k]
    for k, which in enumerate(ID_FIELDS):
        add_ids(out.ids[which], at, ints[5 + k])
    if not arg_rows:
        return DecodedChunk(kept)
    rows = np.frombuffer(arg_rows, dtype=np.int64) + at
    return DecodedChunk(kept, rows, np.frombuffer(arg_lengths, dtype=np.int64), blob)


def add_ids(ids: IdValues, at: int, values: np.ndarray) -> None:
    """Non-negative int64 ids (-1 where absent) into an id column from row `at`: written straight into its
    array while it is plain, else as the raw values IdValues.add would have been given (None where absent)."""
    if ids.plain:
        ids._array[at:at + len(values)] = values
    else:
        ids.add(at, [None if v < 0 else v for v in values.tolist()])


def nest_walk_native(part: np.ndarray, ts: np.ndarray, end: np.ndarray, dur: np.ndarray, flags: list,
                     outs: list, top: np.ndarray, op_kind: int) -> bool:
    """kernlint.trace.nesting's walk of one thread in C, written into `outs` and `top` in place (see
    the extension's nest_walk); False, with nothing written, where the extension is not built."""
    module = native_module()
    if module is None or not hasattr(module, "nest_walk"):
        return False
    module.nest_walk(np.ascontiguousarray(part, dtype=np.int64), np.ascontiguousarray(ts, dtype=np.float64),
                     np.ascontiguousarray(end, dtype=np.float64), np.ascontiguousarray(dur, dtype=np.float64),
                     tuple(np.ascontiguousarray(f, dtype=np.bool_) for f in flags), tuple(outs), top, op_kind)
    return True
