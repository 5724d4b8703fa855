"""Finding and reading trace files: Chrome-trace JSON from torch.profiler, plain or gzipped.

Accepted paths: a trace file (any name: gzip is detected by its magic bytes), or a folder, searched
recursively, in which every `.json` / `.json.gz` file whose head is a kineto trace is taken, whatever its
name (`rank-0.json.gz`, `worker0.<ms>.pt.trace.json`, `train.json`...). `discover_traces` also says which
entries it passed over and why. Every problem with a trace raises TraceError naming the file.
"""
from __future__ import annotations

import errno
import gzip
import os
import re
import stat
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

import msgspec

from kernlint.errors import TraceError
from kernlint.trace.schema import RawEvent, RawTrace
from kernlint.trace.scopes import add_scope_column
from kernlint.trace.table import EventTable, build_event_table

TRACE_SUFFIXES = (".pt.trace.json", ".pt.trace.json.gz")
JSON_SUFFIXES = (".json", ".json.gz")   # a folder's files with these suffixes are sniffed for a trace head
SNIFF_BYTES = 64 * 1024                 # how much of a file's (decompressed) head the sniffer reads
_GZIP_MAGIC = b"\x1f\x8b"

_BARE_NA = re.compile(rb'(?<!")N/A(?!")')
_trace_decoder = msgspec.json.Decoder(RawTrace)
_array_decoder = msgspec.json.Decoder(list[RawEvent])


@dataclass(frozen=True)
class SkippedEntry:
    """A file or folder met while searching a folder that is not taken as a trace, and why (one line)."""

    path: Path
    reason: str


@dataclass
class Discovery:
    """What `discover_traces` found: the trace files, the entries it passed over with the reason, and how
    many files it ignored for their suffix (not .json / .json.gz)."""

    files: list[Path] = field(default_factory=list)
    skipped: list[SkippedEntry] = field(default_factory=list)
    ignored_count: int = 0


def find_trace_files(paths: Iterable[str | Path]) -> list[Path]:
    """The trace files `discover_traces` finds (kept for callers that need only the list)."""
    return discover_traces(paths).files


def discover_traces(paths: Iterable[str | Path]) -> Discovery:
    """Expand files and folders into trace files, telling a kineto trace by its content, not its name.

    A named file is taken as it is (decoding says later what is wrong with it). A folder is searched
    recursively, following links to folders once each; every `.json` / `.json.gz` file in it (gzip told by
    its magic bytes) whose head holds a kineto trace is taken: a JSON object with a top-level `traceEvents`,
    `schemaVersion` or `deviceProperties` key, or a JSON array of events. Only the first SNIFF_BYTES of a
    file (decompressed) are read. Other JSON files, and entries that cannot be read (no permission, a
    dangling link, a link loop, a FIFO or other special file, a folder that cannot be listed), are listed in
    `skipped` with the reason; files with other suffixes are counted in `ignored_count`. A folder without a
    trace raises TraceError. Files keep the order of the arguments, a folder's files sorted by path;
    duplicates (same resolved path) are dropped.
    """
    found = Discovery()
    for p in paths:
        path = Path(p)
        try:
            st = path.stat()
        except OSError as exc:
            if path.is_symlink():
                raise TraceError(path, _link_problem(exc)) from None
            if isinstance(exc, FileNotFoundError):
                raise TraceError(path, "no such file or folder") from None
            raise TraceError(path, f"cannot read: {exc.strerror or exc}") from None
        if stat.S_ISDIR(st.st_mode):
            _discover_folder(path, found)
        elif stat.S_ISREG(st.st_mode):
            found.files.append(path)
        else:
            raise TraceError(path, f"not a regular file or folder ({_file_type(st.st_mode)})")
    seen: set[Path] = set()
    unique = []
    for f in found.files:
        try:
            key = f.resolve()
        except (OSError, RuntimeError):
            key = f.absolute()
        if key not in seen:
            seen.add(key)
            unique.append(f)
    found.files = unique
    return found


def _discover_folder(folder: Path, found: Discovery) -> None:
    files: list[Path] = []
    skipped: list[SkippedEntry] = []
    looked = ignored = 0
    visited: set[tuple[int, int]] = set()
    st = folder.stat()
    visited.add((st.st_dev, st.st_ino))
    pending = [folder]
    while pending:
        current = pending.pop()
        try:
            with os.scandir(current) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError as exc:
            skipped.append(SkippedEntry(current, f"cannot list folder: {exc.strerror or exc}"))
            continue
        subfolders = []
        for entry in entries:
            path = Path(entry.path)
            is_link = _is_link(entry)
            try:
                st = os.stat(entry.path)  # follows links; never opens the entry
            except OSError as exc:
                looked += 1
                reason = _link_problem(exc) if is_link else f"cannot read: {exc.strerror or exc}"
                skipped.append(SkippedEntry(path, reason))
                continue
            if stat.S_ISDIR(st.st_mode):
                key = (st.st_dev, st.st_ino)
                if key in visited:
                    what = ("link to a folder already searched (a link loop or a second path to it)" if is_link
                            else "folder already searched through a link")
                    skipped.append(SkippedEntry(path, what))
                    continue
                visited.add(key)
                subfolders.append(path)
                continue
            looked += 1
            if not stat.S_ISREG(st.st_mode):
                skipped.append(SkippedEntry(path, f"not a regular file ({_file_type(st.st_mode)}); not opened"))
                continue
            if not entry.name.lower().endswith(JSON_SUFFIXES):
                ignored += 1
                continue
            problem = sniff_trace(path)
            if problem is None:
                files.append(path)
            else:
                skipped.append(SkippedEntry(path, problem))
        pending.extend(reversed(subfolders))
    if not files:
        detail = f"{looked} file{'s' if looked != 1 else ''} looked at"
        if skipped:
            first = skipped[0]
            detail += f"; {len(skipped)} skipped, e.g. {first.path.name}: {first.reason}"
        raise TraceError(folder, f"folder holds no kineto traces ({detail})")
    found.files.extend(sorted(files, key=str))
    found.skipped.extend(sorted(skipped, key=lambda s: str(s.path)))
    found.ignored_count += ignored


def _is_link(entry: os.DirEntry) -> bool:
    try:
        return entry.is_symlink()
    except OSError:
        return False


def _link_problem(exc: OSError) -> str:
    if exc.errno == errno.ELOOP:
        return "symbolic link loop"
    if exc.errno == errno.ENOENT:
        return "dangling symbolic link (its target does not exist)"
    return f"cannot follow symbolic link: {exc.strerror or exc}"


def _file_type(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device")):
        if test(mode):
            return name
    return "a special file"


def sniff_trace(path: Path) -> str | None:
    """None when the head of `path` (at most SNIFF_BYTES, decompressed) is a kineto trace, else why not."""
    try:
        with open(path, "rb") as raw:
            magic = raw.read(2)
            raw.seek(0)
            if magic == _GZIP_MAGIC:
                try:
                    with gzip.GzipFile(fileobj=raw) as gz:
                        head = gz.read(SNIFF_BYTES)
                except (OSError, EOFError, zlib.error) as exc:
                    return f"not a valid gzip file ({exc})"
            else:
                head = raw.read(SNIFF_BYTES)
    except OSError as exc:
        return f"cannot read: {exc.strerror or exc}"
    return _head_problem(head)


# One JSON token at a time, skipping everything that is not a string or a bracket: strings (escapes
# included), brackets, colons and commas.
_TOKEN = re.compile(rb'"(?:[^"\\]|\\.)*"|[{}\[\]:,]')
_TRACE_KEYS = frozenset({b"traceEvents", b"schemaVersion", b"deviceProperties"})


def _head_problem(head: bytes) -> str | None:
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    if not text:
        return "empty file"
    first = text[:1]
    if first not in (b"{", b"["):
        return "not a JSON object or array"
    # Walk the tokens: collect the keys of the top-level object, or of the objects in a top-level array.
    depth = 0
    stack: list[bytes] = []
    last_string = None
    for m in _TOKEN.finditer(text):
        tok = m.group()
        if tok in (b"{", b"["):
            stack.append(tok)
            depth += 1
        elif tok in (b"}", b"]"):
            if stack:
                stack.pop()
            depth -= 1
            if depth == 0:
                break
        elif tok == b":":
            if last_string is not None and stack and stack[-1] == b"{":
                key = last_string[1:-1]
                if first == b"{" and depth == 1 and key in _TRACE_KEYS:
                    return None
                if first == b"[" and depth == 2 and key == b"ph":
                    return None
        if tok[:1] == b'"':
            last_string = tok
        elif tok != b":":
            last_string = None
    if depth == 0:
        where = ""
    elif len(head) >= SNIFF_BYTES:
        where = f" in its first {SNIFF_BYTES // 1024} KiB"
    else:
        where = "; the JSON is cut short"
    if first == b"[":
        return f"not a kineto trace (JSON array without trace events{where})"
    return f"not a kineto trace (JSON without traceEvents{where})"


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
