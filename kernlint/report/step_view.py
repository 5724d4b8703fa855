"""The step timeline of a trace, as plain data: one whole step (a `ProfilerStep#N`, a CUDA-graph replay, or the
profiled window: the steps of kernlint.trace.time_breakdown) with its host ops, its launches and its device
streams, the findings marked on it. The HTML report draws it with templates/timeline.js (zoom, pan, search,
a click for an event's details).

Which step: the one the worst finding of the trace is in; without one, the step of median device wall time
(a typical step, not the warm-up). What is drawn is bounded: at most MAX_EVENTS events. Past that, the events
shorter than one of BINS slices of the step are merged per lane and slice into one ("N events"), and if that
is still too many, the longest are kept (the marked ones always); `merged` and `dropped` say how many, and the
report says so. Ops nested deeper than MAX_OP_DEPTH are left out (their outer op is drawn).

Times are µs from the step's start; `start_us` is the step's start in the trace's own clock (kineto's `ts`),
which the Perfetto button uses to open the trace at the step.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field

import numpy as np

from kernlint.trace import names
from kernlint.trace.kinds import DEVICE_KINDS
from kernlint.trace.scopes import ScopeIndex
from kernlint.trace.table import EventTable
from kernlint.trace.time_breakdown import GRAPH_REPLAY, PROFILED_WINDOW, PROFILER_STEP, device_steps

MAX_EVENTS = 4000
BINS = 1500              # slices of the step: events shorter than one are merged per lane when over MAX_EVENTS
MAX_OP_DEPTH = 3         # op levels drawn (0: the outermost)
KINDS = ("op", "runtime", "kernel", "memcpy", "memset", "merged")


@dataclass
class StepTimeline:
    """Everything timeline.js needs, as columns (one entry per event) and a table of distinct strings."""

    title: str                       # "ProfilerStep#4", "graph replay 3 of 8", "the profiled window"
    basis: str                       # kernlint.trace.time_breakdown's basis
    step: int                        # which of `steps` (0-based, in time order)
    steps: int
    start_us: float                  # the step's start, in the trace's clock
    span_us: float
    lanes: list[str]                 # lane labels, top to bottom
    depths: list[int]                # rows of each lane (op nesting levels drawn)
    strings: list[str] = field(default_factory=list)
    # One entry per event: lane, depth, start, dur (µs from start_us), kind (index into KINDS), category, name,
    # op, source, args (indices into strings), mark ("" / "offending" / "anchor"), finding id ("" for none),
    # merged count (1 for an event of the trace).
    lane: list[int] = field(default_factory=list)
    depth: list[int] = field(default_factory=list)
    start: list[float] = field(default_factory=list)
    dur: list[float] = field(default_factory=list)
    kind: list[int] = field(default_factory=list)
    category: list[int] = field(default_factory=list)
    name: list[int] = field(default_factory=list)
    op: list[int] = field(default_factory=list)
    source: list[int] = field(default_factory=list)
    args: list[int] = field(default_factory=list)
    mark: list[str] = field(default_factory=list)
    finding: list[str] = field(default_factory=list)
    count: list[int] = field(default_factory=list)
    total: int = 0                   # events of the step (before merging and capping)
    merged: int = 0                  # events merged into "N events" bars
    dropped: int = 0                 # events left out past MAX_EVENTS
    deep_ops: int = 0                # ops nested deeper than MAX_OP_DEPTH, not drawn
    device_events: int = 0           # device events of the step (drawn or merged)
    merge_us: float = 0.0            # events shorter than this were merged (0: none)
    focus: tuple[float, float] | None = None   # the worst finding's event (µs from start_us, start and end)
    finding_ids: list[str] = field(default_factory=list)

    @property
    def drawn(self) -> int:
        return len(self.lane)

    @property
    def kernels(self) -> int:
        """Device events drawn one by one."""
        return sum(1 for k in self.kind if KINDS[k] in ("kernel", "memcpy", "memset"))

    def as_json(self) -> dict:
        return {"title": self.title, "basis": self.basis, "step": self.step, "steps": self.steps,
                "start": self.start_us, "span": self.span_us, "lanes": self.lanes, "depths": self.depths,
                "kinds": list(KINDS), "strings": self.strings,
                "ev": [self.lane, self.depth, [round(x, 3) for x in self.start], [round(x, 3) for x in self.dur],
                       self.kind, self.category, self.name, self.op, self.source, self.args, self.mark,
                       self.finding, self.count],
                "focus": list(self.focus) if self.focus else None}


def _text(value) -> str:
    return value if isinstance(value, str) else ""


def _finding_row(index: ScopeIndex, finding) -> int | None:
    """The event a finding points at: same readable name, launched at the finding's time."""
    if finding.ts is None or not math.isfinite(finding.ts):
        return None
    hits = np.flatnonzero((index.launch_ts == finding.ts) & (index.short_name == finding.event))
    return int(hits[0]) if len(hits) else None


def _step_names(index: ScopeIndex) -> list:
    steps = index.named_scopes(annotations=[names.named_pattern("profiler-step-range")])
    return sorted((s for s in steps if s.kind == "annotation"), key=lambda s: s.ts)


def step_timeline(table: EventTable, index: ScopeIndex, findings: list) -> StepTimeline | None:
    """The step to draw for `table`: `findings` are (view id, Finding, anchor name or None), worst first.
    None for a trace without device events."""
    rows, step, n_steps, basis = device_steps(table, index)
    if rows is None or not len(rows) or n_steps <= 0:
        return None
    f = table.columns
    ts, end = f["ts"], f["end"]
    replay = index.replay
    # Where the host issued each device row: its launch, or for a replayed kernel the graph launch.
    rep = replay[rows]
    issued = np.where(rep >= 0, ts[np.maximum(rep, 0)], index.launch_ts[rows])
    issued = np.where(np.isfinite(issued), issued, ts[rows])
    marks: dict[int, tuple[str, str]] = {}
    chosen = None
    for view_id, finding, _anchor in findings:
        row = _finding_row(index, finding)
        if row is None:
            continue
        marks.setdefault(row, ("offending", view_id))
        if chosen is None:
            device = rows.searchsorted(row) if str(index.kind[row]) in DEVICE_KINDS else -1
            if 0 <= device < len(rows) and rows[device] == row and step[device] >= 0:
                chosen = int(step[device])
            else:   # a host event: the step its time falls in
                t = float(ts[row])
                lo = np.full(n_steps, np.inf)
                hi = np.full(n_steps, -np.inf)
                ok = step >= 0
                np.minimum.at(lo, step[ok], issued[ok])
                np.maximum.at(hi, step[ok], end[rows][ok])
                inside = np.flatnonzero((lo <= t) & (t <= hi))
                if len(inside):
                    chosen = int(inside[0])
    if chosen is None:   # a typical step: the one of median device wall time
        ok = step >= 0
        lo = np.full(n_steps, np.inf)
        hi = np.full(n_steps, -np.inf)
        np.minimum.at(lo, step[ok], ts[rows][ok])
        np.maximum.at(hi, step[ok], end[rows][ok])
        walls = np.where(np.isfinite(lo) & np.isfinite(hi), hi - lo, np.nan)
        valid = np.flatnonzero(np.isfinite(walls))
        if not len(valid):
            return None
        order = valid[np.argsort(walls[valid], kind="stable")]
        chosen = int(order[len(order) // 2])
    mine = rows[step == chosen]
    lo = float(np.nanmin(issued[step == chosen]))
    hi = float(np.nanmax(end[mine]))
    title = {PROFILED_WINDOW: "the profiled window", GRAPH_REPLAY: f"graph replay {chosen + 1} of {n_steps}"
             }.get(basis, f"step {chosen + 1} of {n_steps}")
    if basis == PROFILER_STEP:
        for s in _step_names(index):
            if s.ts <= lo <= s.end or lo <= s.ts <= hi:
                title = f"{s.name or 'ProfilerStep'} (step {chosen + 1} of {n_steps})"
                lo, hi = min(lo, float(s.ts)), max(hi, float(s.end))
                break
    return _build(table, index, mine, lo, hi, title, basis, chosen, n_steps, marks, findings)


def _merge(start: np.ndarray, length: np.ndarray, lane: np.ndarray, depths: np.ndarray, marked: np.ndarray,
           px: float, bins: int) -> tuple[np.ndarray, list[np.ndarray], int]:
    """Events shorter than px (never a marked one) merged per lane, level and slice of px: (the events kept
    whole, the merged groups, how many events the groups hold)."""
    tiny = (length < px) & ~marked
    big = np.flatnonzero(~tiny)
    small = np.flatnonzero(tiny)
    key = (lane[small] * (MAX_OP_DEPTH + 1) + depths[small]) * (bins + 1) + np.minimum(
        (start[small] / px).astype(np.int64), bins)
    order = np.argsort(key, kind="stable")
    small, key = small[order], key[order]
    parts = np.split(small, np.flatnonzero(np.diff(key)) + 1) if len(small) else []
    singles = np.array([p[0] for p in parts if len(p) == 1], dtype=np.int64)
    groups = [p for p in parts if len(p) > 1]
    return np.sort(np.concatenate([big, singles])), groups, sum(len(p) for p in groups)


def _build(table: EventTable, index: ScopeIndex, device: np.ndarray, lo: float, hi: float, title: str, basis: str,
           chosen: int, n_steps: int, marks: dict[int, tuple[str, str]], findings: list) -> StepTimeline:
    f = table.columns
    ts, end = f["ts"], f["end"]
    kind = index.kind
    host_kinds = index.is_kind("op", "runtime")
    finite = np.isfinite(ts) & np.isfinite(end)
    host = np.flatnonzero(host_kinds & finite & (ts < hi) & (end > lo))
    # Op nesting: depth by walking parent_op a few levels.
    is_op = kind[host] == "op"
    depth = np.zeros(len(host), dtype=np.int64)
    parent = index.parent_op[host].astype(np.int64).copy()
    parent[~is_op] = -1
    for _ in range(MAX_OP_DEPTH + 1):
        up = (parent >= 0) & (parent != host)
        if not up.any():
            break
        depth[up] += 1
        nxt = np.full(len(parent), -1, dtype=np.int64)
        nxt[up] = index.parent_op[parent[up]]
        nxt[nxt == parent] = -1
        parent = nxt
    deep = is_op & (depth >= MAX_OP_DEPTH)
    deep_ops = int(deep.sum())
    host, depth = host[~deep], depth[~deep]
    depth[kind[host] != "op"] = 0
    rows = np.concatenate([host, device])
    depths = np.concatenate([depth, np.zeros(len(device), dtype=np.int64)])
    # Lanes: per host thread, its ops and its launches; per device and stream, its work.
    threads = f["thread"]
    labels = []
    for r in rows.tolist():
        k = kind[r]
        if k == "op":
            labels.append(f"CPU ops · thread {threads[r]}")
        elif k == "runtime":
            labels.append(f"launches · thread {threads[r]}")
        else:
            stream = int(f["stream"][r])
            labels.append(f"GPU {int(f['device'][r])} stream {stream}" if stream >= 0 else f"GPU {int(f['device'][r])}")
    distinct = sorted(set(labels), key=lambda s: (s.startswith("GPU"), s.startswith("launches"), s))
    lane_of = {s: i for i, s in enumerate(distinct)}
    lane = np.array([lane_of[s] for s in labels], dtype=np.int64)
    lane_depths = [1] * len(distinct)
    for ln, d in zip(lane.tolist(), depths.tolist()):
        lane_depths[ln] = max(lane_depths[ln], d + 1)
    start = np.maximum(ts[rows], lo) - lo
    stop = np.minimum(end[rows], hi) - lo
    length = np.maximum(stop - start, 0.0)
    marked = np.array([r in marks for r in rows.tolist()], dtype=bool)
    total = len(rows)
    span = max(hi - lo, 1e-3)
    # Anchors: the kernels or ops an anchored finding names, in this step.
    anchors = {a for _, _, a in findings if a}
    keep = np.arange(len(rows))
    groups: list[np.ndarray] = []
    merged = dropped = 0
    bins = BINS
    if total > MAX_EVENTS:
        # Coarser slices until the merged bars fit; past the coarsest, the longest events are kept.
        for bins in (BINS, 600, 250, 100):
            keep, groups, merged = _merge(start, length, lane, depths, marked, span / bins, bins)
            if len(keep) + len(groups) <= MAX_EVENTS:
                break
        if len(keep) + len(groups) > MAX_EVENTS:
            room = MAX_EVENTS - len(groups)
            if room < MAX_EVENTS // 2:   # too many merged bars too: keep the largest groups
                groups.sort(key=lambda p: -float(length[p].sum()))
                dropped += sum(len(p) for p in groups[MAX_EVENTS // 2:])
                merged -= sum(len(p) for p in groups[MAX_EVENTS // 2:])
                groups = groups[:MAX_EVENTS // 2]
                room = MAX_EVENTS - len(groups)
            must = keep[marked[keep]]
            rest = keep[~marked[keep]]
            rest = rest[np.argsort(-length[rest], kind="stable")][:max(room - len(must), 0)]
            dropped += len(keep) - len(must) - len(rest)
            keep = np.sort(np.concatenate([must, rest]))
    tl = StepTimeline(title=title, basis=basis, step=chosen, steps=n_steps, start_us=lo, span_us=span,
                      lanes=distinct, depths=lane_depths, total=total, merged=merged, dropped=dropped,
                      deep_ops=deep_ops, device_events=len(device))
    strings: dict[str, int] = {}

    def s(value: str) -> int:
        value = value or ""
        at = strings.get(value)
        if at is None:
            at = strings[value] = len(strings)
        return at

    s("")
    names_col, short, category, source = index.name, index.short_name, index.category, index.source
    for i in keep.tolist():
        r = int(rows[i])
        k = str(kind[r])
        if k == "op":
            op_name, src = str(names_col[r]), _text(source[r])
        elif k == "runtime":
            p = int(index.parent_op[r]) if index.parent_op[r] >= 0 else int(index.op[r])
            op_name, src = (str(names_col[p]) if p >= 0 else ""), (_text(source[p]) if p >= 0 else "")
        else:
            o = int(index.op[r])
            launcher = int(index.launcher[r])
            op_name = str(names_col[o]) if o >= 0 else ""
            src = _text(source[r]) or (_text(source[launcher]) if launcher >= 0 else "")
        args = [f"{key}={value}" for key, value in (
            ("correlation", int(f["correlation"][r])), ("stream", int(f["stream"][r])),
            ("device", int(f["device"][r])), ("bytes", int(f["bytes"][r])), ("dtype", _text(f["dtype"][r])),
            ("thread", str(threads[r]))) if value not in (-1, 0, "") or key == "thread"]
        display = str(short[r]) if k not in ("op", "runtime") else str(names_col[r])
        mark, fid = marks.get(r, ("", ""))
        if not mark and anchors and k != "runtime" and display in anchors:
            mark = "anchor"
        tl.lane.append(int(lane[i]))
        tl.depth.append(int(depths[i]))
        tl.start.append(float(start[i]))
        tl.dur.append(float(length[i]))
        tl.kind.append(KINDS.index(k) if k in KINDS else KINDS.index("kernel"))
        tl.category.append(s(str(category[r])))
        tl.name.append(s(display if k in ("op", "runtime") else str(names_col[r])))
        tl.op.append(s(op_name))
        tl.source.append(s(src))
        tl.args.append(s(", ".join(args)))
        tl.mark.append(mark)
        tl.finding.append(fid)
        tl.count.append(1)
        if mark == "offending" and tl.focus is None:
            tl.focus = (float(start[i]), float(start[i] + length[i]))
    for p in groups:
        first = int(p[0])
        a, b = float(start[p].min()), float((start[p] + length[p]).max())
        common = str(short[rows[first]]) if kind[rows[first]] not in ("op", "runtime") else str(names_col[rows[first]])
        tl.lane.append(int(lane[first]))
        tl.depth.append(int(depths[first]))
        tl.start.append(a)
        tl.dur.append(b - a)
        tl.kind.append(KINDS.index("merged"))
        tl.category.append(s("merged-device" if kind[rows[first]] in DEVICE_KINDS else "merged"))
        tl.name.append(s(f"{len(p)} events (first: {common})"))
        tl.op.append(s(""))
        tl.source.append(s(""))
        tl.args.append(s(f"{len(p)} events shorter than {span / bins:.2f} µs merged"))
        tl.mark.append("")
        tl.finding.append("")
        tl.count.append(len(p))
    tl.merge_us = span / bins if groups else 0.0
    tl.strings = list(strings)
    tl.finding_ids = sorted({fid for fid in tl.finding if fid})
    return tl


def _script_json(value) -> str:
    """JSON to put inside a <script type="application/json">: nothing in it can end the element."""
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def step_context(view, embed: str = "auto") -> dict:
    """What templates/step_timeline.html.j2 needs besides the view: each step's JSON, the embedded traces
    (kernlint.report.perfetto) and the range each Perfetto button opens at (ns, the trace's clock: the worst
    finding's event widened to a tenth of the step, else the step)."""
    from kernlint.report.perfetto import embed_traces

    step_json, ranges = {}, {}
    for t in view.traces:
        s = t.step
        if s is None:
            continue
        step_json[t.id] = _script_json(s.as_json())
        a, b = 0.0, s.span_us
        if s.focus:
            pad = max(s.span_us / 20, 10.0)
            a, b = max(s.focus[0] - pad, 0.0), min(s.focus[1] + pad, s.span_us)
        ranges[t.id] = (int((s.start_us + a) * 1000), int(math.ceil((s.start_us + b) * 1000)))
    embedded = embed_traces([t.path for t in view.traces], embed)
    return {"step_json": step_json, "perfetto_ranges": ranges, "embedded": embedded,
            "max_events": MAX_EVENTS, "max_depth": MAX_OP_DEPTH}
