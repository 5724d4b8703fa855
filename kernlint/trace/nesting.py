"""Interval nesting of host events, per host thread: each event's innermost enclosing op, record_function
range, nn.Module frame, Python frame and user Python frame, and its outermost op (the table's `op`,
`parent_op`, `top_op`, `annotation`, `module`, `frame`, `user_frame` columns).

Where the events of one kind nest properly (every real trace) that is a count and a binary search per event;
a kind that does not nest on a thread is walked there with a stack, the definition (in C where the extension
is built: tests/test_nest_walk.py checks the two walks agree).
"""
from __future__ import annotations

import numpy as np

from kernlint.trace import names
from kernlint.trace.arrays import search_sorted, sorted_order, unique_codes
from kernlint.trace.damage_flags import UNPLACED
from kernlint.trace.event_columns import EventColumns
from kernlint.trace.kinds import DEVICE_KINDS, is_kind
from kernlint.trace.native_chunk import nest_walk_native

# The enclosing-event columns nest_host_events fills, and the kind of event each one follows ("user" is a
# Python frame outside torch, triton and the standard library).
_NEST_STACKS = ("op", "annotation", "module", "python", "user")


def nest_host_events(columns: EventColumns, name_codes: np.ndarray | None = None, name_values=None, *,
                     vectorized: bool = True, unnested: np.ndarray | None = None) -> None:
    """Interval nesting per host thread: innermost enclosing op, annotation, module and Python frames.

    The rule, per thread in (ts, longest first, row) order: an event's enclosing X is the last earlier X of
    positive duration that has not ended when the event starts (end > ts); `top_op` is the first such op
    still open. Where the events of one kind nest properly (any two are disjoint or one holds the other:
    every real trace), that is a count and a binary search per event (`_nest_thread`); a kind whose events
    do not nest on a thread (Python frames cut by the profiling window, on some real traces) is walked there
    event by event with a stack (`_nest_thread_walk`), which gives the same answer in both cases and is the
    definition. Kinds are independent (each stack holds its own kind), so only that kind is walked.
    `unnested`: rows of Python frames left out of the frame tree (recorded closing after their parent,
    `kernlint.trace.frames.closed_after_parent`): they are nested like any event but hold nothing."""
    n = len(columns)
    host = ~is_kind(columns, *DEVICE_KINDS, "gpu_annotation", "other")
    # Events whose ts, pid or tid is unusable cannot be placed: no parent, no children, no scope.
    placed = (columns["damage"] & UNPLACED) == 0
    rows = np.flatnonzero(host & placed)
    ts = columns["ts"]
    end = columns["end"]
    dur = columns["dur"]
    if name_codes is None:
        name_codes, name_values = columns.coded("name")
    # Library frames: judged once per name, for the names of the Python frames that can hold others.
    is_python = is_kind(columns, "python")
    pushed_python = np.flatnonzero(is_python & host & placed & (dur > 0))
    lib_of_code = np.zeros(len(name_values), dtype=np.int8)   # 0 never judged, 1 user code, 2 library
    for c in unique_codes(name_codes[pushed_python], len(name_values))[0].tolist():
        lib_of_code[c] = 2 if names.is_library_frame(name_values[c]) else 1
    library = lib_of_code[name_codes] == 2
    holds = np.ones(n, dtype=bool)
    if unnested is not None and len(unnested):
        holds[unnested] = False
    kind_of = {
        "op": is_kind(columns, "op"), "annotation": is_kind(columns, "annotation"),
        "module": is_kind(columns, "module") & holds,
        "python": is_python & holds, "user": is_python & (lib_of_code[name_codes] == 1) & holds,
    }
    out = {k: np.full(n, -1, dtype=np.int64) for k in _NEST_STACKS}
    top = np.full(n, -1, dtype=np.int64)
    # Sort by thread, then start, then longest first so that a parent precedes a child with the same start
    # (threads are independent: their order is any).
    thread_codes = columns.coded("thread")[0][rows]
    sort = _start_order(ts[rows], dur[rows], thread_codes)
    order = rows[sort]
    cuts = np.flatnonzero(np.diff(thread_codes[sort])) + 1
    for part in np.split(order, cuts) if len(order) else []:
        improper = _nest_thread(part, ts, end, kind_of, out, top) if vectorized else _NEST_STACKS
        if improper:
            _nest_thread_walk(part, ts, end, dur, kind_of, out, top, improper)
    own_top = kind_of["op"] & (top < 0) & host & placed   # placed: in `rows`
    top[own_top] = np.flatnonzero(own_top)   # a placed op with no op around it is its own top
    cols = {"op": out["op"], "parent_op": out["op"], "top_op": top, "annotation": out["annotation"],
            "module": out["module"], "frame": out["python"], "user_frame": out["user"]}
    for c, values in cols.items():
        columns[c] = values   # read-only: op and parent_op may share one array
    columns["launch_ts"] = columns["ts"]
    columns["library_frame"] = is_python & library


def _start_order(ts: np.ndarray, dur: np.ndarray, thread: np.ndarray) -> np.ndarray:
    """np.lexsort((-dur, ts, thread)): by ts, which a trace's rows nearly follow already (one adaptive pass),
    then the rows that share a start by longest first, then by thread (a radix sort of small codes)."""
    order = np.argsort(ts, kind="stable")
    starts = ts[order]
    same = starts[1:] == starts[:-1]
    same |= np.isnan(starts[1:]) & np.isnan(starts[:-1])   # lexsort holds NaNs equal
    if same.any():   # the rows that share a start with a neighbour, resorted among themselves
        tied = np.zeros(len(order), dtype=bool)
        tied[1:] |= same
        tied[:-1] |= same
        sub = order[tied]
        order[tied] = sub[np.lexsort((sub, -dur[sub], ts[sub]))]
    return order[sorted_order(thread[order])]


def _nest_thread(part: np.ndarray, ts, end, kind_of: dict, out: dict, top: np.ndarray) -> tuple[str, ...]:
    """The nesting of one thread's events (`part`, in order) by counting, kind by kind; the kinds whose
    events do not nest properly there, for which nothing is written."""
    positions = np.arange(len(part), dtype=np.int64)
    t = ts[part]
    e = end[part]
    holds = e > t
    improper: list[str] = []
    for k in _NEST_STACKS:
        # An interval that ends where it starts (a duration lost in float rounding) holds nothing: the
        # walk pops it at the next event, before that event looks.
        is_k = kind_of[k][part] & holds
        if not is_k.any():
            continue
        found = _nest_kind(is_k, t, e, positions, outermost=k == "op")
        del is_k
        if found is None:
            improper.append(k)
            continue
        inner, outer = found   # written at once: each kind's working arrays are freed before the next's
        has = inner >= 0
        out[k][part[has]] = part[inner[has]]
        if outer is not None:
            has = outer >= 0
            top[part[has]] = part[outer[has]]
    return tuple(improper)


def _nest_kind(is_k: np.ndarray, t: np.ndarray, e: np.ndarray, positions: np.ndarray,
               outermost: bool) -> tuple[np.ndarray, np.ndarray | None] | None:
    """For one kind of one thread (`is_k` per position in order; starts `t`, ends `e`): the position of the
    innermost open interval of the kind at each position (-1: none), and of the outermost with `outermost`;
    None where the kind's intervals do not nest properly."""
    size = len(is_k)
    k_pos = np.flatnonzero(is_k)
    before = np.cumsum(is_k) - is_k                  # intervals of kind k earlier in the order
    # Of them, those ended by ts (end <= ts): t ascends; the ends nearly do (an adaptive sort).
    closed = search_sorted(np.sort(e[k_pos], kind="stable"), t, "right")
    open_ = before - closed                          # how many are open: the stack's height
    del closed
    if (open_ < 0).any():
        return None
    depth = open_[k_pos]
    # The innermost open interval is the last earlier one at depth open_ - 1; the outermost at depth 0.
    # Sorted by (depth, position): k_pos ascends, so a stable sort by depth alone.
    width = size + 1
    key_order = sorted_order(depth)
    sorted_pos = k_pos[key_order]
    sorted_keys = depth[key_order] * width + sorted_pos
    del key_order
    # The last interval of kind k that started earlier (its index in k_pos; one exists where one is open).
    last = np.maximum(before - 1, 0)
    del before
    inside = open_ > 0
    inner = _innermost(open_ - 1, inside, last, depth, k_pos, positions, sorted_keys, sorted_pos, width)
    if ((inner >= 0) != inside).any():
        return None
    # Proper nesting: an interval of kind k ends no later than the one it opened inside.
    parent_of_k = inner[k_pos]
    with_parent = parent_of_k >= 0
    if (e[k_pos[with_parent]] > e[parent_of_k[with_parent]]).any():
        return None
    outer = (_innermost(np.zeros(size, dtype=np.int64), inside, last, depth, k_pos, positions, sorted_keys,
                        sorted_pos, width) if outermost else None)
    return inner, outer


def _innermost(level: np.ndarray, inside: np.ndarray, last: np.ndarray, depth: np.ndarray, k_pos: np.ndarray,
               positions: np.ndarray, sorted_keys: np.ndarray, sorted_pos: np.ndarray, width: int) -> np.ndarray:
    """_last_at where an interval is open (`inside`), where the last interval of the kind before each
    position (`last`) is the answer whenever its depth is `level` (no later one can be): only the other
    positions are searched."""
    direct = inside & (depth[last] == level)
    out = np.where(direct, k_pos[last], -1)
    rest = np.flatnonzero(inside & ~direct)
    if len(rest):
        out[rest] = _last_at(level[rest], positions[rest], sorted_keys, sorted_pos, width)
    return out


def _last_at(level: np.ndarray, positions: np.ndarray, sorted_keys: np.ndarray, sorted_pos: np.ndarray,
             width: int) -> np.ndarray:
    """Per position (each inside an open interval), the last earlier interval at nesting depth `level` (-1
    where there is none)."""
    queries = level * width + positions
    # Searched in ascending order (by level, then position; `positions` ascend): a binary search of queries
    # in order is far cheaper.
    order = sorted_order(level)
    at = np.empty(len(queries), dtype=np.intp)
    at[order] = search_sorted(sorted_keys, queries[order], "left") - 1
    ok = at >= 0
    at = np.where(ok, at, 0)
    ok &= (sorted_keys[at] // width) == level
    return np.where(ok, sorted_pos[at], -1)


def _nest_thread_walk(part: np.ndarray, ts, end, dur, kind_of: dict, out: dict, top: np.ndarray,
                      kinds: tuple[str, ...] = _NEST_STACKS) -> None:
    """The nesting of one thread's events for `kinds`, event by event with a stack per kind (the
    definition); `top` too when the ops are among them. In C where the extension is built (the same walk:
    tests/test_nest_walk.py), else `_nest_thread_walk_python`."""
    op_kind = kinds.index("op") if "op" in kinds else -1
    if not nest_walk_native(part, ts, end, dur, [kind_of[k] for k in kinds], [out[k] for k in kinds], top,
                            op_kind):
        _nest_thread_walk_python(part, ts, end, dur, kind_of, out, top, kinds)


def _nest_thread_walk_python(part: np.ndarray, ts, end, dur, kind_of: dict, out: dict, top: np.ndarray,
                             kinds: tuple[str, ...] = _NEST_STACKS) -> None:
    stacks: dict[str, list] = {k: [] for k in kinds}
    flags = {k: kind_of[k][part].tolist() for k in kinds}
    ts_l, end_l, dur_l, rows = ts[part].tolist(), end[part].tolist(), dur[part].tolist(), part.tolist()
    for i, row in enumerate(rows):
        t = ts_l[i]
        for k, stack in stacks.items():
            while stack and t >= stack[-1][0]:
                stack.pop()
            if stack:
                out[k][row] = stack[-1][1]
        if stacks.get("op"):
            top[row] = stacks["op"][0][1]
        if dur_l[i] <= 0:
            continue
        for k in kinds:
            if flags[k][i]:
                stacks[k].append((end_l[i], row))
