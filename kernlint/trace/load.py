"""Finding and reading trace files: Chrome-trace JSON from torch.profiler, plain or gzipped.

Accepted paths: a trace file (`.json`, `.json.gz`, any name: gzip is detected by its magic bytes), or a
folder in the TensorBoard profiler layout (`DIR/<run>/<worker>.<ts>.pt.trace.json[.gz]`, searched
recursively). Every problem raises TraceError naming the file.
"""
from __future__ import annotations

import gzip
import re
import zlib
from pathlib import Path
from typing import Iterable

import msgspec

from kernlint.errors import TraceError
from kernlint.trace.schema import RawEvent, RawTrace
from kernlint.trace.scopes import add_scope_column
from kernlint.trace.table import EventTable, build_event_table

TRACE_SUFFIXES = (".pt.trace.json", ".pt.trace.json.gz")
_GZIP_MAGIC = b"\x1f\x8b"

_BARE_NA = re.compile(rb'(?<!")N/A(?!")')
_trace_decoder = msgspec.json.Decoder(RawTrace)
_array_decoder = msgspec.json.Decoder(list[RawEvent])


def find_trace_files(paths: Iterable[str | Path]) -> list[Path]:
    """Expand files and TensorBoard log folders into a sorted, de-duplicated list of trace files."""
    found: list[Path] = []
    for p in paths:
        path = Path(p)
        if path.is_dir():
            inside = sorted(f for f in path.rglob("*") if f.is_file() and f.name.endswith(TRACE_SUFFIXES))
            if not inside:
                raise TraceError(path, "folder holds no torch.profiler traces (*.pt.trace.json or *.pt.trace.json.gz)")
            found.extend(inside)
        elif path.is_file():
            found.append(path)
        elif path.exists():
            raise TraceError(path, "not a regular file or folder")
        else:
            raise TraceError(path, "no such file or folder")
    seen: set[Path] = set()
    unique = []
    for f in found:
        key = f.resolve()
        if key not in seen:
            seen.add(key)
            unique.append(f)
    return unique


def read_trace_bytes(path: Path) -> bytes:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise TraceError(path, f"cannot read: {exc.strerror or exc}") from None
    if data[:2] == _GZIP_MAGIC:
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as exc:
            raise TraceError(path, f"not a valid gzip file ({exc})") from None
    elif path.name.endswith(".gz"):
        raise TraceError(path, "named .gz but is not gzip-compressed")
    if not data.strip():
        raise TraceError(path, "file is empty")
    return data


def decode_trace(data: bytes, path: Path) -> RawTrace:
    try:
        return _trace_decoder.decode(data)
    except msgspec.ValidationError as exc:
        message = str(exc)
        if message.startswith("Expected `object`, got `array`"):
            try:  # the Chrome "JSON array" form: a bare list of events
                return RawTrace(trace_events=_array_decoder.decode(data))
            except msgspec.ValidationError as inner:
                raise TraceError(path, f"unexpected trace schema: {inner}") from None
        if "missing required field `traceEvents`" in message:
            raise TraceError(path, "not a torch.profiler trace: no traceEvents list") from None
        raise TraceError(path, f"unexpected trace schema: {message}") from None
    except msgspec.DecodeError as exc:
        if b"N/A" in data:  # some kineto versions wrote a bare N/A value; quote it and try once more
            repaired = _BARE_NA.sub(b'"N/A"', data)
            if repaired != data:
                return decode_trace(repaired, path)
        raise TraceError(path, f"not valid JSON: {exc}") from None


def load_trace(path: str | Path) -> EventTable:
    """Read one trace file into an EventTable."""
    path = Path(path)
    raw = decode_trace(read_trace_bytes(path), path)
    table = build_event_table(raw, path)
    add_scope_column(table)
    return table
