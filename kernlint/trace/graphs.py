"""CUDA-graph replays: which captured launch each replayed kernel is.

A replay shows one `cudaGraphLaunch` (`hipGraphLaunch`) and the device events it ran, linked to it by
correlation id: no per-kernel launch, op, module or Python frame. The launches made while the graph was
captured (between `cudaStreamBeginCapture` and `cudaStreamEndCapture` on one thread) carry all of that but
never ran. When a capture is in the table (inside the profiled window, or merged in from a capture trace
by `kernlint.trace.load.load_trace(..., captures=...)`), each replay is matched to the capture whose launch
sequence is its kernel sequence, and every replayed kernel takes its captured launch as its launcher: its
op, module, Python frame, source line and launch thread are the captured ones, like an eager kernel's.
The `replay` column says which graph launch ran it, so that scopes count one replay at a time.

Where the trace records graph node ids (`graph node id` on the replayed kernels and on the launches that
created the nodes during capture), they decide, kernel by kernel. Otherwise matching is by sequence, not
position alone: a capture is a candidate for a replay when it recorded as
many launches as the replay ran device events, and it matches when every launch fits its device event in
order (the same kind of device work; the same kernel name where the launch names it, as ROCm's do; a
compatible category where only the launching op says what it is). Graphs with several streams replay in
an order that can differ from the capture's: then each launch takes the first unused event that fits.
Several graphs of one kernel sequence (a piecewise graph per layer, a graph per batch size) match alike:
replays take them in capture order, cycling (runners replay what they captured, layer after layer), and
such replays are counted as ambiguous (their code is the same; their shapes may not be). Replays no
capture fits stay linked to their graph launch and are counted as unattributed.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from kernlint.trace import names
from kernlint.trace.event_columns import EventColumns
from kernlint.trace.table import DEVICE_KINDS, EventTable, is_kind

# The columns a replayed kernel takes from the captured launch it was matched to.
CONTEXT_COLUMNS = ("op", "top_op", "annotation", "module", "frame", "user_frame", "thread", "source")
# Launching-op categories precise enough to check a kernel against; other ops (views, custom ops, "other")
# fit any kernel.
_CHECKED_OP_CATEGORIES = {"fill": {"fill", "memset"}, "gemm": {"gemm"}, "quant": {"quant"},
                          "reduce": {"reduce"}, "rng": {"rng"}, "comm": {"comm"}}


@dataclass(frozen=True)
class CaptureWindow:
    """One stream capture: the launches recorded into a graph, in issue order."""

    index: int
    thread: str
    begin: int              # row of the BeginCapture call
    end: int                # row of the EndCapture call
    launches: np.ndarray    # rows of the launch calls recorded into the graph
    label: str              # the innermost range that holds it (vLLM: capture_16_FULL), else "capture N"


@dataclass
class GraphReplays:
    """What the trace's graph replays are and how many of their device events were attributed."""

    replays: int = 0
    kernels: int = 0                 # device events run by graph launches
    attributed_kernels: int = 0
    device_us: float = 0.0
    attributed_device_us: float = 0.0
    captures: int = 0
    by_node_id: int = 0              # replays attributed through graph node ids rather than kernel sequence
    unmatched_replays: int = 0
    ambiguous_replays: int = 0
    labels: dict[int, str] = field(default_factory=dict)   # graph launch row -> capture label

    def as_dict(self) -> dict:
        return {"replays": self.replays, "kernels": self.kernels, "attributed_kernels": self.attributed_kernels,
                "device_us": round(self.device_us, 3), "attributed_device_us": round(self.attributed_device_us, 3),
                "captures": self.captures, "by_node_id": self.by_node_id, "unmatched_replays": self.unmatched_replays,
                "ambiguous_replays": self.ambiguous_replays}

    def summary(self) -> str | None:
        """One line for the text report; None when the trace replays no graph."""
        if not self.replays:
            return None
        share = 100.0 * self.attributed_kernels / self.kernels if self.kernels else 0.0
        time_share = 100.0 * self.attributed_device_us / self.device_us if self.device_us else 0.0
        line = (f"CUDA graphs: {self.replays} replay(s) ran {self.kernels} device event(s); "
                f"{self.attributed_kernels} ({share:.0f}%, {time_share:.0f}% of their device time) attributed "
                f"to captured launches")
        if not self.captures and not self.by_node_id:
            line += " (no capture in the trace: pass the capture trace too, or --capture FILE)"
        elif self.unmatched_replays:
            line += f"; {self.unmatched_replays} replay(s) matched no capture"
        return line


def graph_replays(table: EventTable) -> GraphReplays:
    """The table's replay statistics (attribute_replays made them; an empty record for other tables)."""
    return table.derived.get("graph_replays") or GraphReplays()


def capture_windows(columns: EventColumns) -> list[CaptureWindow]:
    """Stream captures per host thread: each BeginCapture with the next EndCapture on its thread."""
    name = columns["name"]
    runtime = np.flatnonzero(is_kind(columns, "runtime"))
    if not len(runtime):
        return []
    rnames = name[runtime]
    begins = [r for r, n in zip(runtime.tolist(), rnames.tolist()) if names.GRAPH_CAPTURE_BEGIN.match(n)]
    if not begins:
        return []
    ends = [r for r, n in zip(runtime.tolist(), rnames.tolist()) if names.GRAPH_CAPTURE_END.match(n)]
    thread = columns["thread"]
    ts = columns["ts"]
    category = columns["category"]
    annotation = columns["annotation"]
    launches = runtime[np.isin(category[runtime], ("launch", "memcpy_call"))
                       & ~np.array([names.is_graph_launch(n) for n in rnames.tolist()], dtype=bool)]
    out: list[CaptureWindow] = []
    for t in sorted({thread[b] for b in begins}):
        b_rows = sorted((r for r in begins if thread[r] == t), key=lambda r: ts[r])
        e_rows = sorted((r for r in ends if thread[r] == t), key=lambda r: ts[r])
        mine = launches[thread[launches] == t]
        mine = mine[np.argsort(ts[mine], kind="stable")]
        for b in b_rows:
            e = next((r for r in e_rows if ts[r] > ts[b]), None)
            if e is None:
                continue
            inside = mine[(ts[mine] > ts[b]) & (ts[mine] < ts[e])]
            a = int(annotation[b])
            label = str(name[a]) if a >= 0 else f"capture {len(out) + 1}"
            out.append(CaptureWindow(len(out), str(t), int(b), int(e), inside, label))
    return out


def _replays(columns: EventColumns) -> list[tuple[int, np.ndarray]]:
    """(graph launch row, its device events in the order they ran) for every graph launch that ran any."""
    name = columns["name"]
    launcher = columns["launcher"]
    runtime = np.flatnonzero(is_kind(columns, "runtime"))
    graph = [r for r in runtime.tolist() if names.is_graph_launch(name[r])]
    if not graph:
        return []
    device = np.flatnonzero(is_kind(columns, *DEVICE_KINDS))
    ts = columns["ts"]
    by_launch: dict[int, list[int]] = {}
    wanted = set(graph)
    for d, lr in zip(device.tolist(), launcher[device].tolist()):
        if lr in wanted:
            by_launch.setdefault(lr, []).append(d)
    out = []
    for g in sorted(by_launch, key=lambda r: ts[r]):
        rows = np.array(by_launch[g], dtype=np.int64)
        out.append((g, rows[np.lexsort((rows, ts[rows]))]))
    return out


def _launch_kind(runtime_name: str) -> str:
    if "Memset" in runtime_name:
        return "memset"
    if "Memcpy" in runtime_name:
        return "memcpy"
    return "kernel"


class _Fit:
    """Whether a captured launch fits a replayed device event."""

    def __init__(self, columns: EventColumns):
        self.kind = columns["kind"]
        self.name = columns["name"]
        self.category = columns["category"]
        self.launch_kernel = columns["launch_kernel"]
        self.op = columns["op"]
        self._launch_sig: dict[int, tuple[str, str, set | None]] = {}

    def signature(self, launch: int) -> tuple[str, str, set | None]:
        sig = self._launch_sig.get(launch)
        if sig is None:
            op = int(self.op[launch])
            allowed = _CHECKED_OP_CATEGORIES.get(str(self.category[op])) if op >= 0 else None
            sig = self._launch_sig[launch] = (_launch_kind(str(self.name[launch])), str(self.launch_kernel[launch]),
                                              allowed)
        return sig

    def __call__(self, launch: int, device: int) -> bool:
        kind, kernel, allowed = self.signature(launch)
        if kind != self.kind[device]:
            return False
        if kernel:
            return kernel == self.name[device]
        return allowed is None or self.category[device] in allowed


def _assign(window: CaptureWindow, kernels: np.ndarray, fits: _Fit) -> np.ndarray | None:
    """The captured launch of each replayed device event (aligned with `kernels`), or None if it does not fit."""
    launches = window.launches
    if len(launches) != len(kernels):
        return None
    pairs = list(zip(launches.tolist(), kernels.tolist()))
    if all(fits(lr, d) for lr, d in pairs):
        return launches.copy()
    # Several streams: replay order differs from capture order; each launch takes the first unused event.
    out = np.full(len(kernels), -1, dtype=np.int64)
    for lr in launches.tolist():
        hit = next((i for i, d in enumerate(kernels.tolist()) if out[i] < 0 and fits(lr, d)), None)
        if hit is None:
            return None
        out[hit] = lr
    return out


def _attribute(kernels, assigned, launcher, launch_ts, context, ts) -> None:
    launcher[kernels] = assigned
    launch_ts[kernels] = ts[assigned]
    for values in context.values():
        values[kernels] = values[assigned]


def _launches_by_node(columns: EventColumns) -> dict[int, int]:
    """Launch calls that carry a graph node id (the node they created during capture), by node id; ids that
    two calls carry are left out (no single answer)."""
    if "graph_node" not in columns:
        return {}
    node = columns["graph_node"]
    rows = np.flatnonzero((node >= 0) & is_kind(columns, "runtime"))
    found: dict[int, int] = {}
    doubled = set()
    for r, n in zip(rows.tolist(), node[rows].tolist()):
        if n in found:
            doubled.add(n)
        found[n] = r
    for n in doubled:
        del found[n]
    return found


def _assign_by_node(columns: EventColumns, kernels: np.ndarray, node_launch: dict[int, int],
                    fits: _Fit) -> np.ndarray | None:
    """The captured launch of each replayed device event through graph node ids, when every one of them has
    a node id that names one launch of the right kind; else None."""
    if not node_launch:
        return None
    node = columns["graph_node"][kernels].tolist()
    out = [node_launch.get(n, -1) if n >= 0 else -1 for n in node]
    if any(lr < 0 or not fits(lr, d) for lr, d in zip(out, kernels.tolist())):
        return None
    return np.array(out, dtype=np.int64)


def attribute_replays(table: EventTable) -> GraphReplays:
    """Match every graph replay of `table` to a capture in it and give each replayed device event its captured
    launch's context (columns `launcher`, `launch_ts` and CONTEXT_COLUMNS); adds the `replay` column (the
    graph launch that ran a device event, -1 for the rest). Returns and keeps the statistics."""
    columns = table.columns
    stats = GraphReplays()
    replay = np.full(len(columns), -1, dtype=np.int64)
    replays = _replays(columns)
    windows = capture_windows(columns) if replays else []
    stats.captures = len(windows)
    if not replays:
        columns["replay"] = replay
        table.derived["graph_replays"] = stats
        return stats
    ts = columns["ts"]
    dur = columns["dur"]
    launcher = columns["launcher"].copy()
    launch_ts = columns["launch_ts"].copy()
    # The thread through its codes: the column is made from them once, at the end.
    thread_codes, threads = columns.coded("thread")
    context = {c: (thread_codes if c == "thread" else columns[c]).copy() for c in CONTEXT_COLUMNS}
    fits = _Fit(columns)
    taken: dict[tuple[int, ...], int] = {}
    node_launch = _launches_by_node(columns)
    for g, kernels in replays:
        stats.replays += 1
        stats.kernels += len(kernels)
        stats.device_us += float(dur[kernels].sum())
        replay[kernels] = g
        by_node = _assign_by_node(columns, kernels, node_launch, fits)
        if by_node is not None:
            stats.by_node_id += 1
            _attribute(kernels, by_node, launcher, launch_ts, context, ts)
            stats.attributed_kernels += len(kernels)
            stats.attributed_device_us += float(dur[kernels].sum())
            continue
        matched = []
        for w in windows:
            assigned = _assign(w, kernels, fits)
            if assigned is not None:
                matched.append((w, assigned))
        if not matched:
            stats.unmatched_replays += 1
            continue
        if len(matched) > 1:
            stats.ambiguous_replays += 1
        # Several captures fit (one per layer of piecewise graphs, one per batch size): replays take them in
        # capture order, cycling, as runners replay what they captured (vLLM's pieces, layer after layer).
        key = tuple(w.index for w, _ in matched)
        turn = taken.get(key, 0)
        taken[key] = turn + 1
        w, assigned = matched[turn % len(matched)]
        stats.labels[g] = w.label
        _attribute(kernels, assigned, launcher, launch_ts, context, ts)
        stats.attributed_kernels += len(kernels)
        stats.attributed_device_us += float(dur[kernels].sum())
    columns["launcher"] = launcher
    columns["launch_ts"] = launch_ts
    for c, values in context.items():
        # Object columns stay objects in the DataFrame (pandas would infer text and turn None into NaN).
        if c == "thread":
            columns.set_coded(c, values, threads, keep_object=True)
        elif values.dtype == object:
            columns.set_object(c, values)
        else:
            columns[c] = values
    columns["replay"] = replay
    table.derived["graph_replays"] = stats
    return stats
