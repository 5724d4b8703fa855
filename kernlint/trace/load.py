"""Finding and reading trace files: Chrome-trace JSON from torch.profiler, plain or gzipped, and the other
formats of the trace-source registry (kernlint.trace.sources: Nsight Systems' SQLite export, plugins).

Accepted paths: a trace file (any name: gzip is detected by its magic bytes), or a folder, searched
recursively, in which every file with a source's suffix that the source recognizes is taken: a `.json` /
`.json.gz` file whose head is a kineto trace, whatever its name (`rank-0.json.gz`, `worker0.<ms>.pt.trace.json`,
`train.json`...), an nsys `.sqlite` export. `discover_traces` also says which entries it passed over and why.
`load_trace` reads a file with the source whose sniff accepts its head (kineto's when none does). Every problem
with a trace raises TraceError naming the file.

Reading is bounded: a trace larger than `max_bytes` of JSON (DEFAULT_MAX_TRACE_BYTES unless the caller
says otherwise; the CLI's --max-trace-bytes) is refused with one TraceError before it is held in memory. A
gzip file is decompressed as a stream: its output is kept only while it stays under KEEP_WHILE_COUNTING;
past that, the first pass only counts, and a second pass, once the size is known to be within the cap,
fills a buffer of exactly that size. A gzip bomb therefore costs at most KEEP_WHILE_COUNTING of memory and
the time to inflate `max_bytes`. Running out of memory anyway, JSON nested too deeply, and a trace without
events are TraceErrors too, never another exception.

`load_trace` first tries to stream the trace (`stream_trace`, kernlint.trace.event_stream: past 4 MB of JSON
the events are decoded as the file is read, and the whole JSON is never held); a trace the stream does not
read is read whole as above, with the same result or the same TraceError.
"""
from __future__ import annotations

import bisect
import dataclasses
import errno
import gzip
import os
import re
import stat
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import msgspec

from kernlint.errors import TraceError
from kernlint.fileio import RUN_METADATA_SUFFIX, NotRegularFileError, file_kind, open_regular
from kernlint.trace import graph_evidence, names
from kernlint.trace.columns import RawColumns
from kernlint.trace.event_stream import EventStream, StreamFallback
from kernlint.trace.graphs import attribute_replays
from kernlint.trace.kinds import RUNTIME_CATEGORIES
from kernlint.trace.schema import EVENTS_KEY_STRING, JSON_TOKEN, RawTrace, count_events_keys, trace_decoder
from kernlint.trace.sources import entries_of, read_entry, source_of, sources_for_name, split_entry
from kernlint.trace.table import EventTable, build_event_table

TRACE_SUFFIXES = (".pt.trace.json", ".pt.trace.json.gz")
JSON_SUFFIXES = (".json", ".json.gz")   # a folder's files with these suffixes are sniffed for a trace head
SNIFF_BYTES = 64 * 1024                 # how much of a file's (decompressed) head the sniffer reads first
SNIFF_MAX_BYTES = 256 << 20             # ... and at most, when a long first key leaves it undecided
_GZIP_MAGIC = b"\x1f\x8b"

# Decompressed JSON accepted by default: 2 GiB. Generous (kineto traces of a long serving profile reach a
# few hundred MB; loading peaks at about 1.5x the JSON size in memory, bench/trace_speed), and a 4 GiB gzip
# bomb is refused after inflating 2 GiB (about 2 s) while holding at most KEEP_WHILE_COUNTING
# (bench/gzip_bomb.py measures it).
DEFAULT_MAX_TRACE_BYTES = 2 * 1024 ** 3
# A gzip trace's output is kept while it is at most this large; past it the first pass only counts.
KEEP_WHILE_COUNTING = 256 * 1024 ** 2
_READ_CHUNK = 1 << 20      # compressed bytes read at a time
_INFLATE_CHUNK = 1 << 20   # at most this many decompressed bytes per zlib call (a bomb expands ~1000x;
                           # one call briefly holds twice this)

# One whole JSON string, escapes included (the N/A repair skips strings: "x N/A y" stays as it is).
_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')
_array_decoder = msgspec.json.Decoder(list[msgspec.Raw])


@dataclass(frozen=True)
class SkippedEntry:
    """A file or folder met while searching a folder that is not taken as a trace, and why (one line)."""

    path: Path
    reason: str
    # Could not be read (no permission, dangling link, FIFO, broken gzip): what it holds was not checked.
    # False for a file that was read and is not a kineto trace.
    unreadable: bool = False


@dataclass
class Discovery:
    """What `discover_traces` found: the trace files, the entries it passed over with the reason, and how
    many files it ignored for their suffix (not .json / .json.gz)."""

    files: list[Path] = field(default_factory=list)
    skipped: list[SkippedEntry] = field(default_factory=list)
    ignored_count: int = 0
    # The folder given on the command line that each file found in a folder was found in (by str(file)): what a
    # program's identity reads the file's path below (kernlint.baseline.identity). Named files are not here.
    roots: dict[str, Path] = field(default_factory=dict)


def find_trace_files(paths: Iterable[str | Path]) -> list[Path]:
    """The trace files `discover_traces` finds (kept for callers that need only the list)."""
    return discover_traces(paths).files


def discover_traces(paths: Iterable[str | Path], exclude: Sequence[str] = (), gitignore: bool = True) -> Discovery:
    """Expand files and folders into trace files, telling a kineto trace by its content, not its name.

    A named file is taken as it is (decoding says later what is wrong with it). A folder is searched
    recursively, following links to folders once each; every `.json` / `.json.gz` file in it (gzip told by
    its magic bytes) whose head holds a kineto trace is taken: a JSON object with a top-level `traceEvents`,
    `schemaVersion` or `deviceProperties` key, or a JSON array of events. A file's head is read until it
    can be judged (`sniff_trace`: SNIFF_BYTES first, at most SNIFF_MAX_BYTES). Other JSON files, and
    entries that cannot be read (no permission, a dangling link, a link loop, a FIFO or other special file, a
    folder that cannot be listed), are listed in `skipped` with the reason; files with other suffixes are
    counted in `ignored_count`. A folder without a trace raises TraceError. Files keep the order of the
    arguments, a folder's files sorted by path; duplicates (same resolved path) are dropped. In a folder,
    the entries that an `exclude` glob matches and, with `gitignore`, those git ignores are passed over
    silently (kernlint.trace.ignored).
    """
    found = Discovery()
    for p in paths:
        path = Path(p)
        try:
            st = path.stat()
        except OSError as exc:
            file, part = split_entry(path)
            if part is not None and file.is_file():   # one process of a file of several, named (FILE#pid-N)
                found.files.append(path)
                continue
            if path.is_symlink():
                raise TraceError(path, _link_problem(exc)) from None
            if isinstance(exc, FileNotFoundError):
                raise TraceError(path, "no such file or folder") from None
            raise TraceError(path, f"cannot read: {exc.strerror or exc}") from None
        if stat.S_ISDIR(st.st_mode):
            _discover_folder(path, found, exclude, gitignore)
        elif stat.S_ISREG(st.st_mode):
            found.files.extend(entries_of(path))   # a file of several processes (nsys): one entry each
        else:
            raise TraceError(path, f"not a regular file or folder ({file_kind(st.st_mode)})")
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


def _discover_folder(folder: Path, found: Discovery, exclude: Sequence[str] = (), gitignore: bool = True) -> None:
    from kernlint.trace.ignored import folder_filter

    passed_over = folder_filter(folder, exclude, gitignore)
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
            skipped.append(SkippedEntry(current, f"cannot list folder: {exc.strerror or exc}", unreadable=True))
            continue
        subfolders = []
        for entry in entries:
            path = Path(entry.path)
            if passed_over.skips(path):
                continue
            is_link = _is_link(entry)
            try:
                st = os.stat(entry.path)  # follows links; never opens the entry
            except OSError as exc:
                looked += 1
                reason = _link_problem(exc) if is_link else f"cannot read: {exc.strerror or exc}"
                skipped.append(SkippedEntry(path, reason, unreadable=True))
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
                skipped.append(SkippedEntry(path, f"not a regular file ({file_kind(st.st_mode)}); not opened",
                                            unreadable=True))
                continue
            offered = [] if entry.name.endswith(RUN_METADATA_SUFFIX) else sources_for_name(entry.name)
            if not offered:
                ignored += 1   # another kind of file, or kernlint's own run metadata beside a trace
                continue
            problem = None
            for source in offered:   # the first source that recognizes it takes it; else the first one's reason
                found_problem = source.recognizes(path)
                if found_problem is None:
                    problem = None
                    break
                problem = problem or found_problem
            if problem is None:
                try:
                    files.extend(entries_of(path, source))
                except TraceError as exc:
                    skipped.append(SkippedEntry(path, f"cannot read: {exc.problem}", unreadable=True))
            else:
                skipped.append(SkippedEntry(path, problem, unreadable=problem.startswith(_UNREADABLE_SNIFF)))
        pending.extend(reversed(subfolders))
    if not files:
        detail = f"{looked} file{'s' if looked != 1 else ''} looked at"
        if skipped:
            first = skipped[0]
            detail += f"; {len(skipped)} skipped, e.g. {first.path.name}: {first.reason}"
        raise TraceError(folder, f"folder holds no kineto traces ({detail})")
    found.files.extend(sorted(files, key=str))
    found.roots.update((str(f), folder) for f in files)
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


# What sniff_trace says when it could not read a file, as opposed to a file it read that is not a trace.
_UNREADABLE_SNIFF = ("cannot read", "not a valid gzip file")


def sniff_trace(path: Path) -> str | None:
    """None when `path` holds a kineto trace, else why not. The head is read until it can be judged: the
    first SNIFF_BYTES (decompressed), then four times more while the top level is still open and no trace key
    was met (a long first key such as a large otherData object), up to SNIFF_MAX_BYTES; past that the file is
    reported as not judged (unreadable: a verdict resting on the folder is then incomplete). Each head is
    scanned from its start; the sizes growing fourfold, that is at most 4/3 of a scan of the last one."""
    try:
        with _open_regular(path) as raw:
            magic = raw.read(2)
            raw.seek(0)
            source = raw
            if magic == _GZIP_MAGIC:
                source = gzip.GzipFile(fileobj=raw)
            head = b""
            want = SNIFF_BYTES
            while True:
                try:
                    more = source.read(want - len(head))
                except (OSError, EOFError, zlib.error) as exc:
                    if source is raw:
                        raise
                    return f"not a valid gzip file ({exc})"
                head += more
                complete = len(head) < want
                problem = _head_problem(head, complete)
                if problem is not _NOT_YET:
                    return problem
                if want >= SNIFF_MAX_BYTES:
                    size = f"{want >> 20} MiB" if want >= 1 << 20 else f"{want >> 10} KiB"
                    return (f"cannot read: no trace key in its first {size} and the JSON goes on (name the file "
                            "itself to check it)")
                want = min(want * 4, SNIFF_MAX_BYTES)
    except OSError as exc:
        return f"cannot read: {exc.strerror or exc}"
    except TraceError as exc:   # replaced by a FIFO or a device since the folder was listed
        return f"cannot read: {exc.problem}"


_TRACE_KEYS = frozenset({b"traceEvents", b"schemaVersion", b"deviceProperties"})
_NOT_YET = "the head ends before it can be judged"   # a sentinel: compared by identity


def _head_problem(head: bytes, complete: bool) -> str | None:
    """None when the head is a kineto trace's, a reason when it is not, _NOT_YET when it cannot tell yet
    (not `complete`: the file goes on, and neither a trace key nor the end of the top level was met)."""
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    if not text:
        return "empty file" if complete else _NOT_YET
    first = text[:1]
    if first not in (b"{", b"["):
        return "not a JSON object or array"
    # Walk the tokens: collect the keys of the top-level object, or of the objects in a top-level array.
    depth = 0
    stack: list[bytes] = []
    last_string = None
    for m in JSON_TOKEN.finditer(text):
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
                key = _key_text(last_string)
                if first == b"{" and depth == 1 and key in _TRACE_KEYS:
                    return None
                if first == b"[" and depth == 2 and key == b"ph":
                    return None
        if tok[:1] == b'"':
            last_string = tok if m.group("open") is None else None
        elif tok != b":":
            last_string = None
    if depth != 0 and not complete:
        return _NOT_YET
    where = "" if depth == 0 else "; the JSON is cut short"
    if first == b"[":
        return f"not a kineto trace (JSON array without trace events{where})"
    return f"not a kineto trace (JSON without traceEvents{where})"


def _key_text(token: bytes) -> bytes:
    """A key's text, its escapes decoded (`"trace\\u0045vents"` is traceEvents to any JSON reader)."""
    if b"\\" not in token:
        return token[1:-1]
    try:
        return msgspec.json.decode(token, type=str).encode()
    except (msgspec.DecodeError, UnicodeEncodeError):
        return token[1:-1]


def _open_regular(path: Path):
    """`path` open for reading when it is a regular file; TraceError otherwise (a FIFO would block the open
    until a writer comes, /dev/zero never ends: a --capture or a trace named on the command line may be
    either)."""
    try:
        return open_regular(path)
    except NotRegularFileError as exc:
        raise TraceError(path, "is a folder, not a trace file" if exc.is_folder else
                         f"not a regular file ({exc.kind})") from None


def read_trace_bytes(path: Path, max_bytes: int = DEFAULT_MAX_TRACE_BYTES) -> bytes | bytearray:
    """The JSON text of a trace file, decompressed when it is gzip (told by its magic bytes), never more
    than `max_bytes` of it: a larger file, or a gzip that decompresses to more, raises TraceError without
    being held in memory. Multi-member gzip files (and zero padding after the last member) are read whole.
    A gzip trace comes back as a bytearray (filled in place, not copied); msgspec decodes either."""
    try:
        with _open_regular(path) as raw:
            size, gzipped = _size_and_gzip(raw)
            if gzipped:
                data = _gunzip(raw, path, max_bytes, size)
            else:
                if path.name.endswith(".gz"):
                    raise TraceError(path, "named .gz but is not gzip-compressed")
                if size > max_bytes:
                    raise TraceError(path, f"is {size:,} bytes, more than the limit of {max_bytes:,}; "
                                     "raise --max-trace-bytes to read it")
                # One buffer of the file's size, filled in place: read() would hold it twice for a moment.
                data = bytearray(size)
                got = raw.readinto(data)
                while got is not None and got < size:
                    more = raw.readinto(memoryview(data)[got:])
                    if not more:
                        break
                    got += more
                del data[got:]
                rest = raw.read(max_bytes - len(data) + 1)   # it grew since stat, or is not a regular file
                if rest:
                    data += rest
                if len(data) > max_bytes:
                    raise TraceError(path, f"is more than {max_bytes:,} bytes; raise --max-trace-bytes to read it")
    except OSError as exc:
        raise TraceError(path, f"cannot read: {exc.strerror or exc}") from None
    return _not_empty(data, path)


def _size_and_gzip(raw) -> tuple[int, bool]:
    """(size, whether gzip by its magic bytes) of an open trace file, left at its start."""
    size = os.fstat(raw.fileno()).st_size
    gzipped = raw.read(2) == _GZIP_MAGIC
    raw.seek(0)
    return size, gzipped


def _not_empty(data: bytes | bytearray, path: Path) -> bytes | bytearray:
    if not data or data.isspace():
        raise TraceError(path, "file is empty")
    return data


def stream_trace(path: Path, max_bytes: int = DEFAULT_MAX_TRACE_BYTES, captures: Iterable[Path] = (),
                 more: Iterable[bytes] = ()) -> tuple[RawTrace, RawColumns, int] | bytes | bytearray | None:
    """A trace read as a stream (kernlint.trace.event_stream): its top level, its events' columns (with the
    capture windows of `captures` and the events `more` merged in) and its size in bytes of JSON; or its
    bytes, when it is small enough to be read whole; or None where it cannot be streamed (read it whole:
    read_trace_bytes and decode_trace say what is wrong).
    Raises the TraceErrors of read_trace_bytes for what streaming reads (too large, damaged gzip)."""
    try:
        with _open_regular(path) as raw:
            size, gzipped = _size_and_gzip(raw)
            if gzipped:
                stream = EventStream(path, _json_size_estimate(raw, size))
                _inflate(raw, path, max_bytes, stream)
            else:
                if path.name.endswith(".gz") or size > max_bytes:
                    return None
                stream = EventStream(path, size)
                total = 0
                while block := raw.read(_READ_CHUNK):
                    total += len(block)
                    if total > max_bytes:   # it grew since stat
                        return None
                    stream(block)
        if not stream.streaming:
            return _not_empty(stream.whole, path)
        extra = [e for k, c in enumerate(captures, start=1) for e in capture_window_events(c, max_bytes, k)]
        return (*stream.finish(extra + list(more)), stream.json_bytes)
    except (OSError, StreamFallback):
        return None


def _json_size_estimate(raw, compressed: int) -> int:
    """A gzip's decompressed size as its trailer gives it (mod 2**32) where that is possible, else 8x."""
    if compressed >= 18:
        raw.seek(compressed - 4)
        hint = int.from_bytes(raw.read(4), "little")
        raw.seek(0)
        if compressed <= hint <= compressed * _DEFLATE_MAX_RATIO:
            return hint
    return compressed * 8


# Deflate's largest ratio (a run of one byte): a gzip cannot hold more than this many times its size.
_DEFLATE_MAX_RATIO = 1032


class _Filling:
    """A sink that writes the inflated chunks into one buffer of a size known up front (no copy at the end);
    `Full` is raised when more comes than that size."""

    class Full(Exception):
        pass

    def __init__(self, size: int) -> None:
        self.buffer = bytearray(size)
        self._view = memoryview(self.buffer)
        self.at = 0

    def __call__(self, chunk: bytes) -> None:
        end = self.at + len(chunk)
        if end > len(self.buffer):
            raise _Filling.Full
        self._view[self.at:end] = chunk
        self.at = end

    def result(self) -> bytearray:
        self._view.release()
        del self.buffer[self.at:]
        return self.buffer


def _size_hint(raw, compressed: int, max_bytes: int) -> int | None:
    """The decompressed size that a single-member gzip's trailer (ISIZE, the size mod 2**32) gives, when it
    is above KEEP_WHILE_COUNTING, within the cap and possible for the file's `compressed` size; else None."""
    if compressed < 18:
        return None
    raw.seek(compressed - 4)
    hint = int.from_bytes(raw.read(4), "little")
    raw.seek(0)
    if KEEP_WHILE_COUNTING < hint <= min(max_bytes, compressed * _DEFLATE_MAX_RATIO):
        return hint
    return None


def _gunzip(raw, path: Path, max_bytes: int, compressed: int) -> bytes | bytearray:
    hint = _size_hint(raw, compressed, max_bytes)
    if hint is not None:   # one pass into a buffer of the size the trailer gives (a trace over 256 MB)
        filling = _Filling(hint)
        try:
            _inflate(raw, path, max_bytes, filling)
            return filling.result()
        except _Filling.Full:   # several members (the trailer is the last one's): count, then fill
            del filling
            raw.seek(0)
    kept: bytearray | None = bytearray()

    def keep(chunk: bytes) -> None:
        nonlocal kept
        if kept is not None:
            if len(kept) + len(chunk) <= KEEP_WHILE_COUNTING:
                kept += chunk
            else:  # too large to keep on a first pass: count only, then read again once the size is known
                kept = None

    total = _inflate(raw, path, max_bytes, keep)
    if kept is not None:
        return kept
    filling = _Filling(total)
    raw.seek(0)
    try:
        _inflate(raw, path, max_bytes, filling)
    except _Filling.Full:
        raise TraceError(path, "changed while it was read") from None
    if filling.at != total:
        raise TraceError(path, "changed while it was read")
    return filling.result()


def _inflate(raw, path: Path, max_bytes: int, sink) -> int:
    """Decompress every gzip member of `raw` in bounded chunks, handing each to `sink`; the total size.
    Raises TraceError as soon as the output passes `max_bytes`, and for a damaged or cut-short gzip."""
    total = 0
    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
    pending = b""
    try:
        while True:
            if not pending:
                pending = raw.read(_READ_CHUNK)
                if not pending:
                    break
            if inflater.eof:  # one member ended: zero padding, or the next member
                pending = pending.lstrip(b"\0")
                if not pending:
                    continue
                inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
            out = inflater.decompress(pending, _INFLATE_CHUNK)
            pending = inflater.unused_data if inflater.eof else inflater.unconsumed_tail
            total = _take(out, total, max_bytes, path, sink)
        while not inflater.eof:  # output zlib still holds back (every input is read)
            out = inflater.decompress(b"", _INFLATE_CHUNK)
            if not out:
                break
            total = _take(out, total, max_bytes, path, sink)
    except zlib.error as exc:
        raise TraceError(path, f"not a valid gzip file ({exc})") from None
    if not inflater.eof:
        raise TraceError(path, "not a valid gzip file (compressed data ends early)")
    return total


def _take(out: bytes, total: int, max_bytes: int, path: Path, sink) -> int:
    total += len(out)
    if total > max_bytes:
        raise TraceError(path, f"decompresses to more than {max_bytes:,} bytes; raise --max-trace-bytes to read it")
    if out:
        sink(out)
    return total


def _quote_bare_na(data: bytes | bytearray) -> bytes:
    """Quote every N/A token outside a JSON string (some kineto versions wrote N/A unquoted); strings, even
    ones holding "N/A", stay as they are. Only the neighbourhood of each N/A is scanned: a raw newline is
    never inside a JSON string, so the scan for string boundaries starts at the line of the N/A (kineto
    writes an event a line), or where the previous scan stopped."""
    parts: list = []
    copied = scan = 0   # `scan` is always outside a string
    at = data.find(b"N/A")
    while at >= 0:
        line = data.rfind(b"\n", scan, at)
        if line >= 0:
            scan = line + 1
        inside = False
        while True:
            quote = data.find(b'"', scan, at)
            if quote < 0:
                break
            string = _JSON_STRING.match(data, quote)
            if string is None:  # an unterminated string: nothing after it is repaired
                at = -1
                inside = True
                break
            scan = string.end()
            if scan > at:
                inside = True
                break
        if at < 0:
            break
        if not inside:
            parts += (data[copied:at], b'"N/A"')
            copied = scan = at + 3
        at = data.find(b"N/A", max(scan, at + 3))
    if not parts:
        return bytes(data)
    parts.append(data[copied:])
    return b"".join(parts)


def decode_trace(data: bytes | bytearray, path: Path) -> RawTrace:
    try:
        return _decode(data, path)
    except RecursionError:
        raise TraceError(path, "nested too deeply: its JSON nests lists or objects deeper than kernlint can "
                         "decode") from None


# `"traceEvents"` as an object key, escaped or not: a second one would silently replace the first (the last
# key wins).
_EVENTS_KEY = re.compile(EVENTS_KEY_STRING.pattern + rb'\s*:')


# Traces up to this much JSON are searched for any key repeated in an object (an event's ts written twice: a
# JSON reader keeps the last, so the event moves or is renamed unseen). The search parses the whole text once
# more in Python: about 55 ms a MB, so larger traces are searched for a repeated traceEvents key only.
REPEATED_KEY_SEARCH_BYTES = 4 << 20


class _RepeatedKey(Exception):
    def __init__(self, key: str, keys: list[str]):
        self.key, self.keys = key, keys


def _refuse_repeated_keys(data: bytes | bytearray, path: Path) -> None:
    """TraceError when an object holds a key twice: traceEvents in every trace, any key in traces up to
    REPEATED_KEY_SEARCH_BYTES. A byte search screens out the large traces with one
    traceEvents key, the common case, before anything is parsed."""
    small = len(data) <= REPEATED_KEY_SEARCH_BYTES
    if not small and (count_events_keys(data) < 2 or len(_EVENTS_KEY.findall(data)) < 2):
        return
    import json

    def pairs(items):
        found = dict(items)   # the hook runs for every object: the keys are looked at only on a repeat
        if len(found) != len(items):
            keys = [k for k, _ in items]
            if keys.count("traceEvents") > 1:
                raise _RepeatedKey("traceEvents", keys)
            if small:
                raise _RepeatedKey(next(k for k in keys if keys.count(k) > 1), keys)
        return found

    try:
        json.loads(bytes(data), object_pairs_hook=pairs)
    except _RepeatedKey as found:
        if found.key == "traceEvents":
            raise TraceError(path, "the top-level object holds the key 'traceEvents' more than once: which list "
                                   "is the trace is unknown (a JSON reader keeps the last)") from None
        where = "an event" if {"ph", "ts", "name"} & set(found.keys) else "an event's args"
        raise TraceError(path, f"{where} holds the key {found.key!r} more than once: which value is meant is "
                               "unknown (a JSON reader keeps the last)") from None
    except (ValueError, RecursionError):
        return   # not valid JSON: the decoder says why


_UTF8_BOM = b"\xef\xbb\xbf"
_WIDE_BOMS = {b"\xff\xfe\x00\x00": "UTF-32", b"\x00\x00\xfe\xff": "UTF-32", b"\xff\xfe": "UTF-16",
              b"\xfe\xff": "UTF-16"}


def _decode(data: bytes | bytearray, path: Path) -> RawTrace:
    if data[:3] == _UTF8_BOM:   # a byte-order mark some editors and Windows tools write: JSON readers skip it
        data = data[3:]
    for bom, encoding in _WIDE_BOMS.items():
        if data[:len(bom)] == bom:
            raise TraceError(path, f"{encoding} text: kernlint reads traces in UTF-8, as torch.profiler writes "
                                   f"them (convert it: iconv -f {encoding} -t UTF-8)")
    _refuse_repeated_keys(data, path)
    try:
        return trace_decoder.decode(data)
    except msgspec.ValidationError as exc:
        message = str(exc)
        if message.startswith("Expected `object`, got `array`"):
            try:  # the Chrome "JSON array" form: a bare list of events
                return RawTrace(trace_events=_array_decoder.decode(data), events_at="$")
            except msgspec.ValidationError as inner:
                raise TraceError(path, f"unexpected trace schema: {inner}") from None
            except msgspec.DecodeError as inner:   # an array that is not valid JSON: `[` alone, cut short
                return _not_json(data, path, inner)
        if "missing required field `traceEvents`" in message:
            raise TraceError(path, "not a torch.profiler trace: no traceEvents list") from None
        raise TraceError(path, f"unexpected trace schema: {message}") from None
    except msgspec.DecodeError as exc:
        return _not_json(data, path, exc)


def _not_json(data: bytes | bytearray, path: Path, exc: msgspec.DecodeError) -> RawTrace:
    if b"N/A" in data:  # some kineto versions wrote a bare N/A value; quote it and try once more
        repaired = _quote_bare_na(data)
        if repaired != data:
            return _decode(repaired, path)
    raise TraceError(path, f"not valid JSON: {exc}") from None


def load_trace(path: str | Path, max_bytes: int = DEFAULT_MAX_TRACE_BYTES,
               captures: Iterable[str | Path] = (), outside_captures: bool = False) -> EventTable:
    """Read one trace file (at most `max_bytes` of JSON) into an EventTable. Every problem is a TraceError
    naming the file: unreadable, too large, not JSON, not a trace, no events, nested too deeply, out of
    memory. Events whose fields are damaged are kept and counted (kernlint.trace.damage).

    `captures`: traces that recorded the CUDA-graph captures this trace replays (vLLM's
    `graph_capture_rank_*` traces). Their stream-capture windows are merged in on threads of their own
    (`capture:<pid>`, ids moved apart) so that replayed kernels can be attributed to the captured launches
    (kernlint.trace.graphs); a capture inside this trace's own window needs nothing.
    `outside_captures`: this trace is a capture trace merged into the replay traces it serves
    (kernlint.trace.pairing): its own stream-capture windows are left out, the rest is a normal trace.
    Replays that nothing attributes but whose kernels carry graph node ids are attributed to PyTorch's own
    graph evidence when the trace (kernel annotations) or a file beside it (per-node stacks) has it
    (kernlint.trace.graph_evidence): the trace is then read again with that evidence merged in."""
    path = Path(path)
    source = source_of(split_entry(path)[0])
    if source.merges_captures:
        return source.read(path, max_bytes, captures=captures, outside_captures=outside_captures)
    if captures or outside_captures:
        raise TraceError(path, f"a {source.name} trace: CUDA-graph capture traces are merged into kineto traces "
                               "only (leave out --capture)")
    return read_entry(path, max_bytes)


def read_kineto_trace(path: Path, max_bytes: int = DEFAULT_MAX_TRACE_BYTES, captures: Iterable[str | Path] = (),
                      outside_captures: bool = False) -> EventTable:
    """load_trace for a kineto trace (the kineto TraceSource's read)."""
    path = Path(path)
    captures = [Path(c) for c in captures]
    table = _load(path, max_bytes, captures, outside_captures, [])
    nodes = graph_evidence.unattributed_nodes(table)
    if nodes:
        extra = _graph_evidence(path, max_bytes, table, nodes)
        if extra:
            table = _load(path, max_bytes, captures, outside_captures, extra)
    return table


def _graph_evidence(path: Path, max_bytes: int, table: EventTable, nodes: list) -> list[bytes]:
    """The capture made of PyTorch's graph evidence for the trace's unattributed graph nodes ([] for none)."""
    sidecar = graph_evidence.stack_sidecar(path)
    stacks = graph_evidence.node_stacks(sidecar) if sidecar is not None else {}
    annotations = {}
    data = read_trace_bytes(path, max_bytes)
    if graph_evidence.might_hold_annotations(data):
        annotations = graph_evidence.node_annotations(decode_trace(data, path).trace_events)
    del data
    pid, first = graph_evidence.evidence_origin(table.columns)
    return graph_evidence.capture_events(nodes, annotations, stacks, pid, first)


def _load(path: Path, max_bytes: int, captures: list[Path], outside_captures: bool, extra: list[bytes]) -> EventTable:
    size = None
    try:
        # Leaving events out needs them one by one: such a trace is read whole.
        streamed = None if outside_captures else stream_trace(path, max_bytes, captures, extra)
        if isinstance(streamed, tuple):   # a large trace, its events decoded as it was read
            raw, columns, size = streamed
        else:
            data = streamed if streamed is not None else read_trace_bytes(path, max_bytes)
            size = len(data)
            raw = decode_trace(data, path)
            del data, streamed
            if outside_captures:
                without_capture_windows(raw)
            for k, capture in enumerate(captures, start=1):
                raw.trace_events.extend(capture_window_events(capture, max_bytes, k))
            raw.trace_events.extend(extra)
            columns = None
        table = build_event_table(raw, path, columns)
        del raw, columns
        if captures:
            table.meta = dataclasses.replace(table.meta, captures=tuple(str(c) for c in captures))
        attribute_replays(table)
    except MemoryError:
        what = f"{size:,} bytes of JSON" if size is not None else "the file"
        raise TraceError(path, f"out of memory while reading ({what}); a smaller profiling window or a "
                         "machine with more memory is needed") from None
    except RecursionError:
        raise TraceError(path, "nested too deeply to analyse") from None
    return table


# Ids of the k-th merged capture trace are moved by k times this, apart from the replay trace's own.
CAPTURE_ID_OFFSET = 1 << 48
_CAPTURE_IDS = ("correlation", "External id", "Python id", "Python parent id")


class PlacedEvent(msgspec.Struct, gc=False):
    """What says where an event is: its thread and time (and, for runtime calls, whether it opens or closes a
    stream capture). Capture pairing (kernlint.trace.pairing) reads the same, with the arguments."""

    cat: object = None
    name: object = None
    pid: object = None
    tid: object = None
    ts: object = None
    dur: object = None


_placed_decoder = msgspec.json.Decoder(PlacedEvent)


def _in_capture_windows(raw_events: list, keep_capture_calls: bool = False) -> list[bool] | None:
    """For each raw event, whether it lies inside a stream capture of its thread (from BeginCapture to the end
    of the next EndCapture; with `keep_capture_calls`, those two calls are not counted in); None when the trace
    records no complete capture."""
    placed: list[PlacedEvent | None] = []
    for r in raw_events:
        try:
            placed.append(_placed_decoder.decode(r))
        except msgspec.DecodeError:
            placed.append(None)
    windows: dict[tuple, list[list[float]]] = {}
    calls = sorted((e for e in placed if e is not None and e.cat in RUNTIME_CATEGORIES and isinstance(e.name, str)
                    and _is_time(e.ts)), key=lambda e: e.ts)
    for e in calls:
        key = (e.pid, e.tid)
        if names.GRAPH_CAPTURE_BEGIN.match(e.name):
            windows.setdefault(key, []).append([e.ts, float("inf")])
        elif names.GRAPH_CAPTURE_END.match(e.name) and windows.get(key) and windows[key][-1][1] == float("inf"):
            windows[key][-1][1] = e.ts + (e.dur if _is_time(e.dur) else 0)
    spans = {key: sorted((b, e) for b, e in found if e != float("inf")) for key, found in windows.items()}
    if not any(spans.values()):
        return None
    starts = {key: [b for b, _ in found] for key, found in spans.items()}
    inside = []
    for e in placed:
        found = spans.get((e.pid, e.tid)) if e is not None and _is_time(e.ts) else None
        if not found:
            inside.append(False)
            continue
        i = bisect.bisect_right(starts[(e.pid, e.tid)], e.ts) - 1   # the last capture that began at or before ts
        inside.append(i >= 0 and e.ts <= found[i][1] and not (keep_capture_calls and _is_capture_call(e)))
    return inside


def _is_capture_call(e: PlacedEvent) -> bool:
    return e.cat in RUNTIME_CATEGORIES and isinstance(e.name, str) and bool(
        names.GRAPH_CAPTURE_BEGIN.match(e.name) or names.GRAPH_CAPTURE_END.match(e.name))


def _is_time(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def capture_window_events(path: Path, max_bytes: int, k: int) -> list[bytes]:
    """The events of a capture trace that lie inside its stream-capture windows (on the capturing thread,
    from BeginCapture to EndCapture), re-encoded with pid `capture:<pid>` and ids moved by k *
    CAPTURE_ID_OFFSET. A file that records no capture is a TraceError: it cannot be the capture asked for."""
    raw = decode_trace(read_trace_bytes(path, max_bytes), path)
    inside = _in_capture_windows(raw.trace_events)
    if inside is None:
        raise TraceError(path, "records no CUDA-graph capture (no cudaStreamBeginCapture .. EndCapture): it "
                               "cannot be the capture trace of a replay")
    offset = k * CAPTURE_ID_OFFSET
    out = []
    for r, keep in zip(raw.trace_events, inside):
        if not keep:
            continue
        try:
            e = msgspec.json.decode(r)
        except msgspec.DecodeError:
            continue
        if not isinstance(e, dict):
            continue
        e["pid"] = f"capture:{e.get('pid')}"
        args = e.get("args")
        if isinstance(args, dict):
            for key in _CAPTURE_IDS:
                v = args.get(key)
                if isinstance(v, int) and not isinstance(v, bool) and v >= 0:
                    args[key] = v + offset
        out.append(msgspec.json.encode(e))
    return out


def without_capture_windows(raw: RawTrace) -> int:
    """Leaves out of `raw` the events inside its stream-capture windows (what capture_window_events merges into
    the replay traces the capture trace serves), but the BeginCapture and EndCapture calls themselves: the
    trace still says where it captured (a sync between two captures is set-up, not a sync in a capture);
    returns how many were left out."""
    inside = _in_capture_windows(raw.trace_events, keep_capture_calls=True)
    if inside is None:
        return 0
    kept = [r for r, drop in zip(raw.trace_events, inside) if not drop]
    dropped = len(raw.trace_events) - len(kept)
    raw.trace_events = kept
    return dropped
