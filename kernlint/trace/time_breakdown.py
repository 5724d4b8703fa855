"""Where a step's device time goes: device time by breakdown category, idle time, and the top costs.

Every trace report carries one (`TraceReport.time`), so a finding's cost can be read against it: a fill that
costs 2% of the step next to attention softmax at 46%.

Steps (`basis`), the first the trace has:

- "ProfilerStep": torch.profiler's `ProfilerStep#N` ranges (the names table's `profiler-step-range`); a device
  event belongs to the step it was launched in (its launch time), so work that a step queued and the device
  ran later is still that step's. Device events launched outside every step (warm-up before the first) are
  left out.
- "graph replay": each CUDA-graph launch whose kernels were replayed, when the replays hold (nearly) all of
  the trace's device time (`GRAPH_REPLAY_SHARE`); a device event outside every replay (an eager launch between
  replays) belongs to the replay that started last before it. With piecewise graphs (vLLM: one graph per
  piece between eager attention) a "step" is a piece, not a forward: the shares hold, the means are per piece.
- "profiled window": the whole trace as one step.

Per device (the trace's GPU index), a step's **wall** time runs from the start of the first device event it
launched to the start of the next step's first device event (for the last step: to the end of its last device
event), so the steps tile the device's timeline and the gaps between steps (the host preparing the next one)
are idle of the step before. **busy** is the union of every device event's interval within that wall (any
step's, any stream); **idle** = wall - busy. A category's time is the **summed** duration of the step's device
events of that category: on several streams at once these overlap in time, so the categories can add up to
more than busy (`kernel_us` - `busy_us` says by how much). Every share is of the wall time: on one stream the
categories and idle add up to 100%. A trace that drives several GPUs from one process sums walls, busy, idle
and category times over its devices (device-microseconds; `devices` says how many).

Means are per step (`steps`); the top costs are the device events grouped by short name, their summed time
over the steps divided by the number of steps. A trace without device events (a CPU-only trace) has no
breakdown: None.

Beside the categories:

- **launch delay** (queue time): for each device event launched eagerly, its start minus the start of the
  runtime call that launched it (`launch_ts`); for a CUDA-graph replay, its first kernel's start minus the
  graph launch's start, once per replay (the replay's other kernels queue behind the graph, not the host).
  Clipped at 0 (clocks of host and device differ by a few ns). Mean, median and max over the steps' launches,
  and the mean and max of each step.
- **communication overlap**: per device and step, `comm_us` is the union of the communication kernels'
  intervals within the step's wall, `comm_overlap_us` the part of it during which a non-communication device
  event ran too (compute hiding the collective): comm + other - busy, each a union. The exposed communication
  is `comm_us - comm_overlap_us`.
- **per step** (`per_step`, the first MAX_STEPS steps): each step's wall, busy, idle, summed durations by
  category, launch delay and communication overlap, so the mean can be read against the spread.

Vectorized: each distinct (name, device category) is classified once (kernlint.trace.names.classify_breakdown);
everything else is numpy over the device rows.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np

from kernlint.trace import names
from kernlint.trace.kinds import DEVICE_KINDS
from kernlint.trace.scopes import ScopeIndex
from kernlint.trace.table import EventTable

PROFILER_STEP, GRAPH_REPLAY, PROFILED_WINDOW = "ProfilerStep", "graph replay", "profiled window"
# Graph replays are the steps only when they hold at least this share of the device time.
GRAPH_REPLAY_SHARE = 0.95
TOP = 10
IDLE = "idle"
COMMUNICATION = "communication"
MAX_STEPS = 64      # steps listed one by one in `per_step` (the means cover them all)


@dataclass(frozen=True)
class CategoryTime:
    category: str
    us_per_step: float
    share: float          # of the step's device wall time


@dataclass(frozen=True)
class TopCost:
    name: str             # the short name (kernlint.trace.names.short_kernel_name)
    category: str         # its breakdown category
    us_per_step: float
    share: float          # of the step's device wall time
    launches_per_step: float


@dataclass(frozen=True)
class LaunchDelay:
    """Queue time: from a launch call's start to its device event's start (µs), over all counted launches."""

    launches_per_step: float
    mean_us: float
    median_us: float
    max_us: float


@dataclass(frozen=True)
class StepTime:
    """One step's device time (summed over devices), in µs."""

    step: int             # 0.. in time order
    label: str            # `ProfilerStep#3`, `graph replay 2`, `profiled window`
    start_us: float       # its first device event's start (trace clock), on the first device
    wall_us: float
    busy_us: float
    idle_us: float
    kernel_us: float
    categories: dict[str, float] = field(default_factory=dict)   # summed durations, largest first
    launches: int = 0
    launch_delay_mean_us: float | None = None
    launch_delay_max_us: float | None = None
    comm_us: float = 0.0           # union of the communication kernels' intervals
    comm_overlap_us: float = 0.0   # of which other device work ran at the same time


@dataclass(frozen=True)
class TimeBreakdown:
    """A trace's device time per step (means over `steps` steps of `basis`), in microseconds."""

    basis: str
    steps: int
    devices: int
    wall_us: float        # device wall time of a step (summed over devices)
    busy_us: float        # the union of device intervals in it
    kernel_us: float      # the summed durations of the step's device events (> busy where streams overlap)
    idle: CategoryTime
    categories: list[CategoryTime] = field(default_factory=list)   # largest first; only those present
    top: list[TopCost] = field(default_factory=list)
    launch_delay: LaunchDelay | None = None     # None where no device event has a launch call
    comm_us: float = 0.0                        # per step: union of communication intervals
    comm_overlap_us: float = 0.0                # per step: of which overlapped by other device work
    comm_overlap_share: float | None = None     # comm_overlap_us / comm_us; None without communication
    per_step: list[StepTime] = field(default_factory=list)   # the first MAX_STEPS steps

    def as_dict(self) -> dict:
        return asdict(self)


def _distinct(values: np.ndarray) -> np.ndarray:
    """The sorted distinct values. Not np.unique: numpy 2's imports numpy.ma (0.1 s) in every check that would
    not otherwise load it."""
    ordered = np.sort(values, kind="stable")
    keep = np.ones(len(ordered), dtype=bool)
    keep[1:] = ordered[1:] != ordered[:-1]
    return ordered[keep]


def _step_of_rows(index: ScopeIndex, rows: np.ndarray, ts: np.ndarray, dur: np.ndarray, launched: np.ndarray
                  ) -> tuple[np.ndarray, int, str, list[str]]:
    """(step number of each device row, -1 for none; number of steps; basis; each step's label)."""
    steps = index.named_scopes(annotations=[names.named_pattern("profiler-step-range")])
    steps = sorted((s for s in steps if s.kind == "annotation"), key=lambda s: s.ts)
    if steps:
        starts = np.array([s.ts for s in steps], dtype=np.float64)
        ends = np.array([s.end for s in steps], dtype=np.float64)
        i = starts.searchsorted(launched, "right") - 1
        inside = (i >= 0) & (launched < ends[np.maximum(i, 0)])
        step = np.where(inside, i, -1)
        used = _distinct(step[step >= 0])
        if len(used):   # number the steps that launched device work 0..n-1
            remap = np.full(len(steps), -1, dtype=np.int64)
            remap[used] = np.arange(len(used))
            labels = [str(steps[i].name) for i in used.tolist()]
            return np.where(step >= 0, remap[np.maximum(step, 0)], -1), len(used), PROFILER_STEP, labels
    replay = index.replay[rows]
    in_replay = replay >= 0
    total = float(dur.sum())
    if in_replay.any() and total > 0 and float(dur[in_replay].sum()) >= GRAPH_REPLAY_SHARE * total:
        # Each replay is a step from its first kernel's start; eager work between replays (a few launches
        # outside the graph) joins the replay before it, so the steps tile the device timeline.
        launches = _distinct(replay[in_replay])
        which = launches.searchsorted(replay[in_replay])
        first = np.full(len(launches), np.inf)
        np.minimum.at(first, which, ts[in_replay])
        order = np.argsort(first, kind="stable")
        first = first[order]
        step = first.searchsorted(ts, "right") - 1
        rank = np.empty(len(launches), dtype=np.int64)
        rank[order] = np.arange(len(launches))
        step[in_replay] = rank[which]
        return step, len(launches), GRAPH_REPLAY, [f"graph replay {i + 1}" for i in range(len(launches))]
    return np.zeros(len(rows), dtype=np.int64), 1, PROFILED_WINDOW, [PROFILED_WINDOW]


def _busy_before(starts: np.ndarray, ends: np.ndarray):
    """The union of intervals as a function: busy(t) = covered time before t, for an array of t."""
    order = np.argsort(starts, kind="stable")
    s, e = starts[order], ends[order]
    reach = np.maximum.accumulate(e)
    new = np.ones(len(s), dtype=bool)
    new[1:] = s[1:] > reach[:-1]   # an interval that starts after everything before it ended opens a run
    run = np.cumsum(new) - 1
    run_start = s[new]
    run_end = np.zeros(len(run_start))
    np.maximum.at(run_end, run, e)
    run_len = run_end - run_start
    before = np.concatenate(([0.0], np.cumsum(run_len)))

    def busy(t: np.ndarray) -> np.ndarray:
        j = run_start.searchsorted(t, "right") - 1
        jj = np.maximum(j, 0)
        inside = np.clip(t - run_start[jj], 0.0, run_len[jj])
        return np.where(j >= 0, before[jj] + inside, 0.0)

    return busy


def _timed_device_rows(table: EventTable, index: ScopeIndex | None):
    """(the index, the device rows with a finite start and a positive duration, their starts and durations);
    None without such rows."""
    if not table.has_device_events:
        return None
    if index is None:
        index = ScopeIndex.of(table)
    cols = table.columns
    rows = index.rows_of(DEVICE_KINDS)
    ts, dur = cols["ts"][rows].astype(np.float64), cols["dur"][rows].astype(np.float64)
    good = np.isfinite(ts) & np.isfinite(dur) & (dur > 0)
    if not good.any():
        return None
    return index, rows[good], ts[good], dur[good]


def time_breakdown(table: EventTable, index: ScopeIndex | None = None, top: int = TOP) -> TimeBreakdown | None:
    """The trace's device time per step by breakdown category, idle and top costs; None without device events
    (or none with a duration)."""
    timed = _timed_device_rows(table, index)
    if timed is None:
        return None
    index, rows, ts, dur = timed
    cols = table.columns
    end = ts + dur
    launched = cols["launch_ts"][rows].astype(np.float64)
    launched = np.where(np.isfinite(launched), launched, ts)
    step, n_steps, basis, labels = _step_of_rows(index, rows, ts, dur, launched)

    # Each distinct (name, device category) is classified once.
    name_codes, name_values = cols.coded("name")
    cat_codes, cat_values = cols.coded("category")
    pair = name_codes[rows].astype(np.int64) * len(cat_values) + cat_codes[rows]
    present = _distinct(pair)
    local = present.searchsorted(pair)
    breakdown = np.array([names.classify_breakdown(str(name_values[p // len(cat_values)]),
                                                   str(cat_values[p % len(cat_values)]))
                          for p in present.tolist()], dtype=object)
    categories = list(names.BREAKDOWN_CATEGORIES)
    cat_index = {c: i for i, c in enumerate(categories)}
    row_cat = np.array([cat_index[c] for c in breakdown.tolist()], dtype=np.int64)[local]

    # Walls and busy per device, steps tiling each device's timeline.
    device = cols["device"][rows] if "device" in cols else np.zeros(len(rows), dtype=np.int64)
    devices = _distinct(device)
    comm = row_cat == cat_index[COMMUNICATION]
    step_wall, step_busy = np.zeros(n_steps), np.zeros(n_steps)
    step_comm, step_overlap = np.zeros(n_steps), np.zeros(n_steps)
    step_start = np.full(n_steps, np.nan)
    for d in devices.tolist():
        mine = device == d
        busy_at = _busy_before(ts[mine], end[mine])
        counted = mine & (step >= 0)
        if not counted.any():
            continue
        s = step[counted]
        first = np.full(n_steps, np.inf)
        np.minimum.at(first, s, ts[counted])
        last = np.full(n_steps, -np.inf)
        np.maximum.at(last, s, end[counted])
        has = np.flatnonzero(np.isfinite(first))
        lo, hi_last = first[has], last[has]
        hi = np.append(lo[1:], hi_last[-1])   # to the next step's first start; the last step to its last end
        hi = np.maximum(hi, lo)
        step_wall[has] += hi - lo
        busy_d = busy_at(hi) - busy_at(lo)
        step_busy[has] += busy_d
        step_start[has] = np.where(np.isnan(step_start[has]), lo, step_start[has])
        mine_comm = mine & comm
        if mine_comm.any():
            comm_at = _busy_before(ts[mine_comm], end[mine_comm])
            comm_d = comm_at(hi) - comm_at(lo)
            other = mine & ~comm
            other_d = 0.0
            if other.any():
                other_at = _busy_before(ts[other], end[other])
                other_d = other_at(hi) - other_at(lo)
            step_comm[has] += comm_d
            # |comm ∩ other| = |comm| + |other| - |comm ∪ other|, the union being busy
            step_overlap[has] += np.clip(comm_d + other_d - busy_d, 0.0, comm_d)
    wall, busy = float(step_wall.sum()), float(step_busy.sum())
    counted = step >= 0
    per_cat = np.bincount(row_cat[counted], weights=dur[counted], minlength=len(categories))
    kernel = float(dur[counted].sum())
    if wall <= 0:
        return None
    idle = max(wall - busy, 0.0)
    n = float(n_steps)
    cat_times = [CategoryTime(categories[i], float(per_cat[i]) / n, float(per_cat[i]) / wall)
                 for i in np.argsort(-per_cat, kind="stable").tolist() if per_cat[i] > 0]

    # Launch delay: eager launches by their launch call; each graph replay once, by its first kernel.
    replay = index.replay[rows]
    eager = counted & (replay < 0) & np.isfinite(cols["launch_ts"][rows].astype(np.float64))
    delay_step = [step[eager]]
    delay = [np.maximum(ts[eager] - launched[eager], 0.0)]
    replayed = counted & (replay >= 0)
    if replayed.any():
        graphs = _distinct(replay[replayed])
        which = graphs.searchsorted(replay[replayed])
        first_ts = np.full(len(graphs), np.inf)
        np.minimum.at(first_ts, which, ts[replayed])
        graph_step = np.zeros(len(graphs), dtype=np.int64)
        graph_step[which] = step[replayed]
        graph_ts = cols["ts"][graphs].astype(np.float64)
        ok = np.isfinite(graph_ts)
        delay_step.append(graph_step[ok])
        delay.append(np.maximum(first_ts[ok] - graph_ts[ok], 0.0))
    delay_step_all, delay_all = np.concatenate(delay_step), np.concatenate(delay)
    launch_delay = None
    step_launches = np.bincount(delay_step_all, minlength=n_steps)
    step_delay_sum = np.bincount(delay_step_all, weights=delay_all, minlength=n_steps)
    step_delay_max = np.full(n_steps, -np.inf)
    if len(delay_all):
        np.maximum.at(step_delay_max, delay_step_all, delay_all)
        launch_delay = LaunchDelay(len(delay_all) / n, float(delay_all.mean()), float(np.median(delay_all)),
                                   float(delay_all.max()))

    # Per step: its categories (summed durations), walls, launch delay and overlap.
    shown = min(n_steps, MAX_STEPS)
    step_cat = np.bincount(step[counted] * len(categories) + row_cat[counted], weights=dur[counted],
                           minlength=n_steps * len(categories)).reshape(n_steps, len(categories))
    per_step = []
    for i in range(shown):
        cats = {categories[c]: float(step_cat[i, c]) for c in np.argsort(-step_cat[i], kind="stable").tolist()
                if step_cat[i, c] > 0}
        k = int(step_launches[i])
        per_step.append(StepTime(
            step=i, label=labels[i], start_us=float(step_start[i]) if np.isfinite(step_start[i]) else 0.0,
            wall_us=float(step_wall[i]), busy_us=float(step_busy[i]),
            idle_us=max(float(step_wall[i] - step_busy[i]), 0.0), kernel_us=float(step_cat[i].sum()),
            categories=cats, launches=k, launch_delay_mean_us=float(step_delay_sum[i]) / k if k else None,
            launch_delay_max_us=float(step_delay_max[i]) if k else None,
            comm_us=float(step_comm[i]), comm_overlap_us=float(step_overlap[i])))
    comm_total, overlap_total = float(step_comm.sum()), float(step_overlap.sum())

    short_codes, short_values = cols.coded("short_name")
    sc = short_codes[rows][counted]
    by_name = np.bincount(sc, weights=dur[counted], minlength=len(short_values))
    launches = np.bincount(sc, minlength=len(short_values))
    # A short name's category: that of its longest-running event (one short name rarely spans two).
    first_cat = np.full(len(short_values), -1, dtype=np.int64)
    order = np.argsort(dur[counted], kind="stable")
    first_cat[sc[order]] = row_cat[counted][order]
    top_costs = [TopCost(str(short_values[i]), categories[first_cat[i]], float(by_name[i]) / n,
                         float(by_name[i]) / wall, float(launches[i]) / n)
                 for i in np.argsort(-by_name, kind="stable")[:top].tolist() if by_name[i] > 0]
    return TimeBreakdown(basis=basis, steps=n_steps, devices=len(devices), wall_us=wall / n, busy_us=busy / n,
                         kernel_us=kernel / n, idle=CategoryTime(IDLE, idle / n, idle / wall),
                         categories=cat_times, top=top_costs, launch_delay=launch_delay,
                         comm_us=comm_total / n, comm_overlap_us=overlap_total / n,
                         comm_overlap_share=overlap_total / comm_total if comm_total > 0 else None,
                         per_step=per_step)


def event_category(index: ScopeIndex, rows) -> str | None:
    """The breakdown category of a finding's events: of each device event itself, of an op's or a call's
    device events (the one with the most device time wins); None where no device event is found."""
    cols = index.columns
    rows = [int(rows)] if np.ndim(rows) == 0 else [int(r) for r in rows]
    found: list[int] = []
    for row in rows:
        if str(index.kind[row]) in DEVICE_KINDS:
            found.append(row)
        elif str(index.kind[row]) in ("op", "runtime"):
            found += index.device_events_between(index.thread[row], float(index.ts[row]),
                                                 float(index.end[row])).tolist()
    if not found:
        return None
    dur = cols["dur"]
    best = max(found, key=lambda r: float(dur[r]) if np.isfinite(dur[r]) else -1.0)
    return names.classify_breakdown(str(index.name[best]), str(index.category[best]))


def device_steps(table: EventTable, index: ScopeIndex | None = None
                 ) -> tuple[np.ndarray | None, np.ndarray | None, int, str]:
    """The steps as the breakdown counts them, for those who draw one (kernlint.report.step_view): the device
    rows with a duration, the step of each (-1: outside every step), the number of steps and the basis.
    (None, None, 0, "") without device events."""
    timed = _timed_device_rows(table, index)
    if timed is None:
        return None, None, 0, ""
    index, rows, ts, dur = timed
    cols = table.columns
    launched = cols["launch_ts"][rows].astype(np.float64)
    launched = np.where(np.isfinite(launched), launched, ts)
    step, n_steps, basis = _step_of_rows(index, rows, ts, dur, launched)[:3]
    return rows, step, n_steps, basis
