"""Capture traces and the replay traces they belong to.

vLLM (>= 0.26) writes the CUDA-graph capture into a trace of its own (`graph_capture_rank_0.*.pt.trace.json.gz`)
and the serving profile into another; SGLang writes `capture_traces/bs_*`. A replay trace alone shows each
graph as one launch; with its capture, kernlint.trace.graphs attributes every replayed kernel. Files are
told apart by content, not name: a capture trace records stream captures and launches no graph; a replay
trace launches graphs. A replay trace without captures of its own takes the latest capture trace of its
process (pid) and rank recorded before it (several capture files of one replay: name them with --capture).
Given explicitly (`--capture FILE`), a capture applies to every replay trace checked with it.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import msgspec

from kernlint.errors import TraceError
from kernlint.trace import names
from kernlint.trace.load import decode_trace, read_trace_bytes
from kernlint.trace.table import RUNTIME_CATEGORIES


class _HostEvent(msgspec.Struct, gc=False):
    cat: object = None
    name: object = None
    pid: object = None
    ts: object = None


_event_decoder = msgspec.json.Decoder(_HostEvent)


@dataclass(frozen=True)
class GraphRole:
    """What one trace holds of CUDA graphs, and whose it is."""

    path: Path
    captures: bool      # records stream captures
    replays: bool       # launches graphs
    rank: int | None
    pids: frozenset[str]
    start_us: float | None = None   # the first runtime call, on the epoch when the trace says how


@dataclass
class CapturePairing:
    """The traces to check, each with the capture traces merged into it, and the captures used up."""

    checked: list[Path]
    captures: dict[str, list[str]] = field(default_factory=dict)   # replay trace -> its capture traces
    notes: list[str] = field(default_factory=list)


def graph_role(path: Path, max_bytes: int) -> GraphRole:
    """Reads the trace's top level and the category, name and pid of each runtime event (no table)."""
    data = read_trace_bytes(path, max_bytes)
    if b"Capture" not in data and b"GraphLaunch" not in data:   # most traces: no decoding at all
        return GraphRole(path, False, False, None, frozenset())
    raw = decode_trace(data, path)
    del data
    captures = replays = False
    pids: set[str] = set()
    first: float | None = None
    for r in raw.trace_events:
        try:
            e = _event_decoder.decode(r)
        except msgspec.DecodeError:
            continue
        if e.cat not in RUNTIME_CATEGORIES or not isinstance(e.name, str):
            continue
        pids.add(str(e.pid))
        if isinstance(e.ts, (int, float)) and not isinstance(e.ts, bool):
            first = e.ts if first is None else min(first, e.ts)
        if names.GRAPH_CAPTURE_BEGIN.match(e.name):
            captures = True
        elif names.is_graph_launch(e.name):
            replays = True
    dist = raw.distributedInfo if isinstance(raw.distributedInfo, dict) else {}
    rank = dist.get("rank") if isinstance(dist.get("rank"), int) else None
    base = raw.baseTimeNanoseconds if isinstance(raw.baseTimeNanoseconds, int) else 0
    start = None if first is None else base / 1000 + first
    return GraphRole(path, captures, replays, rank, frozenset(pids), start)


def pair_captures(files: Sequence[Path], max_bytes: int, explicit: Iterable[Path] = ()) -> CapturePairing:
    """Which of `files` are capture traces of which others. A file that records captures and launches no graph
    is the capture of every replay trace of its process and rank among `files`; paired, it is merged into them
    and not checked on its own. `explicit` captures (--capture) go with every replay trace and are never
    checked themselves; one that records no capture is a TraceError."""
    explicit = [Path(p) for p in explicit]
    roles = [graph_role(Path(f), max_bytes) for f in files] if len(files) > 1 or explicit else []
    for p in explicit:
        role = graph_role(p, max_bytes)
        if not role.captures:
            raise TraceError(p, "records no CUDA-graph capture (no cudaStreamBeginCapture .. EndCapture): it "
                                "cannot be the --capture of a replay trace")
    replaying = [r for r in roles if r.replays]
    capture_only = [r for r in roles if r.captures and not r.replays]
    pairing = CapturePairing(checked=[])
    used: set[Path] = set()
    for r in replaying:
        # A replay trace that holds its own captures needs none; else the latest capture trace of its process
        # and rank recorded before it (one process can write several, each before the replays it serves).
        if r.captures and not explicit:
            continue
        mine = [c for c in capture_only if c.rank == r.rank and c.pids & r.pids
                and (c.start_us is None or r.start_us is None or c.start_us <= r.start_us)]
        if len(mine) > 1:
            mine = [max(mine, key=lambda c: c.start_us if c.start_us is not None else float("-inf"))]
        used |= {c.path for c in mine}
        found = [str(c.path) for c in mine] + [str(p) for p in explicit]
        if found:
            pairing.captures[str(r.path)] = found
            pairing.notes.append(f"{r.path}: graph replays attributed with the capture trace(s) "
                                 f"{', '.join(found)}")
    pairing.checked = [Path(f) for f in files if Path(f) not in used]
    for c in capture_only:
        if c.path in used:
            pairing.notes.append(f"{c.path}: a capture trace, merged into the replay trace(s) it belongs to "
                                 "(not checked on its own)")
    return pairing
