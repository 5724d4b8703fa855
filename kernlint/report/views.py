"""What a visual report shows, as plain data taken from the checked traces: timelines of the scopes with
findings, the kernel table, allocations over time, the baseline diff and run metadata. Times are in µs;
layout (pixels, colours) is the renderer's business.

Large traces are summarized, not dumped: only the scopes with findings get a timeline (at most
MAX_TIMELINES a trace, MAX_BARS bars each), the kernel table keeps the MAX_KERNEL_ROWS kernels with the most
device time and sums the rest, other scopes are one aggregated row each, and the allocation curve keeps at
most MAX_ALLOCATION_POINTS points (each the peak of its span).
"""
from __future__ import annotations

import math
import re
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kernlint.errors import ExitCode
from kernlint.report.breakdown import anchor
from kernlint.report.rank_view import CollectiveWait, RankRun, collective_waits, rank_center, rank_runs
from kernlint.report.step_view import StepTimeline, step_timeline
from kernlint.report.time_view import RankTable, TimeSection, finding_times, rank_tables, time_section, trace_axis
from kernlint.rules.causes import Cause, causes_of, describe_instances, instance_step
from kernlint.rules.result import CheckResult, Finding, TraceReport, clean_finding, sorted_findings
from kernlint.rules.schema import Rule
from kernlint.trace.event_columns import EventColumns, factorize
from kernlint.trace.kinds import DEVICE_KINDS, is_kind
from kernlint.trace.scopes import ScopeIndex
from kernlint.trace.table import EventTable

MAX_TIMELINES = 12
MAX_BARS = 400
MAX_KERNEL_ROWS = 300
MAX_SCOPE_ROWS = 200
MAX_ALLOCATION_POINTS = 1500
MAX_TEMPORARY_MARKS = 200
MAX_INSTANCES = 20       # instances of one cause listed under it, besides the one shown
_FRAME_LINE = re.compile(r"\(\d+\)(?=: )")


@dataclass
class Bar:
    lane: str
    start: float
    dur: float
    name: str
    category: str
    kind: str                       # kernel, memcpy, memset, op, runtime
    marks: tuple[str, ...] = ()     # offending, anchor, divergent
    rank: int | None = None
    detail: str = ""                # launching op, source
    row: int = -1                   # the event's row in its table


@dataclass
class Flow:
    from_lane: str
    from_us: float
    to_lane: str
    to_us: float
    offending: bool = False


@dataclass
class Timeline:
    title: str
    start: float
    end: float
    lanes: list[str]
    bars: list[Bar]
    flows: list[Flow]
    finding_ids: list[str] = field(default_factory=list)
    omitted: int = 0                # bars left out (MAX_BARS)
    multi_rank: bool = False
    stalls: list[CollectiveWait] = field(default_factory=list)   # multi-rank: who waited for whom (rank_view)
    rank_run: RankRun | None = None    # multi-rank: the run group drawn, its traces and collective waits


@dataclass
class KernelRow:
    name: str
    category: str
    count: int
    total_us: float
    mean_us: float
    max_us: float


@dataclass
class ScopeRow:
    scope: str
    launches: int
    total_us: float
    findings: int


@dataclass
class Temporary:
    ts: float
    end: float | None
    bytes: int
    dtype: str
    label: str


@dataclass
class Allocations:
    points: list[tuple[float, int]]       # (µs since the trace's start, bytes live)
    temporaries: list[Temporary]
    peak: int
    start: float
    end: float


@dataclass
class InstanceView:
    """One instance of a cause, as its card lists it."""

    trace: str
    rank: int | None
    scope: str
    step: str | None
    ts: float | None
    device_us: float | None
    bytes: int | None


@dataclass
class FindingView:
    """One cause (kernlint.rules.causes: the findings of one rule at one source line and event kind, the same
    stray kernel in every layer, step and rank), shown once: its worst instance, with the timeline of that
    instance, and every instance listed."""

    id: str
    finding: Finding                 # the worst instance (the cause's representative)
    rule: Rule | None
    timeline_id: str | None = None
    instances: list[Finding] = field(default_factory=list)   # the others, up to MAX_INSTANCES
    count: int = 1                   # all instances, the one shown included
    listed: list[InstanceView] = field(default_factory=list)  # the one shown and the others, up to MAX_INSTANCES + 1
    where: str = ""                  # where the instances are, in words (describe_instances); "" for one
    time_id: str | None = None       # the HTML id of its trace's device-time breakdown (kernlint.report.breakdown)


@dataclass
class TraceView:
    id: str
    path: str
    rank: int | None
    events: int
    has_device_events: bool
    has_stacks: bool
    gpu: str | None
    kernels: list[KernelRow]
    kernels_omitted: tuple[int, int, float]    # (kernel names, launches, µs) summed into one row
    scopes: list[ScopeRow]
    allocations: Allocations | None
    timelines: list[Timeline]
    damage: list[str]
    notes: list[str]
    # Where the device time goes (TraceReport.time) and the HTML id of its section; None without device events.
    time: dict | None = None
    time_id: str | None = None
    axis: tuple[float, float] | None = None       # the trace's time axis, shared by its charts (time_view)
    time_section: TimeSection | None = None       # per step, launch delay, overlap, findings' costs (time_view)
    step: StepTimeline | None = None              # one whole step, drawn interactively (step_view)


@dataclass
class BaselineRow:
    rule: str
    kind: str                 # added, removed, slower, faster, scratch
    name: str
    scope: str
    message: str
    source: str | None
    details: dict[str, Any] | None
    severity: str


@dataclass
class VerdictRow:
    rule: str
    name: str
    severity: str
    status: str
    reasons: list[str]


@dataclass
class ReportView:
    title: str
    exit_code: int | None
    verdicts: list[VerdictRow]
    findings: list[FindingView]
    traces: list[TraceView]
    cross_rank: list[Timeline]
    baseline: list[BaselineRow] | None
    baseline_warnings: list[str]
    metadata: dict[str, Any]
    notes: list[str]
    counts: dict[str, int]
    workloads: list[dict[str, Any]] | None = None    # an audit's workloads and their verdicts
    rank_times: list[RankTable] = field(default_factory=list)   # per-rank breakdowns of a folder of ranks
    gate: str = ""                                   # what the exit code means, as the gate decides it


# -- helpers -------------------------------------------------------------------------------------------------
def _text(value) -> str:
    return value if isinstance(value, str) else ""


def _finite(values: np.ndarray) -> np.ndarray:
    return values[np.isfinite(values)]


def _scope_label(index: ScopeIndex, host: int, cache: dict) -> str:
    key = (int(index.annotation[host]), int(index.module[host]), int(index.user_frame[host]))
    label = cache.get(key)
    if label is None:
        units = index.enclosing_units(host)
        label = cache[key] = units[0].label if units else ""
    return label


def _lane_of(columns: EventColumns, row: int) -> str:
    kind = columns["kind"][row]
    if kind in DEVICE_KINDS:
        stream = columns["stream"][row]
        return f"GPU {columns['device'][row]} stream {stream}" if stream >= 0 else "GPU"
    return "CPU ops" if kind == "op" else "CPU launches"


# -- kernels, scopes, allocations ----------------------------------------------------------------------------
def kernel_rows(table: EventTable) -> tuple[list[KernelRow], tuple[int, int, float]]:
    f = table.columns
    device = np.flatnonzero(is_kind(f, *DEVICE_KINDS))
    if not len(device):
        return [], (0, 0, 0.0)
    # Per kernel name, in order of first launch: category (the first), count, total and longest duration (a
    # duration is never NaN: an unusable one is 0). Longest total first; ties in order of first launch.
    ids, kernel_names = factorize(f["short_name"][device])
    dur = f["dur"][device]
    count = np.bincount(ids)
    first = np.unique(ids, return_index=True)[1]
    category = f["category"][device][first]
    # Summed exactly (then rounded once): the same total whatever the order of the launches.
    by_kernel = np.split(dur[np.argsort(ids, kind="stable")], np.cumsum(count)[:-1])
    total = np.array([math.fsum(d.tolist()) for d in by_kernel], dtype=np.float64)
    longest = np.full(len(kernel_names), -np.inf)
    np.maximum.at(longest, ids, dur)
    order = np.lexsort((np.arange(len(total)), -total))
    rows = [KernelRow(str(kernel_names[g]), str(category[g]), int(count[g]), float(total[g]),
                      float(total[g]) / int(count[g]), float(longest[g])) for g in order[:MAX_KERNEL_ROWS].tolist()]
    rest = order[MAX_KERNEL_ROWS:]
    return rows, (len(rest), int(count[rest].sum()), float(total[rest].sum()))


def scope_rows(table: EventTable, index: ScopeIndex, findings: list[Finding]) -> list[ScopeRow]:
    """Device time per scope (the innermost unit that launched it): the scopes without findings summed up."""
    rows = np.flatnonzero(index.is_kind(*DEVICE_KINDS) & (index.launcher >= 0))
    dur = table.columns["dur"]
    totals: dict[str, list[float]] = defaultdict(lambda: [0, 0.0])
    cache: dict = {}
    for r in rows.tolist():
        label = _scope_label(index, int(index.launcher[r]), cache) or "(no scope)"
        entry = totals[label]
        entry[0] += 1
        entry[1] += float(dur[r])
    found = defaultdict(int)
    for finding in findings:
        found[finding.scope] += 1
    out = [ScopeRow(label, int(n), float(us), found.get(label, 0)) for label, (n, us) in totals.items()]
    out.sort(key=lambda s: (-s.findings, -s.total_us))
    return out[:MAX_SCOPE_ROWS]


def allocations(table: EventTable, axis: tuple[float, float] | None = None) -> Allocations | None:
    """Bytes live over time; `axis` (the trace's time axis, time_view.trace_axis): its times are since the
    axis' start and its span is the axis', so the chart shares the trace's x scale."""
    f = table.columns
    mem = np.flatnonzero(is_kind(f, "alloc", "free") & np.isfinite(f["ts"]))
    if not len(mem):
        return None
    mem = mem[np.argsort(f["ts"][mem], kind="stable")]
    ts = f["ts"][mem]
    live = np.cumsum(f["bytes"][mem].astype(np.int64))
    live = live - min(0, int(live.min()))     # frees of memory allocated before the window start below 0
    start, end = (float(ts[0]), float(ts[-1])) if axis is None else axis
    if len(ts) > MAX_ALLOCATION_POINTS:       # each kept point is the peak of its span
        edges = np.linspace(0, len(ts), MAX_ALLOCATION_POINTS + 1).astype(int)
        picks = [a + int(np.argmax(live[a:b])) for a, b in zip(edges[:-1], edges[1:]) if b > a]
        ts, live = ts[picks], live[picks]
    points = [(float(t - start), int(v)) for t, v in zip(ts, live)]
    temporaries = []
    dtype = f["dtype"] if "dtype" in f else None
    paired = f["paired"]
    if dtype is not None:
        fp8 = [r for r in mem[is_kind(f, "alloc")[mem]].tolist()
               if isinstance(dtype[r], str) and dtype[r].startswith("float8")]
        step = max(1, math.ceil(len(fp8) / MAX_TEMPORARY_MARKS))   # spread over the whole trace
        for r in fp8[::step]:
            p = int(paired[r])
            temporaries.append(Temporary(float(f["ts"][r]) - start,
                                         float(f["ts"][p]) - start if p >= 0 else None,
                                         int(f["bytes"][r]), dtype[r], f"{dtype[r]} {int(f['bytes'][r]):,} B"))
    return Allocations(points, temporaries, int(live.max(initial=0)), 0.0, end - start)


# -- timelines -----------------------------------------------------------------------------------------------
def _find_row(index: ScopeIndex, finding: Finding) -> int | None:
    """The event a finding points at: same readable name, launched at the finding's time."""
    if finding.ts is None or not math.isfinite(finding.ts):
        return None
    hits = np.flatnonzero((index.launch_ts == finding.ts) & (index.short_name == finding.event))
    return int(hits[0]) if len(hits) else None


def _window(index: ScopeIndex, row: int, scope_label: str) -> tuple[str, float, float]:
    """The host thread and interval of the scope instance the finding's event was issued from."""
    host = int(index.launcher[row]) if index.kind[row] in DEVICE_KINDS and index.launcher[row] >= 0 else row
    for unit in index.enclosing_units(host):
        if unit.label == scope_label:
            return unit.thread, unit.ts, unit.end
    top = int(index.top_op[host])
    if top >= 0:
        return str(index.thread[host]), float(index.ts[top]), float(index.end[top])
    t = float(index.launch_ts[row])
    return str(index.thread[host]), t - 50.0, t + 50.0


def scope_timeline(table: EventTable, index: ScopeIndex, row: int, window: tuple[str, float, float],
                   title: str) -> Timeline:
    """The scope instance `window` (thread, start, end): the outermost working ops it called, the launches
    and the device work they launched, with a flow from each launch to its kernel."""
    thread, t0, t1 = window
    f = table.columns
    dur, ts = f["dur"], f["ts"]
    replay = int(index.replay[row])
    if replay >= 0 and index.launcher[row] != replay:
        return _replay_timeline(table, index, row, window, title, replay)
    bars: list[Bar] = []
    flows: list[Flow] = []
    ops = index.work_ops_between(thread, t0, t1).tolist()
    parent = index.parent_op
    chosen = set(ops)
    for r in ops:   # the outermost working ops: what the scope called
        p = int(parent[r])
        while p >= 0 and p not in chosen:
            p = int(parent[p])
        if p >= 0:
            continue
        bars.append(Bar("CPU ops", float(ts[r]), float(dur[r]), str(index.short_name[r]), str(index.category[r]),
                        "op", (), table.meta.rank, _text(index.source[r]), r))
    device = index.device_events_between(thread, t0, t1).tolist()
    end = t1
    for r in device:
        launcher = int(index.launcher[r])
        lane = _lane_of(f, r)
        op = int(index.op[r])
        detail = " · ".join(x for x in (str(index.name[op]) if op >= 0 else "", _text(index.source[launcher])) if x)
        bars.append(Bar(lane, float(ts[r]), float(dur[r]), str(index.short_name[r]), str(index.category[r]),
                        str(index.kind[r]), (), table.meta.rank, detail, r))
        bars.append(Bar("CPU launches", float(ts[launcher]), float(dur[launcher]), str(index.name[launcher]),
                        "launch", "runtime", (), table.meta.rank, "", launcher))
        flows.append(Flow("CPU launches", float(ts[launcher]), lane, float(ts[r]), r == row))
        end = max(end, float(ts[r] + dur[r]))
    omitted = max(0, len(bars) - MAX_BARS)
    if omitted:   # keep the finding's own event and the first ones
        bars = [b for b in bars if b.row == row] + [b for b in bars if b.row != row][: MAX_BARS - 1]
    lanes = ["CPU ops", "CPU launches"] + sorted({b.lane for b in bars} - {"CPU ops", "CPU launches"})
    return Timeline(title, t0, end, lanes, bars, flows, omitted=omitted)


def _replay_timeline(table: EventTable, index: ScopeIndex, row: int, window: tuple[str, float, float],
                     title: str, replay: int) -> Timeline:
    """A finding on a kernel replayed from a CUDA graph: the graph launch and, on their streams, the kernels
    that replay ran from the finding's scope (its captured unit), each named with its attributed op and line.
    The captured ops ran at capture time, elsewhere on the time axis: not drawn here."""
    thread, t0, t1 = window
    f = table.columns
    dur, ts = f["dur"], f["ts"]
    with index.in_replay(replay):
        device = index.device_events_between(thread, t0, t1).tolist()
    start = float(ts[replay])
    bars = [Bar("CPU launches", start, float(dur[replay]), str(index.name[replay]), "launch", "runtime", (),
                table.meta.rank, f"graph replay {index.replay_number(replay)}", replay)]
    flows: list[Flow] = []
    end = start + float(dur[replay])
    for r in device:
        lane = _lane_of(f, r)
        op = int(index.op[r])
        detail = " · ".join(x for x in (str(index.name[op]) if op >= 0 else "", _text(index.source[r])) if x)
        bars.append(Bar(lane, float(ts[r]), float(dur[r]), str(index.short_name[r]), str(index.category[r]),
                        str(index.kind[r]), (), table.meta.rank, detail, r))
        flows.append(Flow("CPU launches", start, lane, float(ts[r]), r == row))
        end = max(end, float(ts[r] + dur[r]))
    omitted = max(0, len(bars) - MAX_BARS)
    if omitted:
        bars = [b for b in bars if b.row == row] + [b for b in bars if b.row != row][: MAX_BARS - 1]
    lanes = ["CPU launches"] + sorted({b.lane for b in bars} - {"CPU launches"})
    return Timeline(title, start, end, lanes, bars, flows, omitted=omitted)


def rank_timeline(tables: list[EventTable], findings: list[Finding], run: RankRun | None = None) -> Timeline | None:
    """A run's ranks side by side, one lane each: the outermost working ops around the divergent launch, or
    without one around the run's first collective (each rank's time taken from its own first event, so the
    lanes line up), the divergent ones marked; with who waited for whom in the collective after it
    (rank_view.collective_waits)."""
    by_rank = {t.meta.rank: t for t in tables if t.meta.rank is not None}
    marked = [f for f in findings if f.rank in by_rank and f.ts is not None and math.isfinite(f.ts)]
    center_at = rank_center(by_rank, marked) if len(by_rank) >= 2 else None
    if center_at is None:
        return None
    center_rank, center_ts, center_name = center_at
    origin = {r: float(np.nanmin(t.columns["ts"])) for r, t in by_rank.items()}
    center = center_ts - origin[center_rank]
    half = 2000.0
    bars: list[Bar] = []
    divergent = {(f.rank, f.event, f.ts) for f in marked}
    for rank, table in sorted(by_rank.items()):
        index = ScopeIndex.of(table)
        ts, dur = table.columns["ts"], table.columns["dur"]
        lo, hi = origin[rank] + center - half, origin[rank] + center + half
        ops = np.flatnonzero((index.kind == "op") & index.does_work & (index.parent_op < 0) & (ts >= lo) & (ts < hi))
        for r in ops.tolist()[:MAX_BARS // len(by_rank)]:
            key = (rank, str(index.short_name[r]), float(index.launch_ts[r]))
            bars.append(Bar(f"rank {rank}", float(ts[r]) - origin[rank], float(dur[r]), str(index.short_name[r]),
                            str(index.category[r]), "op", ("divergent",) if key in divergent else (), rank,
                            _text(index.source[r])))
    if not bars:
        return None
    start = min(b.start for b in bars)
    end = max(b.start + b.dur for b in bars)
    waits = collective_waits(by_rank, marked[0] if marked else None)
    if run is not None:
        run.waits = waits
    around = (f"around {center_name} (rank {center_rank})" if marked else
              f"around the first collective, {center_name} (rank {center_rank})" if center_name else "")
    title = f"ranks side by side {around}".strip()
    return Timeline(title, start, end, [f"rank {r}" for r in sorted(by_rank)], bars, [], multi_rank=True,
                    stalls=waits.rows if waits is not None else [], rank_run=run)


# -- the whole report ----------------------------------------------------------------------------------------
def _gpu(table: EventTable) -> str | None:
    devices = table.meta.devices
    return devices[0].name if devices else None


def _metadata(tables: list[EventTable], extra: dict[str, Any] | None) -> dict[str, Any]:
    from kernlint.baseline.environment import environment_of, run_metadata_of

    out: dict[str, Any] = {}
    for table in tables[:8]:
        meta = run_metadata_of(table)
        facts = environment_of(meta, table)
        if table.meta.distributed:
            facts["distributed"] = {k: table.meta.distributed.get(k) for k in ("backend", "rank", "world_size")}
        if meta and isinstance(meta.get("nvml"), dict):
            facts["nvml"] = meta["nvml"]
        out[table.path] = facts
    if extra:
        out["run"] = extra
    return out


def _baseline_rows(report: TraceReport, rules: dict[str, Rule]) -> list[BaselineRow]:
    """The baseline table's rows; what each changed as its rule's check kind declares (CheckKind.baseline_change),
    else as the finding says."""
    rows = []
    for f in sorted_findings(report.findings):
        f = clean_finding(f)
        rule = rules.get(f.rule)
        declared = rule.kind.baseline_change if rule is not None else None
        kind = ((declared(rule.spec.check) if declared is not None else None) or (f.details or {}).get("direction")
                or (f.details or {}).get("change") or "change")
        rows.append(BaselineRow(f.rule, kind, f.event, f.scope, f.message, f.source, f.details, f.severity))
    return rows


def build_report_view(result: CheckResult, tables: list[EventTable], *, title: str = "kernlint report",
                      metadata: dict[str, Any] | None = None) -> ReportView:
    """The report of a check: `result` with the tables it was made from (same traces, any order)."""
    rules = {r.id: r for r in result.rules}
    by_path = {t.path: t for t in tables}
    views = [_finding_view(f"finding-{n + 1}", cause, rules.get(cause.rule))
             for n, cause in enumerate(causes_of(result))]
    verdicts = []
    for rule in result.rules:
        status = result.rule_status(rule.id)
        # Why the rule has the verdict it has: the reasons of the outcomes with that verdict.
        reasons = sorted({o.reason for r in result.reports for o in r.outcomes
                          if o.rule == rule.id and o.reason and o.status == status})
        verdicts.append(VerdictRow(rule.id, rule.name, rule.severity, status, reasons))
    traces: list[TraceView] = []
    for n, report in enumerate(r for r in result.reports if r.subject == "trace"):
        table = by_path.get(report.trace)
        if table is None:
            continue
        index = ScopeIndex.of(table)
        own = [v for v in views if _is_own(v.finding, report, rules)]
        timelines: list[Timeline] = []
        seen: dict[tuple, Timeline] = {}
        for view in own:
            f = view.finding
            if f.event_kind in ("alloc", "free"):   # drawn on the allocation chart
                view.timeline_id = "allocations"
                continue
            row = _find_row(index, f)
            if row is None:
                continue
            window = _window(index, row, f.scope)
            timeline = seen.get(window)
            if timeline is None:
                if len(timelines) >= MAX_TIMELINES:
                    continue
                timeline = seen[window] = scope_timeline(table, index, row, window, f.scope or "no scope")
                timelines.append(timeline)
            _mark(timeline, row, f.anchor)
            timeline.finding_ids.append(view.id)
            view.timeline_id = f"tl-{n}-{timelines.index(timeline)}"
        kernels, omitted = kernel_rows(table)
        axis = trace_axis(table)
        traces.append(TraceView(
            f"trace-{n}", report.trace, report.rank, report.events, report.has_device_events, report.has_stacks,
            _gpu(table), kernels, omitted,
            scope_rows(table, index, [f for f in report.findings if _is_own(f, report, rules)]),
            allocations(table, axis), timelines, list(report.damage), list(report.notes),
            time=report.time, time_id=anchor(n) if report.time else None, axis=axis,
            time_section=time_section(report.time, axis[0]) if report.time else None))
        if report.time:
            traces[-1].time_section.findings = finding_times(report.time, report.trace, views)
        traces[-1].step = step_timeline(table, index, [(v.id, v.finding, v.finding.anchor) for v in own])
        if report.time:   # the findings link to where their time falls in the trace's breakdown
            for view in own:
                view.time_id = view.time_id or anchor(n)
    cross = []
    for run in rank_runs(result, tables):   # every run group: the ranks of one run and profiling cycle
        timeline = rank_timeline([by_path[p] for _, p in run.traces], run.findings, run)
        if timeline is not None:
            paths = {p for _, p in run.traces}
            ids = {v.id for v in views if v.finding.trace in paths and v.finding.rank is not None
                   and rules.get(v.finding.rule) is not None and rules[v.finding.rule].cross_rank}
            timeline.finding_ids = sorted(ids)
            cross.append(timeline)
    baseline_reports = [r for r in result.reports if r.subject == "baseline"]
    counts = defaultdict(int)
    for v in verdicts:
        counts[v.status] += 1
    return ReportView(
        title=title, exit_code=result.exit_code, verdicts=verdicts, findings=views, traces=traces,
        cross_rank=cross,
        baseline=[row for r in baseline_reports for row in _baseline_rows(r, rules)] if baseline_reports else None,
        baseline_warnings=[w for r in baseline_reports for w in r.warnings],
        metadata=_metadata(tables, metadata), notes=list(result.notes), counts=dict(counts),
        gate=_GATE.get(result.exit_code, "see the exit codes in the README"), rank_times=rank_tables(traces))


def _is_own(f: Finding, report: TraceReport, rules: dict[str, Rule]) -> bool:
    """A finding of the trace's own rules, on that trace (not a cross-rank or baseline rule's)."""
    return f.trace == report.trace and f.rule in rules and not rules[f.rule].cross_rank \
        and not rules[f.rule].needs_baseline


def _finding_view(view_id: str, cause: Cause, rule: Rule | None) -> FindingView:
    shown = clean_finding(cause.representative)
    others = [clean_finding(f) for f in cause.findings if f is not cause.representative]

    def listed(f: Finding) -> InstanceView:
        return InstanceView(f.trace, f.rank, f.scope, instance_step(f), f.ts, f.device_us, f.bytes)

    return FindingView(view_id, shown, rule, instances=others[:MAX_INSTANCES], count=cause.count,
                       listed=[listed(f) for f in [shown] + others[:MAX_INSTANCES]],
                       where=describe_instances(cause) if cause.count > 1 else "")


# What `kernlint check` exits with, in the words of the gate that reads it.
_GATE = {ExitCode.CLEAN: "passes: no finding at or above --fail-on, everything checked",
         ExitCode.FINDINGS: "fails: findings at or above --fail-on",
         ExitCode.INCOMPLETE: "incomplete: something could not be fully checked"}


def _mark(timeline: Timeline, row: int, anchor: str | None) -> None:
    """Mark a finding's event, and the kernels or ops of its anchor, in the timeline that holds them."""
    for bar in timeline.bars:
        if bar.row == row and bar.kind != "runtime":
            bar.marks = tuple(sorted(set(bar.marks) | {"offending"}))
        elif anchor and bar.name == anchor and bar.kind != "runtime":
            bar.marks = tuple(sorted(set(bar.marks) | {"anchor"}))


def audit_report_view(run) -> ReportView:
    """The report of an audit (kernlint.audit.AuditRun run with tables kept): every workload's traces and
    verdicts, its expected verdicts beside them, and the baseline comparison when there was one."""
    reports = [r for v in run.verdicts if v.report is not None for r in ([v.report] if v.ranks == 1 else [])]
    reports += [r for v in run.verdicts if v.ranks > 1 for r in v.rank_reports]
    if run.baseline_report is not None:
        reports.append(run.baseline_report)
    tables = [t for v in run.verdicts for t in v.tables]
    rules = [r for r in run.rules if run.baseline_report is not None or not r.needs_baseline]
    code = ExitCode.CLEAN if run.all_as_expected else ExitCode.FINDINGS
    result = CheckResult(reports=reports, rules=rules, exit_code=code)
    view = build_report_view(result, tables, title=f"kernlint audit on {run.device}", metadata=run.metadata)
    view.gate = ("every workload got the verdicts it must get: the regressed ones are caught" if run.all_as_expected
                 else "a workload did not get the verdicts it must get")
    view.workloads = [{"name": v.workload.name, "kind": "regressed" if v.workload.regressed else "fixed",
                       "ranks": v.ranks, "expected": ", ".join(f"{r} {s}" for r, s in v.workload.expect.items()),
                       "actual": ", ".join(f"{o.rule} {o.status}" for o in (v.report.outcomes if v.report else [])
                                           if o.rule in v.workload.expect),
                       "ok": v.ok, "problems": "; ".join(v.problems)} for v in run.verdicts]
    return view
