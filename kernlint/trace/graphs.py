"""CUDA-graph replays: which captured launch each replayed kernel is.

A replay shows one `cudaGraphLaunch` (`hipGraphLaunch`) and the device events it ran, linked to it by
correlation id: no per-kernel launch, op, module or Python frame. The launches made while the graph was
captured (between `cudaStreamBeginCapture` and `cudaStreamEndCapture` on one thread) carry all of that but
never ran. When a capture is in the table (inside the profiled window, or merged in from a capture trace
by `kernlint.trace.load.load_trace(..., captures=...)`), each replay is matched to the capture whose launch
sequence is its kernel sequence, and every replayed kernel takes its captured launch as its launcher: its
op, module, Python frame, source line and launch thread are the captured ones, like an eager kernel's.
The `replay` column says which graph launch ran it, so that scopes count one replay at a time.

How a replay is matched, in this order (each replay says which, `ReplayMatch.method`):
- `node-id`: where the trace records graph node ids (`graph node id` on the replayed kernels and on the
  launches that created the nodes during capture), they decide, kernel by kernel. PyTorch's own graph
  evidence (kernel annotations, per-node Python stacks: kernlint.trace.graph_evidence) is turned into such
  launches when the trace has it and no capture; replays matched through it say `pytorch-evidence`.
- `exact`: a capture recorded as many launches as the replay ran device events and every launch fits its
  device event in order (the same kind of device work; the same kernel name where the launch names it, as
  ROCm's do; a compatible category where only the launching op says what it is), or after reordering (graphs
  of several streams replay in another order).
- `aligned`: the sequences fit up to a few launches added or missing (kernlint.trace.graph_align: Myers'
  alignment under that fit, edits bounded): xDiT's capture holds a GEMM more than its replay. The device
  events no launch fits stay linked to the graph launch, unattributed.
- `kernel-order`: no capture fits. The replay stays linked to its graph launch; the rules judge it from the
  kernel order only, and say so.
Several graphs of one kernel sequence (a piecewise graph per layer, a graph per batch size) match alike:
replays take them in capture order, cycling (runners replay what they captured, layer after layer), and
such replays are counted as ambiguous (their code is the same; their shapes may not be). A replay whose
attributed share is below LOW_SHARE of its device events is a warning in the report (`report_lines`).

`replay_prologue_rows`: what `CUDAGraph.replay()` launches itself before the graph (torch refreshes the
seed and offset of each registered RNG generator: two `fill_` kernels of one int64 element). They are eager
kernels of torch, not of the program; the rules give findings on them as context.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from kernlint.trace import names
from kernlint.trace.event_columns import EventColumns
from kernlint.trace.graph_align import (
    Alignment,
    KernelTokens,
    LaunchTokens,
    Vocabulary,
    align,
    default_max_edits,
    fits,
    launch_kind,
)
from kernlint.trace.kinds import DEVICE_KINDS, is_kind
from kernlint.trace.table import EventTable

# The columns a replayed kernel takes from the captured launch it was matched to.
CONTEXT_COLUMNS = ("op", "top_op", "annotation", "module", "frame", "user_frame", "thread", "source")
# Below this share of its device events attributed, a replay is a warning in the report.
LOW_SHARE = 0.9
# The process name of the launches made from PyTorch's own graph evidence (kernlint.trace.graph_evidence).
EVIDENCE_PID_PREFIX = "graph-evidence:"
# How a replay was matched (ReplayMatch.method).
BY_NODE_ID, BY_EVIDENCE = "node-id", "pytorch-evidence"
EXACT, ALIGNED, KERNEL_ORDER = "exact", "aligned", "kernel-order"


@dataclass(frozen=True)
class CaptureWindow:
    """One stream capture: the launches recorded into a graph, in issue order."""

    index: int
    thread: str
    begin: int              # row of the BeginCapture call
    end: int                # row of the EndCapture call
    launches: np.ndarray    # rows of the launch calls recorded into the graph
    label: str              # the innermost range that holds it (vLLM: capture_16_FULL), else "capture N"


@dataclass(frozen=True)
class ReplayMatch:
    """One graph replay: how many of its device events were attributed, how (BY_NODE_ID, BY_EVIDENCE, EXACT,
    ALIGNED, KERNEL_ORDER) and to which capture."""

    launch: int             # row of the graph launch
    number: int             # 1-based, in time order
    kernels: int
    attributed: int
    method: str
    capture: str | None = None
    edits: int = 0          # aligned: launches and device events left over

    @property
    def share(self) -> float:
        return self.attributed / self.kernels if self.kernels else 0.0

    def as_dict(self) -> dict:
        return {"replay": self.number, "kernels": self.kernels, "attributed_kernels": self.attributed,
                "share": round(self.share, 4), "method": self.method, "capture": self.capture, "edits": self.edits}


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
    aligned_replays: int = 0         # matched up to a few launches added or missing
    labels: dict[int, str] = field(default_factory=dict)   # graph launch row -> capture label
    matches: list[ReplayMatch] = field(default_factory=list)   # one per replay, in time order

    def low_share(self) -> list[ReplayMatch]:
        """The replays with less than LOW_SHARE of their device events attributed."""
        return [m for m in self.matches if m.share < LOW_SHARE]

    def methods(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for m in self.matches:
            out[m.method] = out.get(m.method, 0) + 1
        return out

    def as_dict(self) -> dict:
        return {"replays": self.replays, "kernels": self.kernels, "attributed_kernels": self.attributed_kernels,
                "device_us": round(self.device_us, 3), "attributed_device_us": round(self.attributed_device_us, 3),
                "captures": self.captures, "by_node_id": self.by_node_id, "unmatched_replays": self.unmatched_replays,
                "ambiguous_replays": self.ambiguous_replays, "aligned_replays": self.aligned_replays,
                "low_share_replays": len(self.low_share()), "methods": self.methods(),
                "per_replay": [m.as_dict() for m in self.matches]}

    def summary(self) -> str | None:
        """One line for the text report; None when the trace replays no graph."""
        if not self.replays:
            return None
        share = 100.0 * self.attributed_kernels / self.kernels if self.kernels else 0.0
        time_share = 100.0 * self.attributed_device_us / self.device_us if self.device_us else 0.0
        line = (f"CUDA graphs: {self.replays} replay(s) ran {self.kernels} device event(s); "
                f"{self.attributed_kernels} ({share:.0f}%, {time_share:.0f}% of their device time) attributed "
                f"to captured launches")
        how = self.methods()
        if how and set(how) != {KERNEL_ORDER}:
            line += " (" + ", ".join(f"{n} {m}" for m, n in sorted(how.items())) + ")"
        if not self.captures and not self.by_node_id:
            line += " (no capture in the trace: pass the capture trace too, or --capture FILE)"
        elif self.unmatched_replays:
            line += f"; {self.unmatched_replays} replay(s) matched no capture"
        return line

    def report_lines(self) -> tuple[list[str], list[str]]:
        """(notes, warnings) for the trace's report: the summary is a note when every replay has at least
        LOW_SHARE of its device events attributed; else it is a warning, with the replays below it (a replay
        judged from the kernel order only is never a silent pass)."""
        if not self.replays:
            return [], []
        line = self.summary() or ""
        low = self.low_share()
        if not low:
            return [line], []
        warnings = [line]
        partial = [m for m in low if m.attributed]
        if partial:
            shown = ", ".join(f"replay {m.number}: {m.attributed} of {m.kernels} ({100 * m.share:.1f}%, {m.method}"
                              + (f" with {m.capture}" if m.capture else "") + ")" for m in partial[:5])
            more = f" and {len(partial) - 5} more" if len(partial) > 5 else ""
            warnings.append(f"CUDA graphs: {len(partial)} replay(s) attributed below {100 * LOW_SHARE:.0f}% of "
                            f"their device events ({shown}{more}); their other device events are judged from the "
                            "kernel order only")
        return [], warnings


def graph_replays(table: EventTable) -> GraphReplays:
    """The table's replay statistics (attribute_replays made them, kept in `table.derived`: they travel with
    the table; an empty record for other tables)."""
    return table.derived.graph_replays or GraphReplays()


def capture_spans(table: EventTable) -> dict[str, list[tuple[float, float]]]:
    """Per host thread, the (BeginCapture start, EndCapture end) of every stream capture it records (computed
    once per table)."""
    found = table.caches.capture_spans
    if found is None:
        columns = table.columns
        ts, end = columns["ts"], columns["end"]
        found = {}
        for w in capture_windows(columns):
            found.setdefault(w.thread, []).append((float(ts[w.begin]), float(end[w.end])))
        table.caches.capture_spans = found
    return found


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


class _Tokens:
    """Launches and device events of the table as alignment tokens (kernlint.trace.graph_align)."""

    def __init__(self, columns: EventColumns):
        self.kind = columns["kind"]
        self.name = columns["name"]
        self.category = columns["category"]
        self.launch_kernel = columns["launch_kernel"]
        self.op = columns["op"]
        self.vocab = Vocabulary()

    def launches(self, rows: np.ndarray) -> LaunchTokens:
        rows = rows.tolist()
        ops = [int(self.op[r]) for r in rows]
        return LaunchTokens.make([launch_kind(str(self.name[r])) for r in rows],
                                 [str(self.launch_kernel[r]) for r in rows],
                                 [str(self.category[o]) if o >= 0 else None for o in ops], self.vocab)

    def kernels(self, rows: np.ndarray) -> KernelTokens:
        return KernelTokens.make([str(k) for k in self.kind[rows].tolist()], [str(n) for n in self.name[rows].tolist()],
                                 [str(c) for c in self.category[rows].tolist()], self.vocab)


class _Matcher:
    """The captures that fit a replay best: the fewest edits, every capture that ties (several graphs of one
    kernel sequence). Replays of one graph share the answer."""

    def __init__(self, tokens: _Tokens, windows: list[CaptureWindow]):
        self.tokens = tokens
        self.windows = windows
        self.launches = [tokens.launches(w.launches) for w in windows]
        self._cache: dict[bytes, list[tuple[CaptureWindow, Alignment]]] = {}

    def best(self, kernels: np.ndarray) -> list[tuple[CaptureWindow, Alignment]]:
        if not self.windows:
            return []
        replayed = self.tokens.kernels(kernels)
        key = replayed.key()
        found = self._cache.get(key)
        if found is None:
            found = self._cache[key] = self._best(replayed)
        return found

    def _best(self, replayed: KernelTokens) -> list[tuple[CaptureWindow, Alignment]]:
        best: list[tuple[CaptureWindow, Alignment]] = []
        fewest: int | None = None
        for w, launches in zip(self.windows, self.launches):
            limit = default_max_edits(len(launches), len(replayed))
            if fewest is not None:
                limit = min(limit, fewest)
            found = align(launches, replayed, limit)
            if found is None:
                continue
            if fewest is None or found.edits < fewest:
                best, fewest = [(w, found)], found.edits
            elif found.edits == fewest:
                best.append((w, found))
        return best


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
                    tokens: _Tokens) -> np.ndarray | None:
    """The captured launch of each replayed device event through graph node ids, when every one of them has
    a node id that names one launch of the right kind; else None."""
    if not node_launch:
        return None
    node = columns["graph_node"][kernels].tolist()
    out = np.array([node_launch.get(n, -1) if n >= 0 else -1 for n in node], dtype=np.int64)
    if np.any(out < 0):
        return None
    every = np.arange(len(out))
    if not fits(tokens.launches(out), tokens.kernels(kernels), every, every).all():
        return None
    return out


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
        table.derived.graph_replays = stats
        return stats
    ts = columns["ts"]
    dur = columns["dur"]
    pid = columns["pid"]
    launcher = columns["launcher"].copy()
    launch_ts = columns["launch_ts"].copy()
    # The thread through its codes: the column is made from them once, at the end.
    thread_codes, threads = columns.coded("thread")
    context = {c: (thread_codes if c == "thread" else columns[c]).copy() for c in CONTEXT_COLUMNS}
    tokens = _Tokens(columns)
    matcher = _Matcher(tokens, windows)
    taken: dict[tuple[int, ...], int] = {}
    node_launch = _launches_by_node(columns)
    for number, (g, kernels) in enumerate(replays, start=1):
        stats.replays += 1
        stats.kernels += len(kernels)
        stats.device_us += float(dur[kernels].sum())
        replay[kernels] = g
        by_node = _assign_by_node(columns, kernels, node_launch, tokens)
        if by_node is not None:
            stats.by_node_id += 1
            _attribute(kernels, by_node, launcher, launch_ts, context, ts)
            stats.attributed_kernels += len(kernels)
            stats.attributed_device_us += float(dur[kernels].sum())
            method = BY_EVIDENCE if str(pid[by_node[0]]).startswith(EVIDENCE_PID_PREFIX) else BY_NODE_ID
            stats.matches.append(ReplayMatch(g, number, len(kernels), len(kernels), method))
            continue
        matched = matcher.best(kernels)
        if not matched:
            stats.unmatched_replays += 1
            stats.matches.append(ReplayMatch(g, number, len(kernels), 0, KERNEL_ORDER))
            continue
        if len(matched) > 1:
            stats.ambiguous_replays += 1
        # Several captures fit (one per layer of piecewise graphs, one per batch size): replays take them in
        # capture order, cycling, as runners replay what they captured (vLLM's pieces, layer after layer).
        key = tuple(w.index for w, _ in matched)
        turn = taken.get(key, 0)
        taken[key] = turn + 1
        w, alignment = matched[turn % len(matched)]
        hit = alignment.launch >= 0
        done = kernels[hit]
        stats.labels[g] = w.label
        _attribute(done, w.launches[alignment.launch[hit]], launcher, launch_ts, context, ts)
        stats.attributed_kernels += len(done)
        stats.attributed_device_us += float(dur[done].sum())
        method = ALIGNED if alignment.how == "aligned" else EXACT
        stats.aligned_replays += method == ALIGNED
        stats.matches.append(ReplayMatch(g, number, len(kernels), len(done), method, w.label, alignment.edits))
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
    table.derived.graph_replays = stats
    return stats


# Without Python stacks, the replay prologue is the fill ops right before the graph launch, at most this many
# (a seed and an offset fill per registered generator; one generator, the default one, is the rule).
_PROLOGUE_FILLS = 2


def replay_prologue_rows(table: EventTable) -> frozenset[int]:
    """The rows `CUDAGraph.replay()` launches itself before each graph launch: the fill ops (torch refreshes the
    seed and offset of each RNG generator registered with the graph), their launch calls and the device events
    those ran. With Python stacks, the fill ops under the replay frame (`torch/cuda/graphs.py(N): replay`,
    names.GRAPH_REPLAY_FRAME) before the graph launch; without, at most two top-level fill ops right before
    it on its thread with no other op between. Cached in the table."""
    found = table.caches.replay_prologue
    if found is not None:
        return found
    columns = table.columns
    name, category, thread, ts = columns["name"], columns["category"], columns["thread"], columns["ts"]
    codes, values = columns.coded("name")
    launch_codes = [i for i, v in enumerate(values.tolist()) if isinstance(v, str) and names.is_graph_launch(v)]
    graph = np.flatnonzero(np.isin(codes, launch_codes) & is_kind(columns, "runtime")).tolist() if launch_codes else []
    out: set[int] = set()
    if graph:
        frame, parent_op = columns["frame"], columns["parent_op"]
        ops = np.flatnonzero(is_kind(columns, "op"))
        top = ops[parent_op[ops] < 0]
        by_thread = {t: top[thread[top] == t] for t in {thread[g] for g in graph}}
        for t, rows in by_thread.items():
            by_thread[t] = rows[np.argsort(ts[rows], kind="stable")]
        fills = ops[category[ops] == "fill"]
        for g in graph:
            replay_frame = _replay_frame(frame, name, g)
            if replay_frame >= 0:
                mine = fills[(thread[fills] == thread[g]) & (ts[fills] >= ts[replay_frame]) & (ts[fills] < ts[g])]
                out.update(mine.tolist())
                continue
            rows = by_thread[thread[g]]
            before = rows[:int(np.searchsorted(ts[rows], ts[g], "left"))][::-1]
            for o in before[:_PROLOGUE_FILLS].tolist():
                if category[o] != "fill":
                    break
                out.add(o)
        if out:
            out |= _launched_under(columns, out)
    found = table.caches.replay_prologue = frozenset(out)
    return found


def _replay_frame(frame: np.ndarray, name: np.ndarray, row: int, depth: int = 4) -> int:
    """The torch replay frame around `row` (a few frames up at most: the built-in method, then torch's)."""
    f = int(frame[row])
    while f >= 0 and depth:
        if names.is_graph_replay_frame(str(name[f])):
            return f
        f, depth = int(frame[f]), depth - 1
    return -1


def _launched_under(columns: EventColumns, ops: set[int]) -> set[int]:
    """The ops and calls inside `ops` (same thread, within their interval) and the device events those ran."""
    thread, ts, end = columns["thread"], columns["ts"], columns["end"]
    host = np.flatnonzero(is_kind(columns, "runtime", "op"))
    inside = set(ops)
    for t in {thread[o] for o in ops}:
        rows = host[thread[host] == t]
        rows = rows[np.argsort(ts[rows], kind="stable")]
        starts = ts[rows]
        for o in (o for o in ops if thread[o] == t):
            lo, hi = np.searchsorted(starts, ts[o], "left"), np.searchsorted(starts, end[o], "right")
            inside.update(rows[lo:hi].tolist())
    device = np.flatnonzero(is_kind(columns, *DEVICE_KINDS))
    launched = device[np.isin(columns["launcher"][device], np.fromiter(inside, dtype=np.int64))]
    return inside | set(launched.tolist())
