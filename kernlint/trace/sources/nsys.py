"""The second trace source: Nsight Systems' SQLite export (`nsys export --type sqlite`), plain or gzipped.

What it reads, into the neutral events of kernlint.trace.sources (kineto's categories and names, so that the
names table and every rule read them as they read a kineto trace's):
- CUPTI_ACTIVITY_KIND_KERNEL: `kernel` events on their device (pid) and stream (tid), start/end ns -> us,
  the demangled name (as kineto writes it), correlationId, graphNodeId where present (`--cuda-graph-trace=node`);
- CUPTI_ACTIVITY_KIND_RUNTIME: `cuda_runtime` / `cuda_driver` calls on their thread (globalTid: pid and tid),
  the name from StringIds without the API version nsys appends (`cudaLaunchKernel_v7000` -> cudaLaunchKernel),
  correlationId: what links a kernel to its launch;
- NVTX_EVENTS: push/pop and start/end ranges on their thread (text, or textId into StringIds). The ranges of
  torch's emit_nvtx (`aten::copy_, seq = 3, op_id = 7`) are the ops kineto records as `cpu_op` (the name
  without the suffix); every other range is a `user_annotation` (trace/names.py: nvtx_range);
- CUPTI_ACTIVITY_KIND_MEMCPY / _MEMSET: `gpu_memcpy` / `gpu_memset`, named as kineto names them
  (`Memcpy DtoH (Device -> Pageable)`: the host sync rules read that name);
- synchronization: the runtime calls (cudaStreamSynchronize, cudaEventSynchronize, ...) are what the sync rules
  read; CUPTI_ACTIVITY_KIND_SYNCHRONIZATION rows repeat them on the device side and are not read.
Correlation ids are per process. An export of several processes (one per GPU under torchrun) is read as one
entry per process (`parts`, `read(..., part="pid-N")`), each with its ids as recorded and `distributedInfo`
{rank, world_size}: kineto's one trace per rank. Read whole, each process's ids are moved apart by its index
<< 40, so that a kernel links to its own process's call.
Metadata: the GPUs of TARGET_INFO_GPU (when the export has it), the epoch time base
(TARGET_INFO_SESSION_START_TIME), the host (TARGET_INFO_SYSTEM_ENV Hostname), the session id. No Python stacks,
shapes or memory events: the rules that need them are not applicable.

sqlite3 is imported only when a file is read; the database is opened read-only and immutable. A file that is
not an SQLite database, an SQLite database that is no nsys export, and a damaged one are each one TraceError.
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from kernlint.errors import TraceError
from kernlint.fileio import NotRegularFileError, open_regular
from kernlint.trace import names
from kernlint.trace.sources import TraceFacts, TraceSource, read_head, register, table_from_events

if TYPE_CHECKING:
    from kernlint.trace.table import EventTable

SQLITE_MAGIC = b"SQLite format 3\x00"
_GZIP_MAGIC = b"\x1f\x8b"
# Tables that make an SQLite file an nsys export: the string table and at least one activity table.
_STRINGS = "StringIds"
_ACTIVITY = ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME", "NVTX_EVENTS")
_PID_SHIFT = 24               # globalTid = (vm << 56) | (pid << 24) | tid
_ID_MASK = (1 << 24) - 1
_PROCESS_ID_SHIFT = 40        # correlation ids of the k-th process are moved by k << 40
# NVTX event types (ENUM_NSYS_EVENT_TYPE) that are ranges: NvtxPushPopRange, NvtxStartEndRange.
_NVTX_RANGE_TYPES = ("NvtxPushPopRange", "NvtxStartEndRange")
_NVTX_RANGE_IDS = (59, 60)    # their ids when the export has no enum table
_FOREIGN = "an SQLite database but not an Nsight Systems export"


def sniff(head: bytes) -> bool:
    return head.startswith(SQLITE_MAGIC)


def recognize(path: Path) -> str | None:
    """None for an nsys export (an SQLite file with its tables), else why not."""
    head = read_head(path, len(SQLITE_MAGIC))
    if head is None:
        return "cannot read it"
    if not sniff(head):
        return "not an SQLite database"
    import sqlite3

    try:
        with _Database(Path(path)) as db:
            db.require_export()
            db.rows(_STRINGS, ("id",))[:1]   # the pages past the schema's are readable too
    except TraceError as exc:
        # A foreign database was read and is no trace; a damaged one could not be read (incomplete verdict).
        return exc.problem if exc.problem.startswith(_FOREIGN) else f"cannot read: {exc.problem}"
    except sqlite3.DatabaseError as exc:
        return f"cannot read: damaged SQLite database ({exc})"
    return None


class _Database:
    """An nsys export opened read-only (a gzip inflated into a temporary file first, at most `max_bytes`)."""

    def __init__(self, path: Path, max_bytes: int | None = None) -> None:
        self.path = path
        self.max_bytes = max_bytes
        self._temporary: str | None = None
        self.db = None

    def __enter__(self) -> _Database:
        import sqlite3

        path = self.path
        try:
            with open_regular(path) as f:
                gzipped = f.read(2) == _GZIP_MAGIC
                size = os.fstat(f.fileno()).st_size
        except NotRegularFileError as exc:
            raise TraceError(path, "is a folder, not a trace file" if exc.is_folder else
                             f"not a regular file ({exc.kind})") from None
        except OSError as exc:
            raise TraceError(path, f"cannot read: {exc.strerror or exc}") from None
        where = path
        if gzipped:
            from kernlint.trace.load import DEFAULT_MAX_TRACE_BYTES, read_trace_bytes

            data = read_trace_bytes(path, self.max_bytes or DEFAULT_MAX_TRACE_BYTES)
            if not bytes(data[:len(SQLITE_MAGIC)]) == SQLITE_MAGIC:
                raise TraceError(path, "a gzip file that holds no SQLite database")
            fd, self._temporary = tempfile.mkstemp(prefix="kernlint-nsys-", suffix=".sqlite")
            with os.fdopen(fd, "wb") as out:
                out.write(data)
            del data
            where = Path(self._temporary)
        elif self.max_bytes is not None and size > self.max_bytes:
            raise TraceError(path, f"is {size:,} bytes, more than the limit of {self.max_bytes:,}; raise "
                                   "--max-trace-bytes to read it")
        try:
            self.db = sqlite3.connect(f"{where.resolve().as_uri()}?mode=ro&immutable=1", uri=True)
            self.tables = {n for (n,) in self.db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        except sqlite3.DatabaseError as exc:
            self.__exit__()
            raise TraceError(path, f"damaged or not an SQLite database ({exc})") from None
        return self

    def __exit__(self, *exc) -> None:
        if self.db is not None:
            self.db.close()
            self.db = None
        if self._temporary is not None:
            try:
                os.unlink(self._temporary)
            except OSError:
                pass
            self._temporary = None

    def require_export(self) -> None:
        if _STRINGS not in self.tables or not any(t in self.tables for t in _ACTIVITY):
            raise TraceError(self.path, f"{_FOREIGN} (no StringIds and CUPTI_ACTIVITY_KIND_KERNEL / _RUNTIME / "
                                        "NVTX_EVENTS tables)")

    def rows(self, table: str, columns: tuple[str, ...]) -> list[tuple]:
        """Every row of `table` with these columns (NULL for a column this export's schema lacks); [] when the
        table is absent."""
        if table not in self.tables:
            return []
        have = {r[1] for r in self.db.execute(f"PRAGMA table_info([{table}])")}
        picked = ", ".join(f"[{c}]" if c in have else "NULL" for c in columns)
        return self.db.execute(f"SELECT {picked} FROM [{table}]").fetchall()


def _us(ns) -> float | None:
    return ns / 1000.0 if isinstance(ns, (int, float)) and not isinstance(ns, bool) else None


def _dur(start, end) -> float | None:
    if isinstance(start, (int, float)) and isinstance(end, (int, float)):
        return (end - start) / 1000.0
    return None


def _int(value) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def read(path: Path, max_bytes: int | None = None, part: str | None = None) -> EventTable:
    """The export as one EventTable: every process of it, or (`part`, `pid-N`) that process's events alone,
    with `distributedInfo` {rank, world_size} where the export holds two or more processes that ran device
    work (ranks in the order of the devices they ran on: nsys records no rank). kineto writes one trace per
    rank; so does discovery, which lists such an export as one entry per process (`parts`)."""
    import sqlite3

    path = Path(path)
    try:
        with _Database(path, max_bytes) as db:
            db.require_export()
            only = facts_extra = None
            if part is not None:
                processes = _device_processes(db)
                pids = {f"pid-{(g >> _PID_SHIFT) & _ID_MASK}": g for g in processes}
                only = pids.get(part)
                if only is None:
                    raise TraceError(path, f"no process {part} ran device work in this export (it holds "
                                           f"{', '.join(pids) or 'none'})")
                if len(processes) > 1:
                    facts_extra = {"rank": processes.index(only), "world_size": len(processes)}
            events, facts = _events(db, only)
            facts.distributed = facts_extra
    except sqlite3.DatabaseError as exc:
        raise TraceError(path, f"damaged SQLite database ({exc})") from None
    except MemoryError:
        raise TraceError(path, "out of memory while reading; a smaller export or a machine with more memory is "
                               "needed") from None
    where = path if part is None else path.with_name(f"{path.name}#{part}")
    return table_from_events(where, events, facts)


def parts(path: Path) -> list[str]:
    """`pid-N` of each process that ran device work, in rank order (a file's entries when two or more)."""
    import sqlite3

    try:
        with _Database(Path(path)) as db:
            db.require_export()
            return [f"pid-{(g >> _PID_SHIFT) & _ID_MASK}" for g in _device_processes(db)]
    except sqlite3.DatabaseError as exc:
        raise TraceError(path, f"damaged SQLite database ({exc})") from None


def _device_processes(db: _Database) -> list[int]:
    """The globalPids of the processes that ran kernels, copies or memsets, by (first device, pid)."""
    first: dict[int, int] = {}
    for table in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET"):
        for device, gpid in db.rows(table, ("deviceId", "globalPid")):
            if _int(gpid) is not None:
                first[gpid] = min(first.get(gpid, 1 << 62), device if _int(device) is not None else 1 << 62)
    return sorted(first, key=lambda g: (first[g], g))


def _events(db: _Database, only: int | None = None) -> tuple[list[dict], TraceFacts]:
    """The export's events (with `only`, a globalPid: that process's alone) and its facts."""
    strings = dict(db.rows(_STRINGS, ("id", "value")))

    def text(value) -> str | None:
        if isinstance(value, str):
            return value
        return strings.get(value) if value is not None else None

    kernels = db.rows("CUPTI_ACTIVITY_KIND_KERNEL", (
        "start", "end", "deviceId", "streamId", "correlationId", "globalPid", "demangledName", "shortName",
        "graphNodeId", "graphId", "gridX", "gridY", "gridZ", "blockX", "blockY", "blockZ"))
    runtime = db.rows("CUPTI_ACTIVITY_KIND_RUNTIME", ("start", "end", "globalTid", "correlationId", "nameId"))
    copies = db.rows("CUPTI_ACTIVITY_KIND_MEMCPY", (
        "start", "end", "deviceId", "streamId", "correlationId", "globalPid", "bytes", "copyKind", "srcKind",
        "dstKind", "graphNodeId"))
    sets = db.rows("CUPTI_ACTIVITY_KIND_MEMSET", (
        "start", "end", "deviceId", "streamId", "correlationId", "globalPid", "bytes", "memKind", "graphNodeId"))

    # Each process's correlation ids apart from the others' (per-process counters).
    processes = sorted({g for g in (
        *(r[5] for r in kernels), *(r[5] for r in copies), *(r[5] for r in sets),
        *((r[2] >> _PID_SHIFT) << _PID_SHIFT for r in runtime if _int(r[2]) is not None)) if _int(g) is not None})
    offset = {g: k << _PROCESS_ID_SHIFT for k, g in enumerate(processes)}
    if only is not None:   # one process: its ids as nsys recorded them
        offset = {}
        kernels = [r for r in kernels if r[5] == only]
        copies = [r for r in copies if r[5] == only]
        sets = [r for r in sets if r[5] == only]
        runtime = [r for r in runtime if _int(r[2]) is not None and (r[2] >> _PID_SHIFT) << _PID_SHIFT == only]

    def correlation(value, global_pid):
        return value + offset.get(global_pid, 0) if _int(value) is not None and value >= 0 else value

    def process_of(global_tid) -> tuple[object, object, object]:
        """(pid, tid, globalPid) of a globalTid."""
        if _int(global_tid) is None:
            return global_tid, global_tid, None
        return (global_tid >> _PID_SHIFT) & _ID_MASK, global_tid & _ID_MASK, (global_tid >> _PID_SHIFT) << _PID_SHIFT

    events: list[dict] = []
    for start, end, device, stream, corr, gpid, demangled, short, node, graph, gx, gy, gz, bx, by, bz in kernels:
        args = {"device": device, "stream": stream, "correlation": correlation(corr, gpid)}
        if node is not None:
            args["graph node id"] = node
        if graph is not None:
            args["graph id"] = graph
        if gx is not None:
            args["grid"] = [gx, gy, gz]
            args["block"] = [bx, by, bz]
        events.append({"ph": "X", "cat": "kernel", "name": text(demangled) or text(short), "pid": device,
                       "tid": stream, "ts": _us(start), "dur": _dur(start, end), "args": args})
    for start, end, gtid, corr, name_id in runtime:
        name, cat = text(name_id), "cuda_runtime"
        if name is not None:
            name, cat = names.nsys_runtime_name(name)
        pid, tid, gpid = process_of(gtid)
        events.append({"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": _us(start),
                       "dur": _dur(start, end), "args": {"correlation": correlation(corr, gpid)}})
    for start, end, device, stream, corr, gpid, nbytes, kind, src, dst, node in copies:
        args = {"device": device, "stream": stream, "correlation": correlation(corr, gpid), "bytes": nbytes}
        if node is not None:
            args["graph node id"] = node
        events.append({"ph": "X", "cat": "gpu_memcpy", "name": names.nsys_memcpy_name(kind, src, dst),
                       "pid": device, "tid": stream, "ts": _us(start), "dur": _dur(start, end), "args": args})
    for start, end, device, stream, corr, gpid, nbytes, kind, node in sets:
        args = {"device": device, "stream": stream, "correlation": correlation(corr, gpid), "bytes": nbytes}
        if node is not None:
            args["graph node id"] = node
        events.append({"ph": "X", "cat": "gpu_memset", "name": names.nsys_memset_name(kind), "pid": device,
                       "tid": stream, "ts": _us(start), "dur": _dur(start, end), "args": args})
    range_types = {i for i, n in db.rows("ENUM_NSYS_EVENT_TYPE", ("id", "name")) if n in _NVTX_RANGE_TYPES}
    for start, end, kind, message, text_id, gtid in db.rows(
            "NVTX_EVENTS", ("start", "end", "eventType", "text", "textId", "globalTid")):
        if kind not in (range_types or _NVTX_RANGE_IDS):
            continue   # marks, categories, domain and string registrations
        pid, tid, gpid = process_of(gtid)
        if only is not None and gpid != only:
            continue
        label = text(message) if message is not None else text(text_id)
        name, cat = names.nvtx_range(label) if label is not None else (None, "user_annotation")
        events.append({"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": _us(start),
                       "dur": _dur(start, end)})
    return events, _facts(db)


def _facts(db: _Database) -> TraceFacts:
    facts = TraceFacts(record_shapes=False, with_stack=False, profile_memory=False)
    gpus = db.rows("TARGET_INFO_GPU", ("id", "cuDevice", "name", "totalMemory", "smCount", "computeMajor",
                                       "computeMinor", "uuid"))
    for gid, cu_device, name, memory, sms, major, minor, uuid in gpus:
        props = {"id": cu_device if cu_device is not None else gid, "name": name, "totalGlobalMem": memory,
                 "numSms": sms, "computeMajor": major, "computeMinor": minor, "uuid": uuid}
        facts.device_properties.append({k: v for k, v in props.items() if v is not None})
    start = db.rows("TARGET_INFO_SESSION_START_TIME", ("utcEpochNs", "systemClockNs"))
    if start and _int(start[0][0]) is not None:
        clock = _int(start[0][1])
        if clock is None:
            details = db.rows("ANALYSIS_DETAILS", ("startTime",))
            clock = _int(details[0][0]) if details else None
        facts.base_time_ns = start[0][0] - (clock or 0)
    for name, value in db.rows("TARGET_INFO_SYSTEM_ENV", ("name", "value")):
        if name == "Hostname" and isinstance(value, str) and value.strip():
            facts.host_name = value.strip()
    for name, value in db.rows("META_DATA_CAPTURE", ("name", "value")):
        if name == "PROFILING_SESSION_UUID" and isinstance(value, str) and value.strip():
            facts.trace_id = value.strip()
    return facts


NSYS = register(TraceSource(
    name="nsys",
    summary="Nsight Systems SQLite export (nsys export --type sqlite: .sqlite, .sqlite.gz when named)",
    suffixes=(".sqlite",),
    sniff=sniff,
    read=read,
    recognize=recognize,
    parts=parts,
))
