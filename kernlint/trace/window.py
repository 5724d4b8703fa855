"""Profiling-window edges: device work that belongs to launches outside the recorded window.

A profiler window cuts the GPU timeline in two places. When it opens, kernels launched in the previous step
may still be running: they appear with no launch (runtime/driver call) in the trace. When it closes, the
last launches may not have run yet: their calls appear with no device event. Neither is evidence about the
code inside the window, so cross-rank comparisons leave both out and the report counts them.

Device events and launches that miss their partner in the middle of the window are not edges: they are
counted separately as unlinked (a damaged or truncated trace). So is a device event without a launch whose
External id names an op of the trace that does device work, wherever its id or time falls: its op ran
inside the window. Launches issued during CUDA-graph stream
capture are neither: they are recorded into the graph, not run.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kernlint.trace import names
from kernlint.trace.event_columns import EventColumns
from kernlint.trace.kinds import DEVICE_KINDS, category_mask, is_kind
from kernlint.trace.table import EventTable, recorded_launcher

LAUNCH_CATEGORIES = ("launch", "memcpy_call")


@dataclass(frozen=True)
class WindowEdges:
    before_start: np.ndarray      # device events with no launch, issued before the first launch in the window
    past_end: np.ndarray          # launch calls with no device event, after the last launch that ran
    unlinked_device: np.ndarray   # device events with no launch, inside the window
    unlinked_launches: np.ndarray  # launch calls with no device event, inside the window

    def counts(self) -> dict[str, int]:
        """What lies outside the window, by kind (zero counts left out)."""
        return {k: int(len(v)) for k, v in (
            ("device events launched before the window opened", self.before_start),
            ("launches whose device work falls past the window's end", self.past_end)) if len(v)}

    def unlinked_counts(self) -> dict[str, int]:
        """Device events and launches that miss their partner inside the window (damage, not an edge)."""
        return {k: int(len(v)) for k, v in (
            ("device events with no launch inside the window", self.unlinked_device),
            ("launches with no device event inside the window", self.unlinked_launches)) if len(v)}

    @property
    def outside(self) -> np.ndarray:
        return np.concatenate([self.before_start, self.past_end])


def window_edges(table: EventTable) -> WindowEdges:
    found = table.caches.window_edges
    if found is None:
        found = table.caches.window_edges = _compute(table)
    return found


def _captured(f: EventColumns, rows: np.ndarray) -> np.ndarray:
    """Which of these launch calls were issued during stream capture (between a begin and an end capture
    call on the same thread): recorded into a CUDA graph, they never run on their own."""
    if not len(rows):
        return np.zeros(0, dtype=bool)
    runtime = np.flatnonzero(is_kind(f, "runtime"))
    names_ = f["name"]
    thread = f["thread"]
    ts = f["ts"]
    spans: dict[str, list[tuple[float, float]]] = {}
    open_at: dict[str, float] = {}
    for r in runtime[np.argsort(ts[runtime], kind="stable")].tolist():
        name = str(names_[r])
        if names.GRAPH_CAPTURE_BEGIN.match(name):
            open_at[thread[r]] = ts[r]
        elif names.GRAPH_CAPTURE_END.match(name) and thread[r] in open_at:
            spans.setdefault(thread[r], []).append((open_at.pop(thread[r]), ts[r]))
    if not spans:
        return np.zeros(len(rows), dtype=bool)
    return np.array([any(a <= ts[r] <= b for a, b in spans.get(thread[r], ())) for r in rows.tolist()], dtype=bool)


def _compute(table: EventTable) -> WindowEdges:
    f = table.columns
    launcher = recorded_launcher(f)   # a replayed kernel ran from its graph launch
    correlation = f["correlation"]
    ts = f["ts"]
    device = is_kind(f, *DEVICE_KINDS)
    launches = np.flatnonzero(is_kind(f, "runtime") & category_mask(f, LAUNCH_CATEGORIES) & (correlation >= 0))
    linked_calls = np.zeros(len(f), dtype=bool)
    linked_calls[launcher[device & (launcher >= 0)]] = True
    ran = launches[linked_calls[launches]]
    orphans = np.flatnonzero(device & (launcher < 0))
    empty = launches[~linked_calls[launches]]
    captured = _captured(f, empty)
    empty = empty[~captured]
    ran_ts = ts[ran][np.isfinite(ts[ran])]   # a launch whose ts is unusable (counted as damage) sets no edge
    if len(ran) and len(ran_ts):
        first_corr = int(correlation[ran].min())
        first_ts = float(ran_ts.min())
        last_ts = float(ran_ts.max())
        # A kernel of the previous step: its id predates every launch here (ids grow), or, with no id, it
        # started before the first launch that ran. Never one whose External id names an op of this trace
        # that does device work: that op, and so its launch, ran inside the window (kineto gives
        # previous-step kernels no External id), so its missing launch is damage, not an edge.
        early = np.where(correlation[orphans] >= 0, correlation[orphans] < first_corr, ts[orphans] < first_ts)
        external = f["external_id"]
        op_ids = external[is_kind(f, "op") & (external >= 0) & f["does_work"]]
        early &= ~((external[orphans] >= 0) & np.isin(external[orphans], op_ids))
        late = ts[empty] > last_ts
    else:  # nothing linked at all: no window to speak of; everything is unlinked
        early = np.zeros(len(orphans), dtype=bool)
        late = np.zeros(len(empty), dtype=bool)
    return WindowEdges(before_start=orphans[early], past_end=empty[late], unlinked_device=orphans[~early],
                       unlinked_launches=empty[~late])
