"""Trace sources: the file formats kernlint reads into an EventTable, and their registry.

A `TraceSource` says which files it reads (`sniff`: the first HEAD_BYTES of a file, inflated when it is
gzip; `recognize`: the finer test a folder search makes of a file with one of its `suffixes`) and reads one
into an EventTable (`read(path, max_bytes)`), every problem a TraceError naming the file. Its feature flags say
what else the pipeline may do with its files: `pairs_captures` (its traces are read for capture pairing,
kernlint.trace.pairing) and `merges_captures` (`read` takes `captures=` and `outside_captures=`). A source
whose file records several processes (`parts`: nsys's export of a torchrun job) has it listed as one entry per
process, `FILE#pid-N` (`split_entry`, `entries_of`, `read_entry`): each a rank, as kineto writes one file per
rank.

`TRACE_SOURCES` is a Registry (entry-point group `kernlint.trace_sources`): the built-ins are kineto's
Chrome-trace JSON (`sources/kineto.py`, the format torch.profiler writes) and Nsight Systems' SQLite export
(`sources/nsys.py`); another package adds a `TraceSource` through an entry point. `kernlint.trace.load`
dispatches through it: discovery takes a folder's file when a source whose suffix it has recognizes it, and
`load_trace` reads a file with the first source whose `sniff` accepts its head (the built-ins first, then
plugins in name order), kineto's when none does (its errors say what is wrong with a file that is no trace).

A source that is not kineto builds its table from neutral events (`table_from_events`): dicts in the Chrome
trace-event form (`ph`, `cat`, `name`, `pid`, `tid`, `ts` and `dur` in microseconds, `args` with `correlation`,
`device`, `stream`, `bytes`, `graph node id`; categories `kernel`, `gpu_memcpy`, `gpu_memset`, `cuda_runtime`,
`cuda_driver`, `cpu_op`, `user_annotation`) and the trace's top-level facts (`TraceFacts`). They go through the
same column decoding and table build as a kineto trace's events: links, nesting and damage alike.
"""
from __future__ import annotations

import gzip
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kernlint.errors import TraceError
from kernlint.registry import Registry

if TYPE_CHECKING:
    from kernlint.trace.table import EventTable

ENTRY_POINT_GROUP = "kernlint.trace_sources"
HEAD_BYTES = 4096          # what `sniff` is given: a file's first bytes (inflated when the file is gzip)
_GZIP_MAGIC = b"\x1f\x8b"
_BUILTINS = ("kernlint.trace.sources.kineto", "kernlint.trace.sources.nsys")   # the order sniffing asks them


@dataclass(frozen=True)
class TraceSource:
    """One trace format: how to tell its files and how to read one."""

    name: str
    summary: str
    # A folder's files whose names end with one of these (lower case) are offered to `recognize`.
    suffixes: tuple[str, ...]
    # The file's first HEAD_BYTES (inflated when gzip): whether this source reads it.
    sniff: Callable[[bytes], bool]
    # (path, max_bytes) -> EventTable; TraceError naming the file for every problem. A source that
    # `merges_captures` takes `captures=` and `outside_captures=` too.
    read: Callable[..., EventTable]
    # A folder's file with one of `suffixes`: None when it is a trace of this source, else why not (one line;
    # starting with "cannot read" when the file could not be read: the verdict is then incomplete). Default:
    # `sniff` on its head.
    recognize: Callable[[Path], str | None] | None = None
    pairs_captures: bool = False
    merges_captures: bool = False
    # A file that records several processes (an nsys export of a torchrun job: one process per GPU): path ->
    # its parts, one per process (`pid-N`), each a trace of its own (a rank, as kineto writes one file per
    # rank). Discovery lists a file of two or more parts as the entries `FILE#pid-N`, and `read` takes
    # `part=` for one. None: a file is one trace.
    parts: Callable[[Path], list[str]] | None = None

    def recognizes(self, path: Path) -> str | None:
        if self.recognize is not None:
            return self.recognize(path)
        head = read_head(path)
        if head is None:
            return "cannot read its head"
        return None if self.sniff(head) else f"not a {self.name} trace"


TRACE_SOURCES: Registry[TraceSource] = Registry("trace source", ENTRY_POINT_GROUP, default_plugins=_BUILTINS,
                                                summary=lambda s: s.summary)
DEFAULT_SOURCE = "kineto"


def register(source: TraceSource) -> TraceSource:
    return TRACE_SOURCES.register(source.name, source)


def read_head(path: Path, size: int = HEAD_BYTES) -> bytes | None:
    """The first `size` bytes of the file (inflated when it is gzip); None when it cannot be read (not a
    regular file, no permission, a damaged gzip)."""
    from kernlint.fileio import NotRegularFileError, open_regular

    try:
        with open_regular(Path(path)) as raw:
            head = raw.read(size)
            if head[:2] != _GZIP_MAGIC:
                return head
            raw.seek(0)
            with gzip.GzipFile(fileobj=raw) as inflated:
                return inflated.read(size)
    except (OSError, EOFError, zlib.error, NotRegularFileError, TraceError):
        return None


def source_of(path: str | Path) -> TraceSource:
    """The source that reads `path`: the first whose `sniff` accepts its head, else kineto's (whose errors then
    say what the file is not)."""
    head = read_head(Path(path))
    if head is not None:
        for _, source in TRACE_SOURCES.items():
            if source.sniff(head):
                return source
    return TRACE_SOURCES.get(DEFAULT_SOURCE)


def pairs_captures(path: str | Path) -> bool:
    """Whether the pipeline may read `path` (a trace entry) for capture pairing (kernlint.trace.pairing reads
    kineto JSON only)."""
    return source_of(split_entry(path)[0]).pairs_captures


def pairable(entries: Iterable[str | Path]) -> list[Path]:
    """The entries capture pairing may read (their source pairs captures), in their order. The pipeline pairs
    these and checks every entry: `pairing = pair_captures(pairable(files), ...)`, then
    `pairing.checked = list(files)`."""
    return [Path(e) for e in entries if pairs_captures(e)]


PART_MARK = "#"   # FILE#pid-N: one process's part of a file that records several


def split_entry(path: str | Path) -> tuple[Path, str | None]:
    """(file, part) of a trace entry: `x.sqlite#pid-144` -> (x.sqlite, "pid-144"); a path that exists as it is
    (a file whose name holds the mark) or has no mark is (path, None)."""
    path = Path(path)
    name = path.name
    if PART_MARK not in name or path.exists():
        return path, None
    stem, _, part = name.rpartition(PART_MARK)
    if not stem or not part:
        return path, None
    return path.with_name(stem), part


def entries_of(path: Path, source: TraceSource | None = None) -> list[Path]:
    """The trace entries of one file: itself, or `FILE#part` for each part of a file of two or more parts."""
    source = source or source_of(path)
    if source.parts is None:
        return [path]
    parts = source.parts(path)
    if len(parts) < 2:
        return [path]
    return [path.with_name(f"{path.name}{PART_MARK}{part}") for part in parts]


def read_entry(path: str | Path, max_bytes: int, **options: Any) -> EventTable:
    """One entry (a file, or a part of one) read by its source: kernlint.trace.load.load_trace's dispatch."""
    file, part = split_entry(path)
    source = source_of(file)
    if part is not None:
        if source.parts is None:
            raise TraceError(path, f"no such file ({source.name} traces have no parts such as {part!r})")
        options["part"] = part
    return source.read(file, max_bytes, **options)


def sources_for_name(name: str) -> list[TraceSource]:
    """The sources a folder search offers a file of this name to (its suffix is one of theirs)."""
    low = name.lower()
    return [s for _, s in TRACE_SOURCES.items() if low.endswith(s.suffixes)]


@dataclass
class TraceFacts:
    """What a trace says about itself besides its events (TraceMeta's inputs, as kineto's top level names
    them): the GPUs, the distributed setup, the time base, the recording's options, its host and id."""

    device_properties: list[dict[str, Any]] = field(default_factory=list)
    distributed: dict[str, Any] | None = None
    base_time_ns: int | None = None
    record_shapes: bool | None = None
    with_stack: bool | None = None
    profile_memory: bool | None = None
    host_name: str | None = None
    trace_id: str | None = None


def table_from_events(path: str | Path, events: Iterable[dict], facts: TraceFacts | None = None) -> EventTable:
    """An EventTable from neutral events (dicts in the Chrome trace-event form, see the module's docstring),
    built exactly as a kineto trace's: the same column decoding, links, nesting and damage flags; CUDA-graph
    replays attributed where the events hold their captures. A trace without events is a TraceError."""
    import msgspec

    from kernlint.trace.graphs import attribute_replays
    from kernlint.trace.schema import RawTrace
    from kernlint.trace.table import build_event_table

    facts = facts or TraceFacts()
    encode = msgspec.json.Encoder().encode
    try:
        raw = RawTrace(trace_events=[encode(e) for e in events], deviceProperties=facts.device_properties,
                       distributedInfo=facts.distributed, baseTimeNanoseconds=facts.base_time_ns,
                       record_shapes=facts.record_shapes, with_stack=facts.with_stack,
                       profile_memory=facts.profile_memory, host_name=facts.host_name, trace_id=facts.trace_id,
                       events_at="$")
        table = build_event_table(raw, path)
        del raw
        attribute_replays(table)
    except MemoryError:
        raise TraceError(path, "out of memory while reading; a smaller profiling window or a machine with more "
                               "memory is needed") from None
    except RecursionError:
        raise TraceError(path, "nested too deeply to analyse") from None
    return table
