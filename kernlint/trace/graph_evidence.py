"""PyTorch's own CUDA-graph evidence: per-kernel capture annotations and per-node Python stacks.

Where no capture trace was written (vLLM's V2 model runner writes none), a replay trace shows each graph as
one launch and its kernels; kernlint.trace.graphs then judges them from the kernel order only. Recent PyTorch
can record, at capture, what each graph node was launched from, and write it with the trace. This module reads
that evidence and turns it into a capture of the trace's own, so that the replayed kernels are attributed to it
like to a capture trace's launches (their method: `pytorch-evidence`).

Assumed formats. Written from the descriptions of PyTorch PRs 194854, 195785, 198098, 187061 and 143572, NOT
verified on a real recording; the reader is tolerant (an unreadable piece is no evidence, never an error):
- `prof.export_chrome_trace(path, cuda_graph_annotations=...)`: each kernel replayed from a CUDA graph carries,
  in its `args`, the user annotation (record_function range) active when its graph node was captured, under one
  of ANNOTATION_KEYS (the first present): a string, or a list of strings (outermost first). The exporter may
  move the kernel onto that annotation's lane (its `tid`) or onto `default_stream`; the kernel keeps its
  correlation with the graph launch and its `graph node id`.
- `dump_kernel_py_stacks()`: a JSON file beside the trace mapping graph node id (a string or an integer) to
  the Python stack active when the node was captured: a list of frames, outermost first, each either
  `path/file.py(line): function` (the profiler's spelling of a frame) or an object with `filename` / `file`,
  `line` / `lineno` and `name` / `function`. The map may be wrapped in an object under one of STACK_WRAPPERS.
  The file: in the trace's folder, a `.json` or `.json.gz` whose name holds one of STACK_FILE_MARKS; one whose
  name starts with the trace's own stem first, else the only one there.

What is made of it: one stream capture (pid `graph-evidence:<pid>`) holding one launch call per graph node id
(named after its kind, naming its kernel, carrying the node id), inside the annotation ranges and then the
Python frames of its node (which frame opened a range is not recorded: the ranges go outside). Consecutive
nodes (in the order the first replay ran them) of one frame or range share one instance of it, as launches
captured under one range do. These events are merged into the trace (kernlint.trace.load) and
kernlint.trace.graphs matches the replayed kernels to them through their node ids.
"""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import msgspec
import numpy as np

from kernlint.trace.event_columns import EventColumns
from kernlint.trace.graphs import EVIDENCE_PID_PREFIX, graph_replays
from kernlint.trace.table import EventTable

ANNOTATION_KEYS = ("cuda_graph_annotation", "cuda_graph_annotations", "graph_annotation", "annotation",
                   "user_annotation")
STACK_FILE_MARKS = ("py_stacks", "kernel_stacks", "py_stack")
STACK_WRAPPERS = ("stacks", "nodes", "kernel_py_stacks", "node_stacks")
_STACK_FILE_LIMIT = 256 * 1024 ** 2
# Ids of the made events, apart from the trace's own (and from merged capture traces', kernlint.trace.load).
EVIDENCE_ID_BASE = 1 << 52
_LAUNCH_NAME = {"kernel": "cudaLaunchKernel", "memcpy": "cudaMemcpyAsync", "memset": "cudaMemsetAsync"}


class _Event(msgspec.Struct, gc=False):
    cat: object = None
    args: msgspec.Raw = msgspec.Raw(b"")


_event_decoder = msgspec.json.Decoder(_Event)
_NODE_KEYS = ("graph node id", "graphNodeId")


def unattributed_nodes(table: EventTable) -> list[tuple[int, str, str]]:
    """(node id, device event kind, kernel name) of the graph nodes whose replayed kernels no capture or node
    id attributed, in the order the replays first ran them; [] when there are none (or no node ids)."""
    if not graph_replays(table).replays or "graph_node" not in table.columns:
        return []
    c = table.columns
    replay, launcher, node = c["replay"], c["launcher"], c["graph_node"]
    rows = np.flatnonzero((replay >= 0) & (launcher == replay) & (node >= 0))
    if not len(rows):
        return []
    rows = rows[np.lexsort((rows, c["ts"][rows], replay[rows]))]
    seen: dict[int, tuple[int, str, str]] = {}
    for r, n in zip(rows.tolist(), node[rows].tolist()):
        if n not in seen:
            seen[n] = (n, str(c["kind"][r]), str(c["name"][r]))
    return list(seen.values())


def might_hold_annotations(data: bytes | bytearray) -> bool:
    return any(f'"{k}"'.encode() in data for k in ANNOTATION_KEYS)


def node_annotations(raw_events: list) -> dict[int, tuple[str, ...]]:
    """Graph node id -> the annotation path its replayed kernels carry (outermost first)."""
    out: dict[int, tuple[str, ...]] = {}
    for r in raw_events:
        try:
            e = _event_decoder.decode(r)
        except msgspec.DecodeError:
            continue
        if e.cat not in ("kernel", "gpu_memcpy", "gpu_memset") or not e.args:
            continue
        try:
            args = msgspec.json.decode(e.args)
        except msgspec.DecodeError:
            continue
        if not isinstance(args, dict):
            continue
        node = next((args[k] for k in _NODE_KEYS if _is_id(args.get(k))), None)
        path = _annotation_path(next((args[k] for k in ANNOTATION_KEYS if k in args), None))
        if node is not None and path and node not in out:
            out[node] = path
    return out


def _is_id(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _annotation_path(value) -> tuple[str, ...]:
    if isinstance(value, str) and value:
        return (value,)
    if isinstance(value, list):
        return tuple(v for v in value if isinstance(v, str) and v)
    return ()


def stack_sidecar(trace: Path) -> Path | None:
    """The per-node stack file beside the trace: one named after it first, else the only one in its folder."""
    try:
        found = sorted(p for p in trace.parent.iterdir() if p.is_file() and p != trace
                       and p.name.endswith((".json", ".json.gz")) and any(m in p.name for m in STACK_FILE_MARKS))
    except OSError:
        return None
    stem = trace.name.split(".")[0]
    mine = [p for p in found if p.name.startswith(stem)]
    if len(mine) >= 1:
        return mine[0]
    return found[0] if len(found) == 1 else None


def node_stacks(path: Path) -> dict[int, tuple[str, ...]]:
    """Graph node id -> its capture-time Python stack (outermost first), from a stack sidecar file; {} when it
    cannot be read or holds no stack."""
    try:
        if path.stat().st_size > _STACK_FILE_LIMIT:
            return {}
        raw = path.read_bytes()
        if raw[:2] == b"\x1f\x8b":
            raw = gzip.decompress(raw)
        data = json.loads(raw)
    except (OSError, ValueError, EOFError):
        return {}
    if isinstance(data, dict):
        for key in STACK_WRAPPERS:
            if isinstance(data.get(key), dict):
                data = data[key]
                break
    if not isinstance(data, dict):
        return {}
    out: dict[int, tuple[str, ...]] = {}
    for key, frames in data.items():
        try:
            node = int(key)
        except (TypeError, ValueError):
            continue
        if node < 0 or not isinstance(frames, list):
            continue
        stack = tuple(f for f in (_frame_text(x) for x in frames) if f)
        if stack:
            out[node] = stack
    return out


def _frame_text(frame) -> str | None:
    if isinstance(frame, str):
        return frame or None
    if isinstance(frame, dict):
        file = frame.get("filename", frame.get("file"))
        line = frame.get("line", frame.get("lineno"))
        name = frame.get("name", frame.get("function"))
        if isinstance(file, str) and isinstance(line, int) and isinstance(name, str):
            return f"{file}({line}): {name}"
    return None


def capture_events(nodes: list[tuple[int, str, str]], annotations: dict[int, tuple[str, ...]],
                   stacks: dict[int, tuple[str, ...]], pid: str, before: float) -> list[bytes]:
    """The made capture: per node a launch call inside its ranges, then its frames (see the module docstring),
    laid out to end before time `before` (the trace's first event); [] when no node has any evidence."""
    # The ranges outside the frames: which frame of the stack opened a range is not recorded, and a range must
    # stay one instance over the nodes it held (a linear's range holds frames that differ node by node).
    paths = [tuple(("annotation", a) for a in annotations.get(n, ())) + tuple(("python", f) for f in stacks.get(n, ()))
             for n, _, _ in nodes]
    if not any(paths):
        return []
    depth = max(len(p) for p in paths)
    step = 2 * depth + 4
    t0 = before - (len(nodes) + 2) * step
    where = {"pid": f"{EVIDENCE_PID_PREFIX}{pid}", "tid": 1}
    out: list[bytes] = []
    ids = iter(range(EVIDENCE_ID_BASE, EVIDENCE_ID_BASE + 10 * (len(nodes) + 1) * (depth + 1)))
    # Open instances per level: (key, start node, python id); a level closes when the path there changes.
    open_levels: list[tuple[tuple[str, str], int, int]] = []

    def close(level: int, last: int) -> None:
        (kind, label), first, own = open_levels[level]
        start = t0 + first * step - (depth - level)
        end = t0 + last * step + 1 + (depth - level)
        event = {"ph": "X", "cat": "python_function" if kind == "python" else "user_annotation", "name": label,
                 "ts": start, "dur": end - start, **where, "args": {}}
        if kind == "python":
            parent = next((o[2] for o in reversed(open_levels[:level]) if o[0][0] == "python"), -1)
            event["args"] = {"Python id": own, "Python parent id": parent}
        out.append(msgspec.json.encode(event))

    for i, ((node, kind, kernel), path) in enumerate(zip(nodes, paths)):
        keep = 0
        while keep < min(len(open_levels), len(path)) and open_levels[keep][0] == path[keep]:
            keep += 1
        for level in range(len(open_levels) - 1, keep - 1, -1):
            close(level, i - 1)
        del open_levels[keep:]
        for level in range(keep, len(path)):
            open_levels.append((path[level], i, next(ids)))
        ts = t0 + i * step
        out.append(msgspec.json.encode({
            "ph": "X", "cat": "cuda_runtime", "name": _LAUNCH_NAME.get(kind, "cudaLaunchKernel"), "ts": ts, "dur": 0.5,
            **where, "args": {"correlation": next(ids), "graph node id": node, "kernel": kernel}}))
    for level in range(len(open_levels) - 1, -1, -1):
        close(level, len(nodes) - 1)
    # A stream capture around it all, as at capture: the launches are recorded, not run (no device event is
    # missing), and KL491's capture regions are where they are.
    for name, ts in (("cudaStreamBeginCapture", t0 - depth - 2), ("cudaStreamEndCapture", t0 + len(nodes) * step)):
        out.append(msgspec.json.encode({"ph": "X", "cat": "cuda_runtime", "name": name, "ts": ts, "dur": 0.5, **where,
                                        "args": {"correlation": next(ids)}}))
    return out


def evidence_origin(columns: EventColumns) -> tuple[str, float]:
    """Where the made capture goes: the process of the replays' graph launches, and the trace's first time."""
    replay = columns["replay"]
    launches = np.unique(replay[replay >= 0])
    pid = str(columns["pid"][launches[0]]) if len(launches) else "?"
    ts = columns["ts"]
    finite = ts[np.isfinite(ts)]
    return pid, float(finite.min()) if len(finite) else 0.0
