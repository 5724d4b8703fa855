"""The HTML report's "Where the time goes" of each trace, as plain data from its breakdown (`TraceReport.time`,
kernlint.trace.time_breakdown): every step's device time by category and idle (they add up to the step's wall
time on one stream), launch delay, communication overlap, the findings that fall in the trace with the category
their cost is in, and for a folder of ranks one row per rank. Also the trace's time axis, which its charts
(the steps strip, the allocation curve) share, and their layout in pixels.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Any

import numpy as np

from kernlint.report.safe import format_bytes, format_duration_us
from kernlint.trace.table import EventTable

# The charts of a trace: the plot's left edge and width, as html_format's timelines (LABEL_WIDTH, PLOT_WIDTH).
CHART_LEFT = 170
CHART_WIDTH = 1000
STEP_STRIP_HEIGHT = 46
Y_TICKS = 4            # intervals of the allocation chart's byte axis


@dataclass
class StepRow:
    """One step of a trace, in µs (summed over its devices)."""

    label: str
    wall_us: float
    idle_us: float
    categories: dict[str, float]          # summed durations by breakdown category
    accounted_us: float                   # categories + idle (= wall on one stream)
    launches: int
    launch_delay_mean_us: float | None
    launch_delay_max_us: float | None
    comm_us: float
    comm_overlap_us: float
    start_us: float | None = None         # on the trace's time axis (µs since its start)


@dataclass
class FindingTime:
    """A cause with an instance in this trace: its cost there and the category that cost falls in."""

    view_id: str
    rule: str
    event: str
    finding: Any                 # the instance in this trace (kernlint.rules.result.Finding)
    category: str | None
    category_us_per_step: float | None   # that category's time per step in this trace
    category_share: float | None


@dataclass
class TimeSection:
    columns: list[str]                   # the categories present, largest first
    steps: list[StepRow]
    steps_omitted: int                   # steps beyond what the breakdown lists one by one
    launch_delay: dict | None
    comm_us: float
    comm_overlap_us: float
    comm_overlap_share: float | None
    findings: list[FindingTime] = field(default_factory=list)


@dataclass
class RankRow:
    trace: str
    rank: int | None
    time_id: str | None
    steps: int
    wall_us: float
    idle_share: float
    shares: dict[str, float]             # share of the wall per category
    launch_delay_mean_us: float | None
    comm_us: float
    comm_overlap_share: float | None


@dataclass
class RankTable:
    folder: str
    columns: list[str]
    rows: list[RankRow]


def trace_axis(table: EventTable) -> tuple[float, float]:
    """The trace's time axis (trace clock, µs): its first event's start to its last event's end. Every chart
    of the trace is drawn on it."""
    ts = np.asarray(table.columns["ts"], dtype=np.float64)
    dur = np.asarray(table.columns["dur"], dtype=np.float64)
    ok = np.isfinite(ts)
    if not ok.any():
        return 0.0, 1.0
    end = ts + np.where(np.isfinite(dur) & (dur > 0), dur, 0.0)
    return float(ts[ok].min()), float(end[ok].max())


def time_section(time: dict, origin: float | None = None) -> TimeSection:
    """The section's data from a breakdown (TimeBreakdown.as_dict); `origin`: the trace axis' start, so that the
    steps' starts are on it."""
    columns = [c["category"] for c in time["categories"]]
    steps = []
    for s in time.get("per_step") or []:
        cats = dict(s["categories"])
        for c in cats:
            if c not in columns:
                columns.append(c)
        steps.append(StepRow(s["label"], s["wall_us"], s["idle_us"], cats,
                             math.fsum(list(cats.values()) + [s["idle_us"]]), s["launches"],
                             s["launch_delay_mean_us"], s["launch_delay_max_us"], s["comm_us"], s["comm_overlap_us"],
                             None if origin is None else s["start_us"] - origin))
    return TimeSection(columns, steps, max(0, time["steps"] - len(steps)), time.get("launch_delay"),
                       time.get("comm_us", 0.0), time.get("comm_overlap_us", 0.0), time.get("comm_overlap_share"))


def finding_times(time: dict, trace: str, views) -> list[FindingTime]:
    """The causes (FindingView) with an instance in `trace`, each with that instance and where its cost falls."""
    by_category = {c["category"]: c for c in time["categories"]}
    out = []
    for view in views:
        here = [f for f in [view.finding, *view.instances] if f.trace == trace]
        if not here:
            continue
        f = here[0]
        category = f.cost.category if f.cost is not None else None
        known = by_category.get(category) if category else None
        out.append(FindingTime(view.id, f.rule, f.event, f, category,
                               known["us_per_step"] if known else None, known["share"] if known else None))
    return out


def rank_tables(traces) -> list[RankTable]:
    """For each folder holding two or more ranks' traces with a breakdown: one row per rank (TraceView)."""
    folders: dict[str, list] = {}
    for t in traces:
        if t.rank is not None and t.time:
            folders.setdefault(str(PurePath(t.path).parent), []).append(t)
    tables = []
    for folder, members in folders.items():
        if len(members) < 2:
            continue
        columns: list[str] = []
        rows = []
        for t in sorted(members, key=lambda t: (t.rank, t.path)):
            time = t.time
            shares = {c["category"]: c["share"] for c in time["categories"]}
            columns += [c for c in shares if c not in columns]
            delay = time.get("launch_delay")
            rows.append(RankRow(t.path, t.rank, t.time_id, time["steps"], time["wall_us"], time["idle"]["share"],
                                shares, delay["mean_us"] if delay else None, time.get("comm_us", 0.0),
                                time.get("comm_overlap_share")))
        tables.append(RankTable(folder, columns, rows))
    return tables


# -- layout (pixels) ----------------------------------------------------------------------------------------
@dataclass
class AxisTicks:
    t0: float                    # the axis' start and end, µs on the trace clock
    t1: float
    ticks: list[tuple[float, str]]


def axis_ticks(span: float) -> list[tuple[float, str]]:
    """Five intervals over the trace's span, labelled from its start; the last label ends at the axis' end."""
    ticks = [(round(CHART_LEFT + CHART_WIDTH * i / 5, 2), f"+{format_duration_us(span * i / 5)}") for i in range(6)]
    x, label = ticks[-1]
    ticks[-1] = (round(x - 8 * len(label), 2), label)
    return ticks


def x_of(t: float, span: float) -> float:
    return round(CHART_LEFT + t * CHART_WIDTH / max(span, 1e-3), 2)


def byte_ticks(peak: int, base: float, height: float) -> list[tuple[float, str]]:
    """(y, label) of the byte axis: 0 to the peak in Y_TICKS steps, in B/KiB/MiB/GiB."""
    top = max(peak, 1)
    return [(round(base - height * i / Y_TICKS, 2), format_bytes(int(round(top * i / Y_TICKS))))
            for i in range(Y_TICKS + 1)]


@dataclass
class StepStrip:
    """The steps of a trace as bands on its time axis: where each step's device wall time lies."""

    width: int
    height: int
    bands: list[tuple[float, float, str, str]]     # x, w, label, tooltip
    ticks: list[tuple[float, str]]
    t0: float
    t1: float


def step_strip(section: TimeSection, axis: tuple[float, float], devices: int = 1) -> StepStrip | None:
    span = max(axis[1] - axis[0], 1e-3)
    bands = []
    for s in section.steps:
        if s.start_us is None:
            continue
        x = x_of(s.start_us, span)
        # The wall of a step is summed over devices: one device's part of it is what lies on the axis.
        w = max(min(s.wall_us / max(devices, 1), span - s.start_us) * CHART_WIDTH / span, 1.5)
        bands.append((x, round(w, 2), s.label, f"{s.label}: {format_duration_us(s.wall_us)} wall, "
                      f"{format_duration_us(s.idle_us)} idle"))
    if not bands:
        return None
    return StepStrip(CHART_LEFT + CHART_WIDTH + 10, STEP_STRIP_HEIGHT, bands, axis_ticks(span), axis[0], axis[1])
