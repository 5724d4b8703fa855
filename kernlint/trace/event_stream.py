"""A large trace read as a stream: its events decoded into columns while the file is still being read.

The whole JSON of a large trace is never held: the loader hands the decompressed bytes over a block at a
time (`EventStream` is its sink), the C extension decodes the event array in place, CHUNK_EVENTS events at a
time from a window of the bytes that have not been decoded yet, and the window moves on. What lies around the
event array (the head with deviceProperties, the tail with traceName) is kept and decoded by msgspec at the
end, with the events' place taken by an empty list. Memory is the columns plus a window of a few MB, not the
JSON plus the columns; and no Python object is made per event (no msgspec.Raw list, no joined chunks).

It reads the plain case only and says so with StreamFallback otherwise; the loader then reads the file whole,
as before, with every rule and error message of that path. StreamFallback covers: no C extension, a trace
small enough to be read whole (its bytes come back instead), not a JSON object, no `"traceEvents": [` in the
first window, the key "traceEvents" (escaped or not) written more than once anywhere, invalid or cut-short
JSON, an event larger than the window may grow to, a head or tail that does not decode. A chunk the extension does not
answer exactly (a damaged value) is decoded by the Python path (kernlint.trace.columns.python_chunk), with
the same chunk boundaries as the whole-file path: the columns are the same whichever way a trace is read.
"""
from __future__ import annotations

import re
from pathlib import Path

import msgspec

from kernlint.errors import TraceError
from kernlint.trace.columns import CHUNK_EVENTS, ColumnAssembly, RawColumns, python_chunk
from kernlint.trace.native_chunk import add_decoded, native_module
from kernlint.trace.schema import JSON_TOKEN, RawTrace, count_events_keys, trace_decoder

# A trace whose JSON ends within this many bytes is read whole (its bytes are held anyway; and the whole-file
# path then searches it for any repeated key: kernlint.trace.load.REPEATED_KEY_SEARCH_BYTES).
STREAM_FROM_BYTES = 4 << 20
AHEAD_BYTES = 4 << 20          # undecoded bytes at hand before a chunk is decoded (unless the file ended)
MAX_WINDOW_BYTES = 256 << 20   # a chunk that does not fit this: the whole-file path (bounded as a gzip bomb)
COMPACT_BYTES = 8 << 20        # decoded bytes dropped from the window's front once this many
BYTES_PER_EVENT = 160          # row capacity first made: the JSON's size over this (kineto writes 250-600)

_EVENTS_KEY = b'"traceEvents"'
_EVENTS_KEY_SPAN = 2 + 6 * len("traceEvents")   # the longest way to write it: every letter a \u00XX escape
_WHITE = re.compile(rb"[ \t\r\n]*")


class StreamFallback(Exception):
    """This trace cannot be streamed: the loader reads it whole."""


class EventStream:
    """The sink for a trace's decompressed bytes (call it with each block), then `finish()`."""

    def __init__(self, path: Path, json_size_estimate: int, stream_from: int | None = None) -> None:
        module = native_module()
        if module is None or not hasattr(module, "decode_events_at"):
            raise StreamFallback
        self._module = module
        self._path = path
        self._stream_from = STREAM_FROM_BYTES if stream_from is None else stream_from
        self._capacity = max(json_size_estimate // BYTES_PER_EVENT, CHUNK_EVENTS)
        self._buf = bytearray()
        self._pos = 0                 # the window's next undecoded byte
        self._streaming = False       # past stream_from bytes: the head is found, events are being decoded
        self._done = False            # the event array closed: what follows is the tail
        self._first = True            # the next element is the array's first
        self._events = 0              # raw events decoded so far (metadata included)
        self._ahead = AHEAD_BYTES
        self._head = b""
        self._tail: list[bytes] = []
        self._keys = 0                # "traceEvents" strings met
        self._carry = b""             # the last bytes of the previous block (a key split between blocks)
        self._assembly: ColumnAssembly | None = None
        self._read = 0

    @property
    def json_bytes(self) -> int:
        """The bytes of JSON read so far."""
        return self._read

    @property
    def streaming(self) -> bool:
        """Past the bytes read whole: the events are being decoded (else `whole` holds the trace)."""
        return self._streaming

    @property
    def whole(self) -> bytearray:
        """The trace's bytes when it ended before streaming began (`finish()` returned None)."""
        return self._buf

    def __call__(self, block: bytes) -> None:
        self._read += len(block)
        if self._done:
            self._count_keys(block)
            self._tail.append(block)
            return
        self._buf += block
        if not self._streaming:
            if len(self._buf) <= self._stream_from:
                return
            self._begin()
            self._keys = count_events_keys(self._buf)
            self._carry = bytes(self._buf[-(_EVENTS_KEY_SPAN - 1):])
            if self._keys > 1:
                raise StreamFallback
        else:
            self._count_keys(block)
        self._decode(eof=False)

    def finish(self, extra_events: list[bytes] = ()) -> tuple[RawTrace, RawColumns]:
        """The trace's top level (its events left out) and the columns of its events, then `extra_events`
        (raw JSON, one per event: merged capture windows). Only once `streaming`."""
        self._decode(eof=True)
        if not self._done:
            raise StreamFallback   # cut short: the whole-file path says where
        try:
            raw = trace_decoder.decode(self._head + b"[]" + b"".join(self._tail))
        except (msgspec.ValidationError, msgspec.DecodeError):
            raise StreamFallback from None
        self._tail.clear()
        self._assembly.add_events(list(extra_events), self._path, "$.traceEvents", self._events)
        return raw, self._assembly.result()

    def _count_keys(self, block: bytes) -> None:
        window = self._carry + block   # a key split between two blocks is whole here
        self._keys += count_events_keys(window) - count_events_keys(self._carry)
        self._carry = window[-(_EVENTS_KEY_SPAN - 1):]
        if self._keys > 1:   # a second traceEvents key somewhere: the whole-file path judges it
            raise StreamFallback

    def _begin(self) -> None:
        """Find `"traceEvents": [` among the keys of the top-level object, in the bytes at hand."""
        buf = self._buf
        at = _WHITE.match(buf).end()
        if buf[at:at + 1] != b"{":
            raise StreamFallback   # the array form, a byte-order mark, not JSON: the whole-file path
        depth = 0
        last_string = None
        for m in JSON_TOKEN.finditer(buf, at):
            tok = m.group()
            if tok in (b"{", b"["):
                depth += 1
            elif tok in (b"}", b"]"):
                depth -= 1
                if depth == 0:
                    break
            elif tok == b":" and depth == 1 and last_string == _EVENTS_KEY:
                j = _WHITE.match(buf, m.end()).end()
                if buf[j:j + 1] != b"[":
                    break
                self._head = bytes(buf[:j])
                self._pos = j + 1
                self._streaming = True
                self._assembly = ColumnAssembly(self._capacity)
                return
            last_string = tok if tok[:1] == b'"' else None
        raise StreamFallback

    def _decode(self, eof: bool) -> None:
        module, buf, assembly = self._module, self._buf, self._assembly
        out = assembly.out
        while not self._done:
            pos = self._pos
            if not eof and len(buf) - pos < self._ahead:
                break
            out.reserve(CHUNK_EVENTS)
            got = module.decode_events_at(buf, pos, CHUNK_EVENTS, self._first)
            if got is not None:
                status, after, columns = got
                chunk = add_decoded(out, columns)
                count = columns[0] + columns[1]
            else:   # a damaged value, or the chunk runs past the bytes at hand
                skipped = module.skip_events(buf, pos, CHUNK_EVENTS, self._first)
                if skipped is None:
                    if eof or len(buf) - pos >= MAX_WINDOW_BYTES:
                        raise StreamFallback
                    self._ahead = 2 * (len(buf) - pos)
                    break
                status, after, count, stop = skipped
                try:
                    chunk = python_chunk(out, b"[" + bytes(buf[pos:stop]) + b"]", count, self._path,
                                         "$.traceEvents", self._events)
                except TraceError:
                    raise StreamFallback from None
            assembly.add(chunk)
            self._events += count
            self._first = False
            self._pos = after
            self._ahead = max(AHEAD_BYTES, (after - pos) * 3 // 2)
            if status == 1:
                self._done = True
                self._tail.append(bytes(buf[after:]))
                buf.clear()
                self._pos = 0
                return
        if self._pos >= COMPACT_BYTES:
            del buf[:self._pos]
            self._pos = 0
