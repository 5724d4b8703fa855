"""Run identity: which traces are ranks of one distributed run, and which profiling cycle they belong to.

A folder does not say which traces belong together: it can hold several runs (two `kernlint run`s, a V100
and an A100 job that both had two ranks) and several profiling cycles of each rank (tensorboard_trace_handler
with `repeat > 1`). The traces themselves do: `distributedInfo` (backend, rank, world size, process-group
count), the GPU models in `deviceProperties`, the host and process that recorded them, the absolute time
window they cover, and the `ProfilerStep#N` ranges they hold.

`run_identity(table)` reduces one trace to a small `RunIdentity` (a few scalars and tuples, no events), and
`group_runs(items)` groups traces (EventTables, RunIdentity items, or per-trace summaries with an `identity`
attribute: the cross-rank stage runs from summaries made where each trace was loaded) into `RunGroup`s, one a
profiling cycle, and lists the ranked traces it could not place with the reason.

Absolute time, as verified on real traces:
- torch 2.x (kineto with `baseTimeNanoseconds`, seen on torch 2.11 + H200, torch 2.13 CPU, HTA's ROCm 6.2,
  Triton and cpu_only traces): `ts` is in microseconds relative to `baseTimeNanoseconds`, so the epoch time
  in ns is `baseTimeNanoseconds + ts * 1000`. The base is a whole second weeks before the trace (when the
  trace clock read zero, boot time or so): every trace of one machine shares it, and here even two VMs
  restored from one snapshot did, so the base alone tells nothing apart; base + ts does. For kernlint's own
  traces it lands 15-60 ms before the wall-clock time in the `.run.json` written right after the trace.
- Older kineto (HTA's 2023 traces, the 2021 kineto ResNet-50 sample): `ts` already is epoch microseconds
  (about 1.6e15 and up), and there is no `baseTimeNanoseconds`.
- Some traces have neither (HTA's cpu_only rank 34: `ts` about 1.2e12 with no base): time unknown.
"""
from __future__ import annotations

import math
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

import numpy as np

from kernlint.trace.arrays import unique_codes
from kernlint.trace.kinds import is_kind
from kernlint.trace.table import EventTable

__all__ = ["RunIdentity", "RunGroup", "RunGrouping", "UnmatchedTrace", "run_identity", "group_runs",
           "ranks_text"]

# `ts` above this many microseconds is epoch time already (1e15 us is 2001-09-09); a relative `ts` is
# microseconds since boot and never gets near it.
EPOCH_US_THRESHOLD = 1e15
# An absolute time before this (ns, 2001-09-09) means the base was not an epoch time after all.
_EPOCH_NS_FLOOR = 10**18
# Clock skew allowed between hosts when matching time windows: this many seconds, or this fraction of the
# longer window, whichever is larger. Traces from one host share a clock: their windows must overlap.
SLACK_S = 1.0
SLACK_FRACTION = 0.10

_STEP = re.compile(r"^ProfilerStep#(\d+)$")
# tensorboard_trace_handler's file name: `<host>_<pid>.<ms>.pt.trace.json[.gz]` (its default worker name is
# `<hostname>_<pid>`); the host part is trusted only when the pid in the name is a pid of the trace.
_TB_NAME = re.compile(r"^(?P<host>.+)_(?P<pid>\d+)\.\d+\.pt\.trace\.json(?:\.gz)?$")
_HOST_KINDS = ("op", "annotation", "python", "module")


@dataclass(frozen=True)
class RunIdentity:
    """What one trace says about the run, rank and profiling cycle it belongs to (no events)."""

    path: str
    rank: int | None = None
    world_size: int | None = None
    backend: str | None = None
    pg_count: int | None = None
    nccl_version: str | None = None
    default_pg_size: int | None = None
    gpu_models: tuple[str, ...] = ()   # sorted distinct deviceProperties names; () when none are listed
    host: str | None = None            # top-level host_name, else the tensorboard file name's host part
    pids: tuple[int, ...] = ()         # host processes of the trace's ops, annotations and Python frames
    trace_id: str | None = None
    start_ns: int | None = None        # epoch ns of the first event; None when the time base is unknown
    end_ns: int | None = None          # epoch ns of the last event end
    time_basis: str | None = None      # "epoch-us" (ts are epoch us), "base+ts" (baseTimeNanoseconds), None
    steps: tuple[int, ...] = ()        # ProfilerStep#N numbers present, sorted

    @property
    def has_time(self) -> bool:
        return self.start_ns is not None and self.end_ns is not None

    @property
    def duration_s(self) -> float | None:
        return (self.end_ns - self.start_ns) / 1e9 if self.has_time else None

    @property
    def distributed(self) -> bool:
        """A rank of a multi-rank run (a rank, and a world size other than 1)."""
        return self.rank is not None and self.world_size != 1


def _int(value: Any) -> int | None:
    if value is None or isinstance(value, bool):
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _text(value: Any) -> str | None:
    return (value.strip() or None) if isinstance(value, str) else None


def _default_pg_size(dist: dict) -> int | None:
    configs = dist.get("pg_config")
    if not isinstance(configs, list):
        return None
    for pg in configs:
        if isinstance(pg, dict) and (str(pg.get("pg_name")) == "0" or pg.get("pg_desc") == "default_pg"):
            return _int(pg.get("pg_size"))
    return None


def _absolute_window(table: EventTable) -> tuple[int | None, int | None, str | None]:
    columns = table.columns
    if not len(columns):
        return None, None, None
    ts = np.asarray(columns["ts"], dtype=np.float64)
    end = np.asarray(columns["end"], dtype=np.float64)
    ok = np.isfinite(ts)
    if not ok.any():
        return None, None, None
    first = float(ts[ok].min())
    last = float(np.nanmax(np.where(np.isfinite(end), end, ts)[ok]))
    if first > EPOCH_US_THRESHOLD:
        return _us_to_ns(first), _us_to_ns(last), "epoch-us"
    base = table.meta.base_time_ns
    if base is not None and base > 0 and base + first * 1000 >= _EPOCH_NS_FLOOR:
        return base + _us_to_ns(first), base + _us_to_ns(last), "base+ts"
    return None, None, None


def _us_to_ns(us: float) -> int:
    """Microseconds (float) to integer ns without losing the sub-microsecond part to float rounding."""
    whole = math.floor(us)
    return int(whole) * 1000 + round((us - whole) * 1000)


def _host_pids(table: EventTable) -> tuple[int, ...]:
    columns = table.columns
    codes, values = columns.coded("pid")   # each distinct pid once
    pids = set(values[unique_codes(codes[is_kind(columns, *_HOST_KINDS)], len(values))[0]].tolist())
    out = {_int(p) for p in pids}
    out.discard(None)
    return tuple(sorted(out))


def _steps(table: EventTable) -> tuple[int, ...]:
    columns = table.columns
    codes, distinct = columns.coded("name")
    names = distinct[unique_codes(codes[is_kind(columns, "op", "annotation")], len(distinct))[0]].tolist()
    found = set()
    for name in names:
        if isinstance(name, str) and name.startswith("ProfilerStep#"):
            m = _STEP.match(name)
            if m:
                found.add(int(m.group(1)))
    return tuple(sorted(found))


def run_identity(table: EventTable) -> RunIdentity:
    """The run identity of one loaded trace (computed once, then cached on the table)."""
    cached = table.caches.run_identity
    if cached is not None:
        return cached
    meta = table.meta
    dist = meta.distributed or {}
    pids = _host_pids(table)
    host = meta.host_name
    if host is None:
        m = _TB_NAME.match(Path(meta.path).name)
        if m and int(m.group("pid")) in pids:
            host = m.group("host")
    start, end, basis = _absolute_window(table)
    identity = RunIdentity(
        path=meta.path,
        rank=meta.rank,
        world_size=_int(dist.get("world_size")),
        backend=_text(dist.get("backend")),
        pg_count=_int(dist.get("pg_count")),
        nccl_version=_text(dist.get("nccl_version")),
        default_pg_size=_default_pg_size(dist),
        gpu_models=meta.gpu_models,
        host=host,
        pids=pids,
        trace_id=meta.trace_id,
        start_ns=start, end_ns=end, time_basis=basis,
        steps=_steps(table),
    )
    table.caches.run_identity = identity
    return identity


T = TypeVar("T")


@dataclass(frozen=True)
class UnmatchedTrace:
    """A ranked trace of a multi-rank run that is in no group, and why."""

    path: str
    rank: int | None
    reason: str


@dataclass
class RunGroup(Generic[T]):
    """The ranks of one run in one profiling cycle. `tables` holds what `group_runs` was given (EventTables,
    RunIdentity items or per-trace summaries), sorted by rank."""

    tables: list[T]
    identities: list[RunIdentity]
    ranks: list[int]
    world_size: int | None
    missing_ranks_count: int | None
    label: str
    notes: list[str] = field(default_factory=list)
    start_ns: int | None = None
    evidence: str = "time"   # "time" (windows overlap), "steps" (equal ProfilerStep#N sets), "none"


@dataclass
class RunGrouping(Generic[T]):
    groups: list[RunGroup[T]]
    unmatched: list[UnmatchedTrace]


def ranks_text(ranks: Sequence[int]) -> str:
    """`[0, 1, 2, 3, 7]` -> `0-3, 7` (runs of three or more as a range)."""
    ordered = sorted(set(ranks))
    parts: list[str] = []
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        if j - i >= 2:
            parts.append(f"{ordered[i]}-{ordered[j]}")
        else:
            parts.extend(str(r) for r in ordered[i:j + 1])
        i = j + 1
    return ", ".join(parts)


# ---- pairwise relations ------------------------------------------------------------------------------------

def _models(ident: RunIdentity) -> str:
    return ", ".join(ident.gpu_models) if ident.gpu_models else "no GPU listed"


def _disagreement(a: RunIdentity, b: RunIdentity) -> str | None:
    """Why a and b cannot be ranks of one run (None when they can). A field missing on both sides agrees;
    present on one side only, it disagrees for world size and GPU model, and agrees for backend and
    process-group count."""
    if a.world_size != b.world_size:
        return f"world size {_or_unknown(a.world_size)} differs from {_or_unknown(b.world_size)} of {b.path}"
    if a.gpu_models != b.gpu_models:
        return f"GPU model {_models(a)} differs from {_models(b)} of {b.path}"
    if a.backend and b.backend and a.backend != b.backend:
        return f"backend {a.backend} differs from {b.backend} of {b.path}"
    if a.pg_count is not None and b.pg_count is not None and a.pg_count != b.pg_count:
        return f"process-group count {a.pg_count} differs from {b.pg_count} of {b.path}"
    return None


def _or_unknown(value: Any) -> str:
    return "unknown" if value is None else str(value)


def _same_process(a: RunIdentity, b: RunIdentity) -> bool:
    """Recorded by one process (two cycles of one rank): the same known host and a shared pid."""
    return a.host is not None and a.host == b.host and bool(set(a.pids) & set(b.pids))


def _slack_ns(a: RunIdentity, b: RunIdentity) -> int:
    if a.host is not None and a.host == b.host:
        return 0  # one clock
    longest = max(a.end_ns - a.start_ns, b.end_ns - b.start_ns)
    return max(round(SLACK_S * 1e9), round(SLACK_FRACTION * longest))


@dataclass(frozen=True)
class _Link:
    strong: bool      # windows overlap, or equal ProfilerStep sets where time is unknown
    kind: str         # "time" or "steps"
    score: float      # ordering: larger is a better match
    gap_ns: int = 0   # time links: distance between the windows (0 when they overlap)


def _link(a: RunIdentity, b: RunIdentity) -> _Link | None:
    """The evidence that a and b were recorded in one profiling cycle, or None."""
    if a.has_time and b.has_time:
        gap = max(a.start_ns, b.start_ns) - min(a.end_ns, b.end_ns)
        if gap <= 0:
            shorter = max(1, min(a.end_ns - a.start_ns, b.end_ns - b.start_ns))
            return _Link(True, "time", 1.0 + min(1.0, -gap / shorter))
        if gap <= _slack_ns(a, b):
            return _Link(False, "time", -gap / 1e9, gap)
        return None
    if a.steps and b.steps:
        return _Link(True, "steps", 1.0) if a.steps == b.steps else None
    return None


def _no_evidence(ident: RunIdentity) -> bool:
    return not ident.has_time and not ident.steps


# ---- grouping ----------------------------------------------------------------------------------------------

def group_runs(items: Sequence[T]) -> RunGrouping[T]:
    """Group traces (EventTables, RunIdentity items, or summaries with an `identity`) into the ranks of one run
    and profiling cycle.

    Only traces with a rank and a world size other than 1 take part. Traces are grouped when they agree on
    backend, world size, process-group count and GPU models, come from different processes, and were
    recorded in one profiling cycle: their absolute time windows overlap (windows from different hosts may
    be up to max(1 s, 10 % of the window) apart, for clock skew); where time is unknown, their ProfilerStep#N
    sets are equal; where neither is known, only when every rank appears once among the compatible traces.
    Traces that cannot be told apart (a rank twice in one cycle) are not grouped. Every ranked trace that
    ends up in no group is listed in `unmatched` with the reason.
    """
    idents = [_identity_of(item) for item in items]
    members = [i for i, ident in enumerate(idents) if ident.distributed]
    clusters: list[tuple[list[int], str, list[str]]] = []   # (indexes, evidence, notes)
    unmatched: dict[int, str] = {}

    with_evidence = [i for i in members if not _no_evidence(idents[i])]
    without = [i for i in members if _no_evidence(idents[i])]

    # 0. The common case, in O(N): the ranks of one run, each once, every pair compatible, apart and linked
    #    (all windows share an instant, or all ProfilerStep sets are equal). Steps 1 and 2 would find the
    #    same one group, comparing every pair (a minute for 2,000 ranks).
    obvious = _one_obvious_run(idents, with_evidence)
    if obvious is not None:
        clusters.append(obvious)
        with_evidence = []

    # 1. Traces of one rank recorded at the same time (or with the same steps) cannot be told apart.
    ambiguous = _ambiguous(idents, with_evidence)
    unmatched.update(ambiguous)
    pool = [i for i in with_evidence if i not in ambiguous]

    # 2. Merge the best-matching pairs first, keeping every cluster one rank per process, pairwise
    #    compatible and pairwise linked.
    for cluster in _merge(idents, pool):
        if len(cluster) >= 2:
            links = [_link(idents[a], idents[b]) for a in cluster for b in cluster if a < b]
            kind = "time" if all(lk.kind == "time" for lk in links) else "steps"
            notes = []
            gaps = [lk.gap_ns for lk in links if not lk.strong]
            if gaps:
                notes.append(f"time windows of some ranks do not overlap (up to {max(gaps) / 1e9:.2f} s apart); "
                             f"matched allowing for clock skew between hosts")
            if kind == "steps":
                steps = idents[cluster[0]].steps
                notes.append(f"absolute time unknown: ranks matched by their ProfilerStep numbers "
                             f"({_steps_text(steps)})")
            clusters.append((cluster, kind, notes))
    # 3. Traces with neither time nor steps: grouped only when unambiguous.
    clusters_n, unmatched_n = _group_without_evidence(idents, without)
    clusters.extend(clusters_n)
    unmatched.update(unmatched_n)

    grouped = {i for cluster, _, _ in clusters for i in cluster}
    for i in members:
        if i not in grouped and i not in unmatched:
            unmatched[i] = _why_alone(idents, i, members, clusters)

    groups = _finish(items, idents, clusters)
    rows = [UnmatchedTrace(path=idents[i].path, rank=idents[i].rank, reason=reason)
            for i, reason in unmatched.items()]
    rows.sort(key=lambda u: (u.path, u.rank if u.rank is not None else -1))
    return RunGrouping(groups=groups, unmatched=rows)


def _one_obvious_run(idents: list[RunIdentity], pool: list[int]) -> tuple[list[int], str, list[str]] | None:
    """The pool as one group when every pair of it would be strongly linked, compatible, of distinct ranks
    and processes (what _ambiguous and _merge would then find); None when any of that is not plain."""
    if len(pool) < 2:
        return None
    members = [idents[i] for i in pool]
    first = members[0]
    if any(m.world_size != first.world_size or m.gpu_models != first.gpu_models for m in members):
        return None
    if len({m.backend for m in members if m.backend}) > 1 or len({m.pg_count for m in members
                                                                  if m.pg_count is not None}) > 1:
        return None
    if len({m.rank for m in members}) != len(members):
        return None
    processes = [(m.host, pid) for m in members if m.host is not None for pid in set(m.pids)]
    if len(set(processes)) != len(processes):
        return None
    if all(m.has_time for m in members):
        if max(m.start_ns for m in members) > min(m.end_ns for m in members):
            return None   # some pair may not overlap: the pairwise steps decide
        kind, notes = "time", []
    elif all(not m.has_time and m.steps for m in members) and all(m.steps == first.steps for m in members):
        kind = "steps"
        notes = [f"absolute time unknown: ranks matched by their ProfilerStep numbers ({_steps_text(first.steps)})"]
    else:
        return None
    return sorted(pool, key=lambda k: idents[k].rank), kind, notes


def _identity_of(item: Any) -> RunIdentity:
    if isinstance(item, RunIdentity):
        return item
    if isinstance(item, EventTable):
        return run_identity(item)
    return item.identity   # a per-trace summary, made where its trace was loaded


def _ambiguous(idents: list[RunIdentity], pool: list[int]) -> dict[int, str]:
    """Components of the strong-link graph (compatible, different processes) in which a rank appears twice."""
    parent = {i: i for i in pool}

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for n, a in enumerate(pool):
        for b in pool[n + 1:]:
            ia, ib = idents[a], idents[b]
            if _same_process(ia, ib) or _disagreement(ia, ib) is not None:
                continue
            link = _link(ia, ib)
            if link is not None and link.strong:
                parent[find(a)] = find(b)
    components: dict[int, list[int]] = {}
    for i in pool:
        components.setdefault(find(i), []).append(i)
    out: dict[int, str] = {}
    for comp in components.values():
        by_rank: dict[int, list[int]] = {}
        for i in comp:
            by_rank.setdefault(idents[i].rank, []).append(i)
        dups = {r: ix for r, ix in by_rank.items() if len(ix) > 1}
        if not dups:
            continue
        kind = "time" if all(idents[i].has_time for i in comp) else "steps"
        evidence = ("recorded at overlapping times" if kind == "time"
                    else "with the same ProfilerStep numbers")
        for i in comp:
            r = idents[i].rank
            if r in dups:
                others = [idents[j] for j in dups[r] if j != i]
                same = [o.path for o in others if o.trace_id and o.trace_id == idents[i].trace_id]
                if same:
                    out[i] = (f"rank {r} appears twice: {same[0]} is the same trace (equal trace_id); "
                              f"cannot tell which copy belongs to the run")
                else:
                    out[i] = (f"rank {r} appears {len(dups[r])} times among compatible traces {evidence} "
                              f"(also {', '.join(o.path for o in others)}): cannot tell which belong together")
            else:
                shown = ", ".join(f"rank {r} ({len(ix)} traces)" for r, ix in sorted(dups.items()))
                out[i] = (f"its run cannot be told apart from another one {evidence}: {shown}; "
                          f"cannot tell which traces belong together")
    return out


def _merge(idents: list[RunIdentity], pool: list[int]) -> list[list[int]]:
    """Constrained agglomeration: best links first; a merge must keep ranks and processes distinct and every
    pair of members compatible and linked."""
    edges = []
    for n, a in enumerate(pool):
        for b in pool[n + 1:]:
            ia, ib = idents[a], idents[b]
            if ia.rank == ib.rank or _same_process(ia, ib) or _disagreement(ia, ib) is not None:
                continue
            link = _link(ia, ib)
            if link is not None:
                edges.append((0 if link.strong else 1, -link.score, ia.path, ib.path, a, b))
    edges.sort()
    cluster_of = {i: [i] for i in pool}
    for *_, a, b in edges:
        ca, cb = cluster_of[a], cluster_of[b]
        if ca is cb or not _can_join(idents, ca, cb):
            continue
        ca.extend(cb)
        for i in cb:
            cluster_of[i] = ca
    seen: set[int] = set()
    out = []
    for i in pool:
        c = cluster_of[i]
        if id(c) not in seen:
            seen.add(id(c))
            out.append(sorted(c, key=lambda k: idents[k].rank))
    return out


def _can_join(idents: list[RunIdentity], ca: list[int], cb: list[int]) -> bool:
    if {idents[i].rank for i in ca} & {idents[i].rank for i in cb}:
        return False
    for a in ca:
        for b in cb:
            ia, ib = idents[a], idents[b]
            if _same_process(ia, ib) or _disagreement(ia, ib) is not None or _link(ia, ib) is None:
                return False
    return True


def _group_without_evidence(idents: list[RunIdentity], pool: list[int]):
    """Traces with no absolute time and no ProfilerStep: one group per set of compatible traces, but only when
    every rank appears once in it."""
    clusters, unmatched = [], {}
    sets: list[list[int]] = []
    for i in pool:   # compatible sets: a trace joins the first set it agrees with, member by member
        for s in sets:
            if all(_disagreement(idents[i], idents[j]) is None for j in s):
                s.append(i)
                break
        else:
            sets.append([i])
    for s in sets:
        by_rank: dict[int, list[int]] = {}
        for i in s:
            by_rank.setdefault(idents[i].rank, []).append(i)
        dups = {r: ix for r, ix in by_rank.items() if len(ix) > 1}
        same_proc = any(_same_process(idents[a], idents[b]) for a in s for b in s if a < b)
        if dups or same_proc:
            for i in s:
                r = idents[i].rank
                if r in dups:
                    others = ", ".join(idents[j].path for j in dups[r] if j != i)
                    out = (f"rank {r} appears {len(dups[r])} times among traces without absolute time or "
                           f"ProfilerStep numbers (also {others}): cannot tell the runs apart")
                else:
                    shown = ", ".join(f"rank {r}" for r in sorted(dups)) or "one process"
                    out = (f"without absolute time or ProfilerStep numbers, its run cannot be told apart from "
                           f"another ({shown} twice)")
                unmatched[i] = out
            continue
        if len(by_rank) >= 2:
            clusters.append((sorted(s, key=lambda k: idents[k].rank), "none",
                             ["membership inferred without time or step evidence: the traces have no absolute "
                              "time and no ProfilerStep numbers, and each rank appears once among them"]))
    return clusters, unmatched


def _why_alone(idents: list[RunIdentity], i: int, members: list[int],
               clusters: list[tuple[list[int], str, list[str]]]) -> str:
    me = idents[i]
    alone = "no other rank of this run in the input"
    if me.world_size is None:
        alone += " (world size unknown)"
    other_ranks = [j for j in members if j != i and idents[j].rank != me.rank]
    same_world = [j for j in other_ranks if idents[j].world_size == me.world_size]
    if not same_world:
        return alone
    compatible = [j for j in same_world if _disagreement(me, idents[j]) is None]
    if not compatible:
        return _disagreement(me, idents[same_world[0]])
    # A group recorded at the same time that already holds this rank.
    for cluster, _, _ in clusters:
        if any(idents[j].rank == me.rank for j in cluster) and any(
                _link(me, idents[j]) is not None for j in cluster if idents[j].rank != me.rank):
            holder = next(idents[j].path for j in cluster if idents[j].rank == me.rank)
            return f"rank {me.rank} appears twice: the run recorded at that time already has it from {holder}"
    compatible = [j for j in compatible if not _same_process(me, idents[j])]
    if not compatible:
        return alone
    if me.has_time:
        timed = [idents[j] for j in compatible if idents[j].has_time]
        if timed:
            nearest = min(max(me.start_ns, o.start_ns) - min(me.end_ns, o.end_ns) for o in timed)
            return (f"{alone}: compatible traces of other ranks were recorded at other times "
                    f"(nearest {nearest / 1e9:.1f} s apart)")
        return f"{alone}: the compatible traces of other ranks have no absolute time to match"
    if me.steps:
        return (f"{alone}: absolute time unknown, and no compatible trace of another rank holds the same "
                f"ProfilerStep numbers ({_steps_text(me.steps)})")
    return f"{alone}: this trace has no absolute time and no ProfilerStep numbers to match"


def _steps_text(steps: Sequence[int]) -> str:
    if not steps:
        return "none"
    if len(steps) == 1:
        return f"ProfilerStep#{steps[0]}"
    if list(steps) == list(range(steps[0], steps[-1] + 1)):
        return f"ProfilerStep#{steps[0]}-{steps[-1]}"
    return "ProfilerStep#" + ", #".join(map(str, steps))


def _common_folder(paths: Sequence[str]) -> str:
    parents = [str(Path(p).parent) for p in paths]
    try:
        return os.path.commonpath(parents) or "."
    except ValueError:  # absolute and relative paths mixed
        return parents[0]


def _finish(items: Sequence[T], idents: list[RunIdentity],
            clusters: list[tuple[list[int], str, list[str]]]) -> list[RunGroup[T]]:
    """Labels (folder, run, cycle, steps, ranks), notes, and a deterministic order."""
    infos = []
    for cluster, evidence, notes in clusters:
        ids = [idents[i] for i in cluster]
        starts = [x.start_ns for x in ids if x.start_ns is not None]
        infos.append({"cluster": cluster, "ids": ids, "evidence": evidence, "notes": list(notes),
                      "start": min(starts) if len(starts) == len(ids) else None,
                      "folder": _common_folder([x.path for x in ids]),
                      "procs": {(x.host, p) for x in ids if x.host is not None for p in x.pids}})

    def order(info):
        steps = sorted({s for x in info["ids"] for s in x.steps})
        return (info["folder"], info["start"] is None, info["start"] or 0, steps,
                [x.path for x in info["ids"]])

    infos.sort(key=order)
    # Runs: groups that share a process are cycles of one run.
    by_folder: dict[str, list[dict]] = {}
    for info in infos:
        by_folder.setdefault(info["folder"], []).append(info)
    for folder_infos in by_folder.values():
        runs: list[list[dict]] = []
        for info in folder_infos:
            for run in runs:
                if any(info["procs"] & other["procs"] for other in run):
                    run.append(info)
                    break
            else:
                runs.append([info])
        for r, run in enumerate(runs, start=1):
            for c, info in enumerate(run, start=1):
                info["run"], info["cycle"], info["cycles"], info["runs"] = r, c, len(run), len(runs)

    groups = []
    for info in infos:
        ids = info["ids"]
        ranks = [x.rank for x in ids]
        world = ids[0].world_size
        if world is None:
            world = ids[0].default_pg_size
        missing = world - len(set(ranks)) if world is not None and world >= len(set(ranks)) else None
        notes = info["notes"]
        if missing:
            notes.insert(0, f"{missing} of {world} ranks missing: cross-rank rules compare only ranks "
                            f"{ranks_text(ranks)}")
        step_sets = {x.steps for x in ids}
        if len(step_sets) > 1 and all(step_sets):
            notes.append("ranks hold different ProfilerStep numbers: " + "; ".join(
                f"rank {x.rank} {_steps_text(x.steps)}" for x in ids))
        versions = {x.nccl_version for x in ids if x.nccl_version}
        if len(versions) > 1:
            notes.append(f"ranks report different NCCL versions: {', '.join(sorted(versions))}")
        label = info["folder"]
        if info["runs"] > 1 or info["cycles"] > 1:
            label += f" run {info['run']}"
        if info["cycles"] > 1:
            label += f" cycle {info['cycle']}"
        common_steps = set.intersection(*(set(x.steps) for x in ids)) if all(x.steps for x in ids) else set()
        if common_steps:
            label += f" {_steps_text(sorted(common_steps))}"
        label += f" (ranks {ranks_text(ranks)} of {_or_unknown(world)})"
        groups.append(RunGroup(tables=[items[i] for i in info["cluster"]], identities=ids, ranks=ranks,
                               world_size=world, missing_ranks_count=missing, label=label, notes=notes,
                               start_ns=info["start"], evidence=info["evidence"]))
    return groups
