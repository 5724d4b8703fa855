"""The HTML report's rank view, as plain data: which traces are the ranks of one run (every run group of a
folder, kernlint.trace.runs.group_runs), and who waited for whom in a collective.

Who waited for whom. A collective completes on every rank together (the ends of one all-reduce on two H200
ranks agree within a microsecond in fixtures/traces/gpu-tp2-nccl), so the time a rank spends in it is the
wait for the last rank to arrive plus the transfer: the ranks that arrived early show a long collective, the
last one a short one. The long one is the waiter, not the cause. Arrival is read from the ranks' common clock
(kernlint.trace.runs: `baseTimeNanoseconds + ts`) where every rank has one and the collective's ends agree on
it; otherwise from the durations (the ends taken as simultaneous: a rank arrived as much before the last one
as its time in the collective exceeds the last one's). Collectives pair up across ranks by their order.

The divergent launch (a cross-rank finding: rank 1 alone calls `.item()`) is named as the cause only when its
rank is the one that arrived last. In fixtures/traces/gpu-tp2-nccl/fp8-tp-mlp-rank1-sync it is not: rank 1's
`.item()` cost it 56 µs on the host, and it reached the all-reduce 293.7 ms before rank 0, whose trace began
291.9 ms after rank 1's (the ranks were that far out of step before the profiled step began: the clean run
of the same workload shows rank 0 waiting 619.4 ms for rank 1 with no divergence at all). So rank 1 shows
293.9 ms in the all-reduce, all of it waiting for rank 0, and rank 0 0.2 ms: the table says exactly that.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from kernlint.report.safe import format_duration_us
from kernlint.rules.result import CheckResult, Finding, TraceReport
from kernlint.trace.kinds import DEVICE_KINDS, is_kind
from kernlint.trace.runs import group_runs, run_identity
from kernlint.trace.table import EventTable

MAX_RANK_VIEWS = 8        # run groups drawn, the first in folder and time order (group_runs)
_TOGETHER_US = 5.0        # arrivals closer than this (or 5% of the shortest time in it) are "together"
_END_SLACK_US = 50.0      # the ends on the common clock must agree this well (or 5% of the longest)


@dataclass
class CollectiveWait:
    """One rank's part of one collective."""

    rank: int
    kernel: str
    arrived_us: float          # after the first rank to arrive
    dur_us: float              # its time in the collective: its wait plus the transfer
    waited_us: float           # of that, the wait for the last rank (0 for the last rank itself)
    waited_for: int | None     # the rank it waited for: the last to arrive (None: it is that rank)
    last: bool                 # the rank the others waited for
    divergent: bool            # the rank that issued the divergent launch


@dataclass
class CollectiveWaits:
    kernel: str
    rows: list[CollectiveWait]
    basis: str                 # "clock": arrivals on the ranks' common clock; "durations": from the times in it
    end_spread_us: float | None   # on the clock: how far apart the collective's ends are
    summary: str               # who waited for whom, and whether the divergent launch is the cause, in words
    after_divergent: bool      # the collective after the divergent launch (else the run's first collective)
    late_rank: int
    together: bool = False     # the ranks arrived within a few µs: nobody waited to speak of


@dataclass
class RankRun:
    """One run group's ranks, for the rank view: its label, each rank's trace, and the collective waits."""

    label: str
    traces: list[tuple[int, str]]                   # (rank, trace path), by rank
    findings: list[Finding] = field(default_factory=list)
    waits: CollectiveWaits | None = None


def _us(value: float) -> str:
    return format_duration_us(value)


def _collectives(table: EventTable) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The device collective kernels of a trace, in order of start: (rows, ts, dur)."""
    f = table.columns
    rows = np.flatnonzero(is_kind(f, *DEVICE_KINDS) & (f["category"] == "comm") & np.isfinite(f["ts"]))
    ts = f["ts"][rows]
    order = np.argsort(ts, kind="stable")
    return rows[order], ts[order], f["dur"][rows][order]


def _clock_offset_us(table: EventTable) -> float | None:
    """What to add to this trace's `ts` for epoch µs; None when the trace has no absolute time."""
    ident = run_identity(table)
    ts = table.columns["ts"]
    if ident.start_ns is None or not len(ts) or not np.isfinite(ts).any():
        return None
    return ident.start_ns / 1000.0 - float(np.nanmin(ts))


def collective_waits(by_rank: dict[int, EventTable], finding: Finding | None) -> CollectiveWaits | None:
    """Who waited for whom in one collective: the first one on the finding's rank after its divergent launch,
    or (no finding) the run's first; the same collective (by order) on every other rank. None where a rank has
    no such collective (CPU collectives: their host op returns before the data arrives, so it times nothing)."""
    if len(by_rank) < 2:
        return None
    found = {rank: _collectives(table) for rank, table in sorted(by_rank.items())}
    nth = 0
    if finding is not None and finding.rank in found and finding.ts is not None and math.isfinite(finding.ts):
        after = np.flatnonzero(found[finding.rank][1] >= finding.ts)
        if not after.size:
            return None
        nth = int(after[0])
    picked: dict[int, tuple[str, float, float]] = {}
    for rank, (rows, ts, dur) in found.items():
        if nth >= len(rows) or not math.isfinite(float(dur[nth])):
            return None
        picked[rank] = (str(by_rank[rank].columns["short_name"][int(rows[nth])]), float(ts[nth]), float(dur[nth]))
    durations = {rank: d for rank, (_, _, d) in picked.items()}
    basis, spread = "durations", None
    offsets = {rank: _clock_offset_us(table) for rank, table in by_rank.items()}
    if all(o is not None for o in offsets.values()):
        starts = {rank: t + offsets[rank] for rank, (_, t, _) in picked.items()}
        ends = [starts[r] + durations[r] for r in picked]
        spread = max(ends) - min(ends)
        if spread <= max(_END_SLACK_US, 0.05 * max(durations.values())):
            basis = "clock"
    if basis == "clock":
        first_start = min(starts.values())
        arrived = {r: starts[r] - first_start for r in picked}
    else:
        longest = max(durations.values())
        arrived = {r: longest - durations[r] for r in picked}
    late = max(sorted(picked), key=lambda r: arrived[r])
    divergent_rank = finding.rank if finding is not None else None
    rows = [CollectiveWait(r, picked[r][0], arrived[r], durations[r], max(0.0, arrived[late] - arrived[r]),
                           None if r == late else late, r == late, r == divergent_rank) for r in sorted(picked)]
    kernel = picked[late][0]
    summary = _summary(rows, late, kernel, finding, by_rank, offsets if basis == "clock" else None)
    return CollectiveWaits(kernel, rows, basis, spread, summary, finding is not None, late, _together(rows))


def _together(rows: list[CollectiveWait]) -> bool:
    return max(r.arrived_us for r in rows) < max(_TOGETHER_US, 0.05 * min(r.dur_us for r in rows))


def _summary(rows: list[CollectiveWait], late: int, kernel: str, finding: Finding | None,
             by_rank: dict[int, EventTable], offsets: dict[int, float | None] | None) -> str:
    gap = max(r.arrived_us for r in rows)
    if _together(rows):
        return f"The ranks reached {kernel} together (within {_us(gap)}): no rank waited for another."
    first = min(rows, key=lambda r: r.arrived_us).rank
    waiters = [r for r in rows if not r.last]
    text = (f"Rank {late} reached {kernel} last, {_us(gap)} after rank {first}: "
            + ", ".join(f"rank {r.rank} waited {_us(r.waited_us)} in it for rank {late}" for r in waiters) + ".")
    if finding is not None and finding.rank is not None:
        if finding.rank == late:
            text += (f" Rank {late} issued the divergent launch ({finding.event}): the others' wait is what its "
                     "divergence cost them.")
        else:
            own = next(r for r in rows if r.rank == finding.rank)
            text += (f" The divergent launch ({finding.event}) is on rank {finding.rank}, which was not late: it "
                     f"arrived {_us(gap - own.arrived_us)} before rank {late} and waited; the divergent launch is "
                     "not what this collective waited for.")
    if offsets is not None:   # how far apart the ranks already were when their traces began
        begun = {r: offsets[r] + float(np.nanmin(by_rank[r].columns["ts"])) for r in by_rank}
        behind = begun[late] - begun[first]
        if behind > 0.5 * gap:
            text += (f" Rank {late}'s trace began {_us(behind)} after rank {first}'s: the ranks were already that "
                     "far out of step when profiling started.")
    return text


def rank_runs(result: CheckResult, tables: list[EventTable]) -> list[RankRun]:
    """Every run group of the checked traces (the ranks of one run and profiling cycle, as the cross-rank
    rules saw them: the run group reports are matched by label), each with its ranks' traces and the
    findings of its cross-rank rules; at most MAX_RANK_VIEWS."""
    reports: dict[str, TraceReport] = {r.trace: r for r in result.reports if r.subject == "run group"}
    runs = []
    for group in group_runs(tables).groups[:MAX_RANK_VIEWS]:
        report = reports.get(group.label)
        by_rank: dict[int, EventTable] = {}
        for table in group.tables:
            by_rank.setdefault(table.meta.rank, table)
        runs.append(RankRun(group.label, [(r, t.path) for r, t in sorted(by_rank.items())],
                            list(report.findings) if report is not None else []))
    return runs


def rank_center(by_rank: dict[int, EventTable], marked: list[Finding]) -> tuple[int, float, str] | None:
    """Where a rank view centres: the first divergent launch, else the first collective op of the lowest rank
    (its host op: CPU collectives have no kernel), else the middle of that rank's trace."""
    if marked:
        return marked[0].rank, float(marked[0].ts), marked[0].event
    if not by_rank:
        return None
    rank = min(by_rank)
    f = by_rank[rank].columns
    ops = np.flatnonzero(is_kind(f, "op") & (f["category"] == "comm") & np.isfinite(f["ts"]))
    if ops.size:
        r = int(ops[np.argmin(f["ts"][ops])])
        return rank, float(f["ts"][r]), str(f["short_name"][r])
    ts = f["ts"][np.isfinite(f["ts"])]
    if not ts.size:
        return None
    return rank, float((ts.min() + ts.max()) / 2), ""
