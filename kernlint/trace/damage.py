"""Damage accounting: what in a loaded trace could not be used, so that no verdict passes on it unread.

The loader never refuses a trace for a damaged event: it keeps the event, flags what was wrong with it in
the `damage` column (kernlint.trace.table) and leaves it out of what it would make wrong. This module
counts those events, by kind of damage and by side:

- **device** damage matters to rules that read device events and their links to the launching call:
  - device events (kernel, memcpy, memset) with no launch inside the profiling window;
  - device events whose correlation id two or more launches share (left unlinked);
  - launches with no device event inside the window (the record of their kernel or copy was lost: CUPTI
    drops whole buffers when a window is closed without a device synchronize);
  - events of an unknown category that hold the correlation id of a launch with no device event: that
    launch's own kernel or copy, its category damaged;
  - device-side events (GPU annotations included) with an unusable ts, dur, pid, tid, name or category;
  - any event with an unusable correlation or External id: the link ids.
- **host** damage matters to every rule (nesting and scopes):
  - every other event with an unusable ts, dur, pid, tid, name or category. Such an event is in no
    interval nesting and no scope (ts, pid, tid), or holds no children (dur);
  - launch calls (kernel launches, memory copies) that lie in no op although their External id names an
    op of the trace: the call's, or the op's, time or thread is wrong. (In kineto the launch lies in the op
    its External id names. Older kineto reuses External ids, so only calls in no op at all are counted.)
  - Python frames that do not lie inside the frame their `Python parent id` names, or whose parent id
    names no frame. Kineto records the frame tree twice, by ids and by time; when the two disagree, the
    frame nesting that scopes rest on may be wrong. Where torch's Python tracer itself records them apart,
    it is not damage (kernlint.trace.frames.FrameTree, a note in the report): window edges; a top-level
    frame on the autograd engine's thread naming the frame that called backward() (checkpoint recomputes,
    step after step); a frame that starts inside its parent and ends after it, a call whose return the
    tracer did not see (Python 3.12, C functions that call back into Python: custom ops under
    torch.compile), which is left out of the frame tree.
  - events recorded twice: an op, kernel, copy, memset, runtime call or GPU annotation equal to an earlier
    one in kind, name, ts, dur, pid, tid and ids (counts, sequences and links would be wrong);
  - a timestamp that more than half of the timed events (at least 3) share: the trace's times were lost.
    None of the 199 traces in fixtures/ and ../shared/traces-external shows either.

Values a trace may legitimately hold are never damage: string pids and tids ("Spans"), numeric strings for
ts and dur, integral floats for ids and pids, instants without dur or category. Every check above was run
over the recorded traces in fixtures/ (91 files, HTA's and kineto's included): none of them shows damage
except lost kernel records (three HTA traces and the window-edges rank 0 trace, which lost all 48) and
HTA's two-event large_integer_trace, whose one kernel has no launch.

Device work launched before the window opened is an edge of the window (kernlint.trace.window), not
damage; so are launches whose device work falls past its end. Kernels replayed by cudaGraphLaunch are
linked to that call and are fine.

    damage = trace_damage(table)        # computed once, kept in table.caches.damage
    damage.summary()                    # one line per non-zero kind; [] for an undamaged trace
    damage.touches_host, damage.touches_device
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from kernlint.trace.arrays import distinct_ints
from kernlint.trace.damage_flags import AMBIGUOUS_LINK, BAD_CORRELATION, BAD_FIELD_BITS, FRAME_OUTSIDE_PARENT, UNPLACED
from kernlint.trace.event_columns import EventColumns
from kernlint.trace.kinds import DEVICE_KINDS, category_mask, is_kind
from kernlint.trace.table import EventTable, recorded_launcher
from kernlint.trace.window import LAUNCH_CATEGORIES, window_edges

__all__ = ["DEVICE_SIDE_KINDS", "FIELD_PROBLEMS", "TraceDamage", "trace_damage"]

# Kinds whose damage is device damage; every other kind is host damage.
DEVICE_SIDE_KINDS = frozenset(DEVICE_KINDS | {"gpu_annotation"})

# What "unusable" means for each field, as the summary lines say it.
FIELD_PROBLEMS = {
    "ts": "a missing or non-numeric ts",
    "dur": "a missing, negative or non-numeric dur",
    "pid": "a pid that is missing or not an integer",
    "tid": "a tid that is missing or not an integer",
    "name": "a name that is missing or not a string",
    "cat": "no category (a complete event)",
    "correlation": "a correlation id that is not a non-negative integer",
    "external_id": "an External id that is not a non-negative integer",
}
_LINK_FIELDS = frozenset({"correlation", "external_id"})   # device damage whichever event holds them
_EMPTY = np.empty(0, dtype=np.int64)


def _events(n: int, what: str = "events") -> str:
    """`n` and the plural noun `what`, made singular for one ("1 launch", "1 device event")."""
    if n == 1:
        what = what[:-2] if what.endswith(("ches", "shes", "sses")) else what[:-1]
    return f"{n} {what}"


@dataclass(frozen=True)
class TraceDamage:
    """What in one trace could not be used. Row arrays hold row labels of the event table; every count is
    the length of an array or a value of a dict (fields with no damage are absent)."""

    events: int = 0   # rows in the table
    # Device damage (rules that read device events).
    unlinked_device: np.ndarray = field(default_factory=lambda: _EMPTY)    # no launch inside the window
    ambiguous_links: np.ndarray = field(default_factory=lambda: _EMPTY)    # id shared by 2+ calls; unlinked
    unlinked_launches: np.ndarray = field(default_factory=lambda: _EMPTY)  # no device event inside the window
    no_device_events: bool = False   # the trace holds no kernel, copy or memset at all
    unknown_device: np.ndarray = field(default_factory=lambda: _EMPTY)     # unknown category; a lonely launch's id
    misfit_launches: np.ndarray = field(default_factory=lambda: _EMPTY)    # time or process disagrees with its
    #                                   device event (moved in time, or on a process that runs no op)
    bad_device_fields: dict[str, int] = field(default_factory=dict)  # field -> device-side events with it
    #                                   unusable; for the link ids (correlation, External id) every event
    # Host damage (every rule).
    bad_host_fields: dict[str, int] = field(default_factory=dict)    # field -> host events with it unusable
    misplaced_launches: np.ndarray = field(default_factory=lambda: _EMPTY)  # in no op; External id names one
    misplaced_frames: np.ndarray = field(default_factory=lambda: _EMPTY)    # outside their Python parent
    duplicate_events: np.ndarray = field(default_factory=lambda: _EMPTY)    # a repeat of an event kept already
    shared_timestamp: int = 0         # events on the one timestamp most of the trace's events hold (times lost)
    # Both: every event with an unusable field.
    bad_rows: np.ndarray = field(default_factory=lambda: _EMPTY)

    @property
    def bad_fields(self) -> dict[str, int]:
        """Field -> events (host and device) whose value of it is unusable; fields with none left out."""
        out: dict[str, int] = {}
        for part in (self.bad_host_fields, self.bad_device_fields):
            for k, n in part.items():
                out[k] = out.get(k, 0) + n
        return {k: out[k] for k in FIELD_PROBLEMS if out.get(k)}

    @property
    def touches_host(self) -> bool:
        """Host events could not be placed or read: every rule's verdict may rest on them."""
        return bool(self.bad_host_fields or len(self.misplaced_launches) or len(self.misplaced_frames)
                    or len(self.duplicate_events) or self.shared_timestamp)

    @property
    def touches_device(self) -> bool:
        """Device events could not be linked or read: verdicts of rules that read device events may rest
        on them."""
        return bool(len(self.unlinked_device) or len(self.ambiguous_links) or len(self.unlinked_launches)
                    or len(self.unknown_device) or len(self.misfit_launches) or self.bad_device_fields)

    def __bool__(self) -> bool:
        return self.touches_host or self.touches_device

    def host_summary(self) -> list[str]:
        """One line per kind of host damage (matters to every rule)."""
        lines = [f"{_events(n, 'host events')} with {FIELD_PROBLEMS[k]}"
                 for k, n in self.bad_host_fields.items() if n]
        if len(self.misplaced_frames):
            lines.append(f"{_events(len(self.misplaced_frames), 'Python frames')} outside the frame their Python "
                         "parent id names (a wrong time, thread or category)")
        if len(self.misplaced_launches):
            lines.append(f"{_events(len(self.misplaced_launches), 'launch calls')} in no op although their "
                         "External id names one (a wrong time or thread)")
        if len(self.duplicate_events):
            lines.append(f"{_events(len(self.duplicate_events))} recorded twice (the same kind, name, time, "
                         "thread and ids as another): counts and sequences would be wrong")
        if self.shared_timestamp:
            lines.append(f"{self.shared_timestamp} of the trace's events share one timestamp: its times were lost, "
                         "so nothing can be ordered or nested")
        return lines

    def device_summary(self) -> list[str]:
        """One line per kind of device damage (matters to rules that read device events)."""
        lines = []
        if len(self.unlinked_device):
            lines.append(f"{_events(len(self.unlinked_device), 'device events')} with no launch inside the window")
        if len(self.unlinked_launches):
            why = ("their kernels were lost, or the trace was recorded without ProfilerActivity.CUDA"
                   if self.no_device_events else "their kernels were lost")
            lines.append(f"{_events(len(self.unlinked_launches), 'kernel launches')} with no device event inside the "
                         f"window ({why})")
        if len(self.misfit_launches):
            lines.append(f"{_events(len(self.misfit_launches), 'launches')} whose time or process does not fit "
                         "the device event they launched")
        if len(self.ambiguous_links):
            lines.append(f"{_events(len(self.ambiguous_links), 'device events')} whose correlation id two or "
                         "more launches share (not linked)")
        if len(self.unknown_device):
            lines.append(f"{_events(len(self.unknown_device))} of an unknown category holding the correlation id "
                         "of a launch that has no device event (a device event whose category is damaged)")
        for k, n in self.bad_device_fields.items():
            if n:
                lines.append(f"{_events(n, 'events' if k in _LINK_FIELDS else 'device events')} with "
                             f"{FIELD_PROBLEMS[k]}")
        return lines

    def summary(self) -> list[str]:
        """Every kind of damage, one short line each: host damage first. [] when nothing is damaged."""
        return self.host_summary() + self.device_summary()

    def counts(self) -> dict[str, int]:
        """The numbers behind summary(), by key: unlinked_device, ambiguous_links, unlinked_launches,
        unknown_device, misfit_launches, device.<field>, host.<field>, misplaced_launches, misplaced_frames
        (non-zero only)."""
        out = {"unlinked_device": len(self.unlinked_device), "ambiguous_links": len(self.ambiguous_links),
               "unlinked_launches": len(self.unlinked_launches), "unknown_device": len(self.unknown_device),
               "misfit_launches": len(self.misfit_launches)}
        out.update({f"device.{k}": n for k, n in self.bad_device_fields.items()})
        out.update({f"host.{k}": n for k, n in self.bad_host_fields.items()})
        out.update({"misplaced_launches": len(self.misplaced_launches),
                    "misplaced_frames": len(self.misplaced_frames),
                    "duplicate_events": len(self.duplicate_events), "shared_timestamp": self.shared_timestamp})
        return {k: n for k, n in out.items() if n}


def trace_damage(table: EventTable) -> TraceDamage:
    """The damage of `table` (computed once, then kept in `table.caches.damage`)."""
    found = table.caches.damage
    if found is None:
        found = table.caches.damage = _compute(table)
    return found


def _compute(table: EventTable) -> TraceDamage:
    f = table.columns
    flags = f["damage"] if "damage" in f else np.zeros(len(f), dtype=np.uint8)
    device_side = is_kind(f, *DEVICE_SIDE_KINDS)
    host_fields: dict[str, int] = {}
    device_fields: dict[str, int] = {}
    for name, bit in BAD_FIELD_BITS.items():
        hit = (flags & bit) != 0
        if not hit.any():
            continue
        on_device = int(np.count_nonzero(hit if name in _LINK_FIELDS else hit & device_side))
        on_host = int(np.count_nonzero(hit)) - on_device
        if on_host:
            host_fields[name] = on_host
        if on_device:
            device_fields[name] = on_device
    any_field = sum(BAD_FIELD_BITS.values())
    bad_rows = np.flatnonzero((flags & any_field) != 0)
    ambiguous = np.flatnonzero((flags & AMBIGUOUS_LINK) != 0)
    # Unlinked inside the window, leaving out those counted already: an id shared by several calls, or an
    # unusable id.
    edges = window_edges(table)
    unlinked = edges.unlinked_device
    if len(unlinked):
        unlinked = unlinked[(flags[unlinked] & (AMBIGUOUS_LINK | BAD_CORRELATION)) == 0]
    # A kernel launch with no kernel lost the evidence of what ran. Copies and memsets are left out: old
    # kineto versions record memset calls without memset events (real V100 and A100 traces show hundreds).
    lost = edges.unlinked_launches
    lost = lost[f["category"][lost] == "launch"] if len(lost) else lost
    return TraceDamage(events=len(f), unlinked_device=np.asarray(unlinked, dtype=np.int64),
                       unlinked_launches=np.asarray(lost, dtype=np.int64),
                       no_device_events=not bool(is_kind(f, *DEVICE_KINDS).any()),
                       ambiguous_links=ambiguous.astype(np.int64), bad_host_fields=host_fields,
                       bad_device_fields=device_fields,
                       bad_rows=bad_rows.astype(np.int64),
                       misplaced_launches=_misplaced_launches(f, flags, edges.past_end),
                       misplaced_frames=np.flatnonzero((flags & FRAME_OUTSIDE_PARENT) != 0).astype(np.int64),
                       unknown_device=_unknown_device(f),
                       misfit_launches=_misfit_launches(f),
                       duplicate_events=_duplicate_events(f), shared_timestamp=_shared_timestamp(f))


# Kinds whose exact repeats are damage. Python frames and memory events are left out: zero-length frames and
# allocator records may legitimately repeat at the timer's resolution.
_DUPLICATE_KINDS = ("op", "kernel", "memcpy", "memset", "runtime", "gpu_annotation")
_DUPLICATE_KEY = ("kind", "name", "ts", "dur", "pid", "tid", "correlation", "external_id")
_TIMED_KINDS = ("op", "kernel", "memcpy", "memset", "runtime", "python")


def _duplicate_events(f: EventColumns) -> np.ndarray:
    """Rows that repeat an earlier row of a duplicate-checked kind in every key field (the later copies)."""
    rows = np.flatnonzero(is_kind(f, *_DUPLICATE_KINDS))
    if len(rows) < 2:
        return _EMPTY
    # A repeat shares its start: only rows whose ts another row holds are compared field by field (a trace
    # is mostly distinct starts, so this is usually none, at the cost of one sort).
    ts_code, shared = _value_codes(f["ts"][rows])
    rows, ts_code = rows[shared], ts_code[shared]
    if len(rows) < 2:
        return _EMPTY
    # Each key field as integers that are equal where the values are; a row repeats an earlier row when all
    # of them are equal: sorted by the keys, then by row, every row equal to the one before it.
    keys = [f.coded(c)[0][rows] if c in ("kind", "name", "pid", "tid")
            else ts_code if c == "ts"
            else np.unique(f[c][rows], return_inverse=True)[1].reshape(-1) if c == "dur"
            else f[c][rows] for c in _DUPLICATE_KEY]
    order = np.lexsort([np.arange(len(rows))] + keys[::-1])
    same = np.ones(len(rows) - 1, dtype=bool)
    for key in keys:
        ordered = key[order]
        same &= ordered[1:] == ordered[:-1]
    repeated = np.zeros(len(rows), dtype=bool)
    repeated[order[1:][same]] = True
    return rows[repeated].astype(np.int64)


def _value_codes(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(np.unique's inverse of `values`, NaN equal to NaN; whether another value equals each one), by one
    stable sort, which the times of a trace (nearly in row order) make about one pass."""
    order = np.argsort(values, kind="stable")
    ordered = values[order]
    same = ordered[1:] == ordered[:-1]
    if ordered.dtype.kind == "f":
        same |= np.isnan(ordered[1:]) & np.isnan(ordered[:-1])
    codes = np.empty(len(values), dtype=np.intp)
    codes[order] = np.concatenate([[0], np.cumsum(~same)])
    shared = np.zeros(len(values), dtype=bool)
    shared[order[1:][same]] = True
    shared[order[:-1][same]] = True
    return codes, shared


def _shared_timestamp(f: EventColumns) -> int:
    """How many timed events sit on one timestamp, when more than half of them (at least 3) do; else 0.
    Real traces never come close: an event's ts is its own start, to the nanosecond."""
    ts = f["ts"][is_kind(f, *_TIMED_KINDS)]
    ts = ts[np.isfinite(ts)] if ts.dtype.kind == "f" else ts
    if len(ts) < 3:
        return 0
    # A value more than half of them hold is their median: count that one (a partition, no sort).
    middle = np.partition(ts, len(ts) // 2)[len(ts) // 2]
    most = int(np.count_nonzero(ts == middle))
    return most if most * 2 > len(ts) else 0


# A kernel starts after its launch began (clock conversion allows a little slack), and not hours later.
_EARLIEST_BEFORE_LAUNCH_US = 1_000.0
_LATEST_AFTER_LAUNCH_US = 3_600e6
_PROCESS_KINDS = ("op", "annotation", "python", "module")


def _misfit_launches(f: EventColumns) -> np.ndarray:
    """Launch calls that cannot have launched the device event linked to them: the device event starts
    well before the call, or hours after it; or the call sits in a process that issued no op, range or
    frame while the trace has them (its pid was damaged). Such a launch is placed in the wrong scope."""
    launcher = recorded_launcher(f)
    device = np.flatnonzero(is_kind(f, *DEVICE_KINDS) & (launcher >= 0))
    if not len(device):
        return _EMPTY
    ts = f["ts"]
    calls = launcher[device]
    gap = ts[device] - ts[calls]
    bad = (gap < -_EARLIEST_BEFORE_LAUNCH_US) | (gap > _LATEST_AFTER_LAUNCH_US)
    hosts = is_kind(f, *_PROCESS_KINDS)
    if hosts.any():
        # Membership through the codes of the distinct pids and threads (equal codes, equal values).
        bad |= ~_held(f, "pid", hosts)[calls]
        # A kernel launch comes from a thread that runs ops or Python; one on a thread with neither, in a
        # trace that records them, had its tid damaged.
        kernel_launch = f["category"][calls] == "launch"
        bad |= kernel_launch & ~_held(f, "thread", hosts)[calls]
    return distinct_ints(calls[bad]).astype(np.int64)


def _held(f: EventColumns, column: str, rows: np.ndarray) -> np.ndarray:
    """Whether each row's value of `column` is one that a row of the mask `rows` holds."""
    codes, values = f.coded(column)
    held = np.zeros(len(values), dtype=bool)
    held[codes[rows]] = True
    return held[codes]


def _unknown_device(f: EventColumns) -> np.ndarray:
    """Events of an unknown category that hold the correlation id of a launch call with no device event:
    the launch's device event, its category damaged (real traces never show one)."""
    correlation = f["correlation"]
    rows = np.flatnonzero(is_kind(f, "other") & (correlation >= 0))
    if not len(rows):
        return _EMPTY
    launcher = recorded_launcher(f)
    linked = np.zeros(len(f), dtype=bool)
    linked[launcher[launcher >= 0]] = True
    lonely = is_kind(f, "runtime") & category_mask(f, LAUNCH_CATEGORIES) & (correlation >= 0) & ~linked
    return rows[np.isin(correlation[rows], correlation[lonely])].astype(np.int64)


def _misplaced_launches(f: EventColumns, flags: np.ndarray, past_end: np.ndarray) -> np.ndarray:
    """Launch calls in no op whose External id names an op of the trace (those already counted for an
    unusable ts, pid or tid, and launches past the window's end, an edge, left out)."""
    external = f["external_id"]
    calls = (is_kind(f, "runtime") & category_mask(f, LAUNCH_CATEGORIES) & (external >= 0)
             & (f["op"] < 0) & ((flags & UNPLACED) == 0))
    calls[past_end] = False
    rows = np.flatnonzero(calls)
    if not len(rows):   # the usual case: every launch lies in an op
        return _EMPTY
    op_ids = external[is_kind(f, "op") & (external >= 0)]
    if not len(op_ids):
        return _EMPTY
    return rows[np.isin(external[rows], op_ids)].astype(np.int64)
