"""Capture traces and the replay traces they belong to.

vLLM (>= 0.26) writes the CUDA-graph capture into a trace of its own (`graph_capture_rank_0.*.pt.trace.json.gz`)
and the serving profile into another; SGLang writes `capture_traces/bs_*`. A replay trace alone shows each
graph as one launch; with its capture, kernlint.trace.graphs attributes every replayed kernel. Files are
told apart by content, not name: a capture trace records stream captures and launches no graph; a replay
trace launches graphs.

A capture trace pairs with a replay trace by content: one light pass over each (no event table) reads the
launches recorded in every stream capture (their kind, the kernel they name where they do, the category of
the op that launched them) and the device events every graph launch ran, and a capture trace is paired with
a replay trace of the same rank only when one of its captures aligns with one of the replay's graphs
(kernlint.trace.graph_align, as the attribution itself does). Each of the replay trace's graphs takes the
capture traces it aligns with best (the fewest edits; then one of its own process, then the latest recorded
before it), so a folder of two configurations (vLLM's full-graph decode and piecewise prefill, each with its
capture trace) pairs each replay trace with its own capture. The notes say which replays align with which
capture traces, and which align with none (judged from the kernel order only).

A capture trace is always checked on its own: outside its stream captures it is a normal trace (warm-up
runs, eager code). Paired, its capture windows are merged into the replay trace(s) it serves and left out of
its own check (`CapturePairing.outside_captures`), so the captured launches are judged once; unpaired, it is
checked whole. Given explicitly (`--capture FILE`), a capture goes with every replay trace checked with it and
is never checked itself; the notes still say which replays it aligns with.
"""
from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import msgspec

from kernlint.errors import TraceError
from kernlint.trace import names
from kernlint.trace.graph_align import KernelTokens, LaunchTokens, Vocabulary, align, default_max_edits, launch_kind
from kernlint.trace.kinds import CATEGORY_KIND, DEVICE_KINDS, RUNTIME_CATEGORIES
from kernlint.trace.load import PlacedEvent, decode_trace, read_trace_bytes


class _HostEvent(PlacedEvent, gc=False):
    args: msgspec.Raw = msgspec.Raw(b"")


class _Args(msgspec.Struct, gc=False):
    correlation: object = None
    kernel: object = None


_event_decoder = msgspec.json.Decoder(_HostEvent)
_args_decoder = msgspec.json.Decoder(_Args)
_DEVICE_CATS = {c: k for c, k in CATEGORY_KIND.items() if k in DEVICE_KINDS}
_OP_CATS = {c for c, k in CATEGORY_KIND.items() if k == "op"}


@dataclass(frozen=True)
class GraphRole:
    """What one trace holds of CUDA graphs, and whose it is."""

    path: Path
    captures: bool      # records stream captures
    replays: bool       # launches graphs
    rank: int | None
    pids: frozenset[str]
    start_us: float | None = None   # the first runtime call, on the epoch when the trace says how
    # Each stream capture's launches: (kind, kernel name or "", launching op's category or None).
    windows: tuple[tuple[tuple[str, str, str | None], ...], ...] = ()
    # Each distinct replayed sequence, (kind, name, category) per device event, and how many graph launches
    # ran it.
    replayed: tuple[tuple[tuple[tuple[str, str, str], ...], int], ...] = ()

    @classmethod
    def none(cls, path: Path, rank: int | None = None) -> GraphRole:
        """The role of a trace that neither captures nor replays a graph (or whose source pairs no captures)."""
        return cls(Path(path), False, False, rank, frozenset())

    @property
    def replay_count(self) -> int:
        return sum(n for _, n in self.replayed)


@dataclass
class CapturePairing:
    """The traces to check, each with the capture traces merged into it, and the captures used up."""

    checked: list[Path]
    captures: dict[str, list[str]] = field(default_factory=dict)   # replay trace -> its capture traces
    # Capture traces merged into a replay trace: checked on their own outside their capture windows.
    outside_captures: set[str] = field(default_factory=set)
    notes: list[str] = field(default_factory=list)


def _number(value) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def graph_role(path: Path, max_bytes: int) -> GraphRole:
    """Reads the trace's top level and, in one pass, what pairing compares: runtime calls (captures, graph
    launches, launches recorded in a capture), ops around those launches, and the device events graph
    launches ran (no event table)."""
    data = read_trace_bytes(path, max_bytes)
    if b"Capture" not in data and b"GraphLaunch" not in data:   # most traces: no decoding at all
        return GraphRole.none(path)
    raw = decode_trace(data, path)
    del data
    captures = replays = False
    pids: set[str] = set()
    first: float | None = None
    runtime: list[tuple] = []   # ts, dur, thread, name, correlation, kernel named by the launch (or "")
    ops: dict[tuple, list[tuple[float, float, str]]] = {}         # thread -> (ts, end, name)
    device: list[tuple[float, str, str, object]] = []             # ts, kind, name, correlation
    for r in raw.trace_events:
        try:
            e = _event_decoder.decode(r)
        except msgspec.DecodeError:
            continue
        if not isinstance(e.name, str) or not isinstance(e.cat, str):
            continue
        ts = _number(e.ts)
        if e.cat in _OP_CATS:
            if ts is not None:
                ops.setdefault((e.pid, e.tid), []).append((ts, ts + (_number(e.dur) or 0.0), e.name))
            continue
        kind = _DEVICE_CATS.get(e.cat)
        if kind is None and e.cat not in RUNTIME_CATEGORIES:
            continue
        if kind is not None:
            args = _decode_args(e.args)
            if ts is not None and args.correlation is not None:
                device.append((ts, kind, e.name, args.correlation))
            continue
        pids.add(str(e.pid))
        if ts is not None:
            first = ts if first is None else min(first, ts)
        begin = bool(names.GRAPH_CAPTURE_BEGIN.match(e.name))
        graph = not begin and names.is_graph_launch(e.name)
        captures |= begin
        replays |= graph
        # What the sequences need: captures' edges, graph launches, and launch calls (those in a capture).
        if ts is not None and (begin or graph or _is_launch(e.name) or names.GRAPH_CAPTURE_END.match(e.name)):
            args = _decode_args(e.args)
            kernel = args.kernel if isinstance(args.kernel, str) else ""
            runtime.append((ts, _number(e.dur) or 0.0, (e.pid, e.tid), e.name, args.correlation, kernel))
    dist = raw.distributedInfo if isinstance(raw.distributedInfo, dict) else {}
    rank = dist.get("rank") if isinstance(dist.get("rank"), int) else None
    base = raw.baseTimeNanoseconds if isinstance(raw.baseTimeNanoseconds, int) else 0
    start = None if first is None else base / 1000 + first
    windows = _capture_sequences(runtime, ops) if captures else ()
    replayed = _replayed_sequences(runtime, device) if replays else ()
    return GraphRole(path, captures, replays, rank, frozenset(pids), start, windows, replayed)


def role_of_table(table, path: Path | None = None) -> GraphRole:
    """graph_role of a trace loaded already (an EventTable, before any capture is merged into it): what a
    worker that checked the trace hands back, so that pairing reads no file again. The same fields from the
    table's columns: runtime calls by name (each distinct name classified once), the launches inside stream
    captures with their innermost op's category, and the device events each graph launch ran."""
    import numpy as np

    columns = table.columns
    path = Path(path if path is not None else table.meta.path)
    if not len(columns):
        return GraphRole.none(path, table.meta.rank)
    codes, values = columns.coded("name")
    runtime = columns["kind"] == "runtime"
    begin = np.fromiter((bool(names.GRAPH_CAPTURE_BEGIN.match(v)) if isinstance(v, str) else False
                         for v in values), dtype=bool, count=len(values))
    graph = np.fromiter((not b and isinstance(v, str) and names.is_graph_launch(v) for v, b in zip(values, begin)),
                        dtype=bool, count=len(values))
    captures = bool((begin[codes] & runtime).any())
    replays = bool((graph[codes] & runtime).any())
    if not captures and not replays:   # most traces
        return GraphRole.none(path, table.meta.rank)
    end = np.fromiter((isinstance(v, str) and bool(names.GRAPH_CAPTURE_END.match(v)) for v in values), dtype=bool,
                      count=len(values))
    launch = np.fromiter((isinstance(v, str) and _is_launch(v) for v in values), dtype=bool, count=len(values))
    ts, dur = columns["ts"], columns["dur"]
    pid, tid = columns["pid"], columns["tid"]
    correlation = columns["correlation"]
    kernel = columns["launch_kernel"]
    timed = runtime & ~np.isnan(ts)
    pids = frozenset(str(p) for p in np.unique(pid[runtime]).tolist())
    first = float(ts[timed].min()) if timed.any() else None
    wanted = (begin | graph | end | (launch if captures else np.zeros_like(launch)))[codes] & timed
    rows = np.flatnonzero(wanted)
    calls = [(float(ts[r]), 0.0 if np.isnan(dur[r]) else float(dur[r]), (pid[r], tid[r]), values[codes[r]],
              int(correlation[r]) if correlation[r] >= 0 else None, kernel[r] if isinstance(kernel[r], str) else "")
             for r in rows.tolist()]
    windows: tuple = ()
    if captures:
        threads = {(pid[r], tid[r]) for r in np.flatnonzero(begin[codes] & timed).tolist()}
        op_rows = np.flatnonzero((columns["kind"] == "op") & ~np.isnan(ts))
        ops: dict[tuple, list[tuple[float, float, str]]] = {}
        for r in op_rows.tolist():
            thread = (pid[r], tid[r])
            if thread in threads:
                ops.setdefault(thread, []).append((float(ts[r]), float(ts[r]) + (0.0 if np.isnan(dur[r])
                                                                                   else float(dur[r])),
                                                   values[codes[r]]))
        windows = _capture_sequences(calls, ops)
    replayed: tuple = ()
    if replays:
        launched = {c[4] for c in calls if c[4] is not None and names.is_graph_launch(c[3])}
        device = np.isin(columns["kind"], list(DEVICE_KINDS)) & ~np.isnan(ts) & (correlation >= 0)
        device &= np.isin(correlation, np.fromiter(launched, dtype=np.int64, count=len(launched)))
        events = [(float(ts[r]), columns["kind"][r], values[codes[r]], int(correlation[r]))
                  for r in np.flatnonzero(device).tolist()]
        replayed = _replayed_sequences(calls, events)
    base = table.meta.base_time_ns or 0
    start = None if first is None else base / 1000 + first
    return GraphRole(path, captures, replays, table.meta.rank, pids, start, windows, replayed)


def _decode_args(raw: msgspec.Raw) -> _Args:
    if not raw:
        return _Args()
    try:
        return _args_decoder.decode(raw)
    except msgspec.DecodeError:
        return _Args()


def _capture_sequences(runtime: list, ops: dict) -> tuple:
    """Each stream capture (BeginCapture to the next EndCapture of its thread): its launches in issue order,
    with the category of the innermost op around each (ops nest by time on one thread)."""
    runtime.sort(key=lambda x: x[0])
    by_thread: dict[tuple, list] = {}
    spans: list[tuple[tuple, float, float]] = []
    open_at: dict[tuple, float] = {}
    for event in runtime:
        ts, _, thread, name, _, _ = event
        by_thread.setdefault(thread, []).append(event)
        if names.GRAPH_CAPTURE_BEGIN.match(name):
            open_at.setdefault(thread, ts)
        elif names.GRAPH_CAPTURE_END.match(name) and thread in open_at:
            spans.append((thread, open_at.pop(thread), ts))
    innermost: dict[int, str | None] = {}
    for thread in {t for t, _, _ in spans}:
        launches = [e for e in by_thread[thread] if _is_launch(e[3])]
        innermost.update(_innermost_ops(launches, ops.get(thread, [])))
    out = []
    for thread, begin, end in sorted(spans, key=lambda s: s[1]):
        calls = by_thread[thread]
        lo = bisect.bisect_right(calls, begin, key=lambda e: e[0])
        hi = bisect.bisect_left(calls, end, key=lambda e: e[0])
        out.append(tuple((launch_kind(e[3]), e[5], innermost.get(id(e))) for e in calls[lo:hi] if _is_launch(e[3])))
    return tuple(out)


def _is_launch(name: str) -> bool:
    return names.classify_runtime(name) in ("launch", "memcpy_call") and not names.is_graph_launch(name)


def _innermost_ops(launches: list, ops: list[tuple[float, float, str]]) -> dict[int, str | None]:
    """id(launch) -> the category of the innermost op that holds it: one sweep over the thread's ops (sorted by
    start, outer first) and its launches (sorted by time), with the stack of ops still open."""
    ops = sorted(ops, key=lambda o: (o[0], -o[1]))
    out: dict[int, str | None] = {}
    stack: list[tuple[float, float, str]] = []
    i = 0
    for launch in launches:
        ts = launch[0]
        while i < len(ops) and ops[i][0] <= ts:
            while stack and stack[-1][1] < ops[i][0]:
                stack.pop()
            stack.append(ops[i])
            i += 1
        while stack and stack[-1][1] < ts:
            stack.pop()
        out[id(launch)] = names.classify_op(stack[-1][2]) if stack else None
    return out


def _replayed_sequences(runtime: list, device: list) -> tuple:
    """The device events each graph launch ran (linked by correlation id), in the order they ran; one entry per
    distinct sequence, with how many launches ran it."""
    graph = {corr: ts for ts, _, _, name, corr, _ in runtime if corr is not None and names.is_graph_launch(name)}
    ran: dict[object, list[tuple[float, str, str]]] = {}
    for ts, kind, name, corr in device:
        if corr in graph:
            ran.setdefault(corr, []).append((ts, kind, name))
    counts: dict[tuple, int] = {}
    for corr in sorted(ran, key=lambda c: graph[c]):
        sequence = tuple((kind, name, names.classify_kernel(name)) for _, kind, name in sorted(ran[corr]))
        counts[sequence] = counts.get(sequence, 0) + 1
    return tuple(counts.items())


@dataclass
class _Fit:
    """How well one capture trace fits one replayed sequence: the fewest edits over its captures."""

    capture: GraphRole
    edits: int


def _best_captures(replay: GraphRole, candidates: Sequence[GraphRole]) -> tuple[list[GraphRole], int]:
    """The capture traces the replay trace's graphs align with best, and how many of its graph launches
    align with any."""
    vocab = Vocabulary()
    windows = {id(c): [LaunchTokens.make([k for k, _, _ in w], [n for _, n, _ in w], [o for _, _, o in w], vocab)
                       for w in c.windows] for c in candidates}
    chosen: list[GraphRole] = []
    aligned = 0
    for sequence, count in replay.replayed:
        kernels = KernelTokens.make([k for k, _, _ in sequence], [n for _, n, _ in sequence],
                                    [c for _, _, c in sequence], vocab)
        fits: list[_Fit] = []
        for c in candidates:
            fewest = None
            for launches in windows[id(c)]:
                limit = default_max_edits(len(launches), len(kernels))
                found = align(launches, kernels, limit if fewest is None else min(limit, fewest))
                if found is not None and (fewest is None or found.edits < fewest):
                    fewest = found.edits
            if fewest is not None:
                fits.append(_Fit(c, fewest))
        if not fits:
            continue
        aligned += count
        # The fewest edits; then a capture of the replay's own process; then the latest recorded before it.
        best = min(fits, key=lambda f: (f.edits, not (f.capture.pids & replay.pids), not _before(f.capture, replay),
                                        -(f.capture.start_us if f.capture.start_us is not None else float("-inf"))))
        if best.capture not in chosen:
            chosen.append(best.capture)
    chosen.sort(key=lambda c: c.start_us if c.start_us is not None else float("-inf"))
    return chosen, aligned


def _before(capture: GraphRole, replay: GraphRole) -> bool:
    return capture.start_us is None or replay.start_us is None or capture.start_us <= replay.start_us


def pair_captures(files: Sequence[Path], max_bytes: int, explicit: Iterable[Path] = ()) -> CapturePairing:
    """Which of `files` are capture traces of which others. A file that records captures and launches no graph
    is the capture of the replay traces of its rank among `files` whose graphs it aligns with; paired, it is
    merged into them and checked on its own outside its capture windows; unpaired, checked whole. `explicit`
    captures (--capture) go with every replay trace and are never checked themselves; one that records no
    capture is a TraceError."""
    explicit = [Path(p) for p in explicit]
    roles = [graph_role(Path(f), max_bytes) for f in files] if len(files) > 1 or explicit else []
    given = []
    for p in explicit:
        role = graph_role(p, max_bytes)
        if not role.captures:
            raise TraceError(p, "records no CUDA-graph capture (no cudaStreamBeginCapture .. EndCapture): it "
                                "cannot be the --capture of a replay trace")
        given.append(role)
    return pair_roles(files, roles, given)


def pair_roles(files: Sequence[Path], roles: Sequence[GraphRole], given: Sequence[GraphRole] = ()) -> CapturePairing:
    """pair_captures from the traces' roles (read by graph_role, or made by the workers that checked them:
    role_of_table) and the roles of the --capture files (`given`)."""
    explicit = bool(given)
    replaying = [r for r in roles if r.replays]
    capture_only = [r for r in roles if r.captures and not r.replays]
    pairing = CapturePairing(checked=[Path(f) for f in files])
    serves: dict[Path, list[str]] = {}
    considered: set[Path] = set()
    for r in replaying:
        # A replay trace that holds its own captures needs none (unless captures are given).
        if r.captures and not explicit:
            continue
        total = r.replay_count
        if given:
            _, aligned = _best_captures(r, given)
            found = [str(c.path) for c in given]
            pairing.captures[str(r.path)] = found
            pairing.notes.append(_replay_note(r, found, aligned, total, given=True))
            continue
        candidates = [c for c in capture_only if c.rank == r.rank]
        if not candidates:
            continue
        considered |= {c.path for c in candidates}
        chosen, aligned = _best_captures(r, candidates)
        found = [str(c.path) for c in chosen]
        if found:
            pairing.captures[str(r.path)] = found
            for c in chosen:
                serves.setdefault(c.path, []).append(str(r.path))
        pairing.notes.append(_replay_note(r, found or [str(c.path) for c in candidates], aligned, total,
                                          given=False))
    for c in capture_only:
        if c.path in serves:
            pairing.outside_captures.add(str(c.path))
            pairing.notes.append(f"{c.path}: a capture trace, merged into the replay trace(s) "
                                 f"{', '.join(serves[c.path])} whose graphs it aligns with; checked on its own "
                                 "outside its capture windows")
        elif c.path in considered:
            pairing.notes.append(f"{c.path}: a capture trace whose captures align with no graph of the replay "
                                 "trace(s) of its rank: checked on its own, whole")
    return pairing


def _replay_note(r: GraphRole, captures: list[str], aligned: int, total: int, *, given: bool) -> str:
    where = ", ".join(captures)
    if not aligned:
        return (f"{r.path}: none of its {total} graph replay(s) aligns with the capture trace(s) {where}: not "
                "attributed (judged from the kernel order only)")
    line = f"{r.path}: {aligned} of {total} graph replay(s) align with the capture trace(s) {where}"
    if given:
        line += " (given with --capture)"
    line += ": attributed with them"
    if aligned < total:
        line += f"; {total - aligned} replay(s) align with no capture (judged from the kernel order only)"
    return line
