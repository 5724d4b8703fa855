"""Python frames against the tree kineto recorded (`Python id` / `Python parent id`): which frame each
frame's parent id names, the frames torch's tracer records apart from the time nesting without damage (the
`FrameTree` of a table, a note in its report), and FRAME_OUTSIDE_PARENT on the frames that disagree with it
otherwise."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from kernlint.trace.columns import _id_column
from kernlint.trace.damage_flags import FRAME_OUTSIDE_PARENT, UNPLACED
from kernlint.trace.event_columns import EventColumns
from kernlint.trace.kinds import is_kind

_EDGE_US = 10.0   # a frame whose start or end lies this close to the window's is cut by the window


@dataclass(frozen=True)
class FrameTree:
    """Python frames whose `Python parent id` disagrees with the time nesting without damage, as torch's
    Python tracer records compiled regions, custom ops and activation checkpointing (rows of the table):

    - `across_threads`: top-level frames on their thread whose parent id names a frame on another thread of
      the process that started before them but no longer holds them: autograd-engine hooks and checkpoint
      recomputes on the engine's thread name the frame that called backward() in the first step, step after
      step. They nest by time on their own thread.
    - `unnested`: frames that start inside the frame their parent id names and end after it: calls whose
      return the tracer did not see (C functions that re-enter Python, as custom ops under torch.compile do,
      left open to the end of the recording). They cannot nest, so they are left out of the frame tree: they
      hold nothing, and what ran after them nests in the frames that really held it.
    """

    across_threads: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int64))
    unnested: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int64))

    def notes(self) -> list[str]:
        """One line per kind of re-parenting found; [] for a trace whose two trees agree."""
        lines = []
        if len(self.across_threads):
            lines.append(f"{len(self.across_threads)} Python frame(s) name a parent on another thread that no "
                         "longer holds them (autograd-engine hooks, checkpoint recomputes): nested by time on "
                         "their own thread")
        if len(self.unnested):
            lines.append(f"{len(self.unnested)} Python frame(s) recorded ending after the frame their parent id "
                         "names (calls whose return the profiler did not see, under compiled regions and custom "
                         "ops): left out of the frame tree")
        return lines


@dataclass(frozen=True)
class FrameParents:
    """Python frames that carry a parent id: their rows, and the row of the frame that id names (-1: no
    frame carries it)."""

    frames: np.ndarray
    child: np.ndarray
    parent: np.ndarray


def frame_parents(columns: EventColumns, python_ids, parent_ids) -> FrameParents | None:
    """The frame each Python frame's `Python parent id` names; None where no frame carries a parent id."""
    frames = np.flatnonzero(is_kind(columns, "python", "module"))
    if not len(frames):
        return None
    if isinstance(python_ids, np.ndarray) and isinstance(parent_ids, np.ndarray):
        ids, parents = python_ids[frames], parent_ids[frames]
    else:   # one column, so that large ids get one coding
        rows = frames.tolist()
        exact = [python_ids[i] if isinstance(python_ids, list) else (int(python_ids[i]) if python_ids[i] >= 0
                 else None) for i in rows]
        exact += [parent_ids[i] if isinstance(parent_ids, list) else (int(parent_ids[i]) if parent_ids[i] >= 0
                  else None) for i in rows]
        both, _ = _id_column(exact)
        ids, parents = both[:len(frames)], both[len(frames):]
    has_parent = parents >= 0
    if not has_parent.any():
        return None
    child = frames[has_parent]
    known = ids >= 0
    order = np.argsort(ids[known], kind="stable")
    sorted_ids, holders = ids[known][order], frames[known][order]
    parent = np.full(len(child), -1, dtype=np.int64)
    if len(sorted_ids):
        at = np.minimum(np.searchsorted(sorted_ids, parents[has_parent]), len(sorted_ids) - 1)
        found = sorted_ids[at] == parents[has_parent]
        parent[found] = holders[at[found]]
    return FrameParents(frames, child, parent)


def _slack(end: np.ndarray, p: np.ndarray, child: np.ndarray) -> np.ndarray:
    """How far apart two times of a frame and its parent may be and still be one (the float rounding of
    `ts + dur`)."""
    with np.errstate(invalid="ignore"):
        return 1e-3 + 4 * np.spacing(np.maximum(np.abs(end[p]), np.abs(end[child])))


def closed_after_parent(columns: EventColumns, parents: FrameParents | None) -> np.ndarray:
    """Rows of Python frames that start inside the frame their parent id names, on its thread, and end after
    it (not at the window's close, where both are cut): their return was not seen (FrameTree.unnested)."""
    if parents is None:
        return np.empty(0, dtype=np.int64)
    has = parents.parent >= 0
    child, p = parents.child[has], parents.parent[has]
    placed = (columns["damage"] & UNPLACED) == 0
    ts, end = columns["ts"], columns["end"]
    thread = columns.coded("thread")[0]
    slack = _slack(end, p, child)
    hi = np.nanmax(end[parents.frames])
    with np.errstate(invalid="ignore"):
        late = (placed[child] & placed[p] & (thread[p] == thread[child]) & (ts[p] <= ts[child] + slack)
                & (ts[child] < end[p]) & (end[child] > end[p] + slack) & (hi - end[p] > _EDGE_US))
    return child[late]


def check_frame_tree(columns: EventColumns, parents: FrameParents | None, unnested: np.ndarray, python_ids,
                     parent_ids) -> FrameTree:
    """Flag FRAME_OUTSIDE_PARENT on Python frames that disagree with the tree kineto recorded: the frame its
    `Python parent id` names must be a Python frame on the same thread whose interval holds it (within the
    float rounding of `ts + dur`). A moved or re-categorised frame does not (a parent id that names no frame,
    or an event that is no longer a frame, is flagged alike). What torch's tracer records that way without
    damage (window edges, the autograd engine's thread, calls whose return it did not see: FrameTree) is
    not flagged; the FrameTree says what was found."""
    if parents is None:
        return FrameTree()
    frames, child, parent = parents.frames, parents.child, parents.parent
    damage = columns["damage"].copy()
    placed = (damage & UNPLACED) == 0
    has = parent >= 0
    p = np.where(has, parent, 0)
    # Counted already: a frame, or the frame it names, with an unusable ts, pid or tid.
    judged = placed[child] & (~has | placed[p])
    ts, end = columns["ts"], columns["end"]
    thread = columns.coded("thread")[0]   # set by the table build; codes of distinct texts compare alike
    slack = _slack(end, p, child)
    with np.errstate(invalid="ignore"):
        inside = (ts[p] <= ts[child] + slack) & (end[child] <= end[p] + slack)
        started_before = ts[p] <= ts[child] + slack
    same_thread = thread[p] == thread[child]
    ok = has & same_thread & inside
    # Kineto's own cross-thread tree: a Python hook the autograd engine runs on its thread (a top-level frame
    # there: checkpoint recomputes, custom Functions' backward) names the frame that called backward() on the
    # main thread, which held it in the first step and no longer does in later ones. Not damage.
    process = columns.coded("pid")[0]
    top_level = columns["frame"][child] < 0   # no frame of its own thread holds it
    across = has & ~same_thread & top_level & (process[p] == process[child]) & started_before
    ok |= across
    # Calls whose return the tracer did not see: they end after their parent (left out of the frame tree).
    ok |= np.isin(child, unnested)
    # A window edge: a parent frame cut at the window's start or end (it began before the window opened, or
    # ran past its close) no longer holds its child's whole interval. Not damage.
    lo, hi = np.nanmin(ts[frames]), np.nanmax(end[frames])
    with np.errstate(invalid="ignore"):
        cut_start = (ts[p] - lo <= _EDGE_US) & (ts[child] <= ts[p] + slack)
        cut_end = (hi - end[p] <= _EDGE_US) & (end[child] >= end[p] - slack)
    ok |= has & same_thread & (cut_start | cut_end)
    # A parent outside the trace is an edge, not damage: a top-level frame (no frame of the trace holds it)
    # whose parent id no event of the trace carries started under a frame that began before the window, or
    # that was cut away with the rest of the run (TraceLens's vLLM segment). A parent id that another event
    # carries (a frame re-categorised) or a frame that some frame does hold stays damage.
    orphan = np.flatnonzero(~has & (columns["frame"][child] < 0))
    if len(orphan):
        missing = [_parent_id_value(parent_ids, r) for r in child[orphan].tolist()]
        carried = _carried_ids(python_ids)
        ok[orphan] = [m is not None and m not in carried for m in missing]
    damage[child[judged & ~ok]] |= FRAME_OUTSIDE_PARENT
    columns["damage"] = damage
    return FrameTree(across_threads=child[judged & across & ~inside].astype(np.int64),
                     unnested=np.asarray(unnested, dtype=np.int64))


def _parent_id_value(parent_ids, row: int) -> int | None:
    value = parent_ids[row]
    if isinstance(parent_ids, list):
        return value
    return int(value) if value >= 0 else None


def _carried_ids(python_ids) -> set[int]:
    """Every `Python id` that an event of the trace carries, whatever its kind."""
    if isinstance(python_ids, list):
        return {v for v in python_ids if v is not None}
    return set(python_ids[python_ids >= 0].tolist())
