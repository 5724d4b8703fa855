"""What a finding costs, measured from the trace: the one place every finding's `cost` is computed.

- a host sync (a synchronize call, `.item()`, a device-to-host copy into pageable memory): the host time
  blocked (the blocking runtime calls under the op, summed) plus the device idle it causes after (from the
  end of the last device event that ended before the sync returned to the start of the next device event on
  that device, when that one starts after the sync returned; nothing when the device was still busy);
  basis "host blocked + device idle";
- an upload (a host-to-device copy from pageable memory): the copy's device time plus the host block of the
  call that issued it; basis "copy + host blocked";
- avoidable device work (a fill, a cast, a copy, a transform; an op: what it launched): its device time;
  basis "device time". On a trace without device events, an op's own host time; basis "host time";
- an op or call that launched no device work on a trace that records the device (a pinned allocation, a
  tensor built from a Python list): its own host time; basis "host time, no device work";
- a baseline change: its µs a run; basis "per run".

`share` is of the step the event ran in: its `ProfilerStep#N` range, else its graph replay, else the rule's
scope instance, else the profiled window; None, with a reason, where the trace cannot say. Device work is a
share of the device time launched in that step (`of` "the step's device time": what removing it frees, the
frame of the where-the-time-goes breakdown; a host-bound step's wall time would make every kernel look
free); a sync, an upload or host work a share of its wall time.
"""
from __future__ import annotations

import numpy as np

from kernlint.rules.result import Cost
from kernlint.trace.kinds import DEVICE_KINDS
from kernlint.trace.names import SYNCING_DEVICE_EVENTS
from kernlint.trace.patterns import compile_pattern
from kernlint.trace.scopes import WINDOW, Scope, ScopeIndex
from kernlint.trace.time_breakdown import event_category

SYNC, UPLOAD, DEVICE_TIME, PER_RUN = "host blocked + device idle", "copy + host blocked", "device time", "per run"
HOST_TIME = "host time"
# An op or call that launched no device work on a trace that records the device (a pinned allocation, a
# tensor built from a Python list): its cost is the host time it holds the step's thread.
HOST_WORK = "host time, no device work"
ALLOCATION = "allocation"
_SYNC_CALL_CATEGORIES = frozenset({"sync"})
_SYNC_OP_CATEGORY = "sync_op"
# A host-to-device copy out of pageable memory: the issuing call returns once the data is staged.
_PAGEABLE_UPLOAD = r"^Memcpy HtoD \(Pageable -> Device\)"


def _matches(pattern: str, name: object) -> bool:
    return bool(compile_pattern(pattern).search(str(name)))


def _syncing_copy(name: object) -> bool:
    return any(_matches(p, name) for p in SYNCING_DEVICE_EVENTS)


def _launched(index: ScopeIndex, row: int) -> np.ndarray:
    """Device events launched from the row's thread while it ran."""
    return index.device_events_between(index.thread[row], float(index.ts[row]), float(index.end[row]))


def _calls_under(index: ScopeIndex, row: int) -> list[int]:
    """The runtime calls on the row's thread that start inside it (the row itself when it is one)."""
    if index.kind[row] == "runtime":
        return [row]
    by_thread = index.memo.get("cost-calls")
    if by_thread is None:
        calls = index.rows_of(("runtime",))
        calls = calls[np.argsort(index.ts[calls], kind="stable")]
        by_thread = index.memo["cost-calls"] = {}
        for thread in set(index.thread[calls].tolist()):
            mine = calls[index.thread[calls] == thread]
            by_thread[thread] = (index.ts[mine].astype(float), mine)
    found = by_thread.get(index.thread[row])
    if found is None:
        return []
    starts, rows = found
    lo, hi = starts.searchsorted(float(index.ts[row]), "left"), starts.searchsorted(float(index.end[row]), "left")
    return rows[lo:hi].tolist()


def _blocking(index: ScopeIndex, call: int) -> bool:
    """A call that holds the host until the device is done: a synchronize, or a copy into or out of pageable
    memory."""
    if str(index.category[call]) in _SYNC_CALL_CATEGORIES:
        return True
    return any(_syncing_copy(index.name[d]) or _matches(_PAGEABLE_UPLOAD, index.name[d])
               for d in _launched(index, call).tolist())


def _uploads(index: ScopeIndex, call: int) -> bool:
    return any(_matches(_PAGEABLE_UPLOAD, index.name[d]) for d in _launched(index, call).tolist())


def _blocking_upload(index: ScopeIndex, row: int) -> bool:
    """A host-to-device copy issued by a call that blocks until it is done (ROCm's hipMemcpyWithStream: its
    copy says `Host -> Device`, pinned or not; the call is what tells a pageable upload)."""
    launcher = int(index.launcher[row])
    return (str(index.category[row]).startswith("memcpy_htod") and launcher >= 0
            and str(index.category[launcher]) in _SYNC_CALL_CATEGORIES)


def _sync_owner(index: ScopeIndex, row: int) -> int:
    """Where a sync's calls are looked for: the outermost op around a runtime call (a `.cpu()` is its copy
    call and the synchronize after it), else the row."""
    if index.kind[row] == "runtime":
        top = int(index.top_op[row])
        return top if top >= 0 else row
    return row


def classify(index: ScopeIndex, row: int) -> str:
    """The basis a finding on `row` is costed on."""
    kind = str(index.kind[row])
    if kind in DEVICE_KINDS:
        if _matches(_PAGEABLE_UPLOAD, index.name[row]) or _blocking_upload(index, row):
            return UPLOAD
        return SYNC if _syncing_copy(index.name[row]) else DEVICE_TIME
    if kind in ("alloc", "free"):
        return ALLOCATION
    if kind not in ("op", "runtime"):
        return DEVICE_TIME
    if kind == "runtime":
        # The call itself says: a synchronize, a copy out of or into pageable memory.
        if str(index.category[row]) in _SYNC_CALL_CATEGORIES:
            return SYNC
        names = [index.name[d] for d in _launched(index, row).tolist()]
        if any(_syncing_copy(n) for n in names):
            return SYNC
        if any(_matches(_PAGEABLE_UPLOAD, n) for n in names):
            return UPLOAD
    owner = _sync_owner(index, row)
    calls = _calls_under(index, owner)
    launched = [d for c in calls for d in _launched(index, c).tolist()]
    if any(_matches(_PAGEABLE_UPLOAD, index.name[d]) for d in launched) and not any(
            _syncing_copy(index.name[d]) for d in launched):
        return UPLOAD
    if str(index.category[owner]) == _SYNC_OP_CATEGORY or str(index.category[row]) in _SYNC_CALL_CATEGORIES \
            or any(_blocking(index, c) for c in calls):
        return SYNC if calls or not index.table.has_device_events else DEVICE_TIME
    return DEVICE_TIME


def _device_timeline(index: ScopeIndex, rows) -> tuple[np.ndarray, np.ndarray] | None:
    """The device events on the device of `rows` (device events; every device event when `rows` is empty or
    the trace records no device), as (starts, running maximum of their ends), sorted by start."""
    memo = index.memo.setdefault("cost-device-events", {})
    device = index.columns["device"] if "device" in index.columns else None
    key = int(device[rows[0]]) if device is not None and len(rows) else None
    if key not in memo:
        every = index.rows_of(DEVICE_KINDS)
        if key is not None:
            every = every[device[every] == key]
        every = every[np.argsort(index.ts[every], kind="stable")]
        memo[key] = ((index.ts[every].astype(float), np.maximum.accumulate(index.end[every].astype(float)))
                     if len(every) else None)
    return memo[key]


def _device_idle_after(index: ScopeIndex, calls: list[int], returned: float) -> float:
    """How long the sync's device sat idle after it: from the end of the last device event that ended before
    the sync returned to the start of the next one, when that starts after the sync returned; 0 when the
    device was busy as it returned, or the trace shows no device event on either side."""
    mine = [d for c in calls for d in _launched(index, c).tolist()]
    if not mine:   # a synchronize: the device of the last work its thread launched before it returned
        before = index.device_events_between(index.thread[calls[0]], float("-inf"), returned)
        mine = [int(before[np.argmax(index.launch_ts[before])])] if len(before) else []
    timeline = _device_timeline(index, mine)
    if timeline is None:
        return 0.0
    starts, ended = timeline
    i = int(starts.searchsorted(returned, "left"))   # events [0, i) started before the sync returned
    if i == 0 or i == len(starts) or ended[i - 1] > returned:
        return 0.0   # nothing ran before, nothing runs after, or the device was still busy
    return float(starts[i] - ended[i - 1])


def _sync_us(index: ScopeIndex, row: int) -> tuple[float, str]:
    owner = _sync_owner(index, row)
    # The blocking calls of the op, less the uploads it made (those are an upload's cost, not the sync's).
    calls = [c for c in _calls_under(index, owner) if _blocking(index, c) and not _uploads(index, c)]
    if not calls:
        if index.kind[row] in DEVICE_KINDS:   # a syncing copy: the call that issued it
            launcher = int(index.launcher[row])
            calls = [launcher] if launcher >= 0 else []
        if not calls:   # no blocking call recorded (a CPU-only trace): the op's own time
            return float(index.columns["dur"][owner]), HOST_TIME
    dur = index.columns["dur"]
    blocked = float(sum(float(dur[c]) for c in calls))
    returned = max(float(index.end[c]) for c in calls)
    return blocked + _device_idle_after(index, calls, returned), SYNC


def _upload_us(index: ScopeIndex, row: int) -> float:
    dur = index.columns["dur"]
    if index.kind[row] in DEVICE_KINDS:
        copies, launcher = [row], int(index.launcher[row])
        calls = [launcher] if launcher >= 0 else []
    else:
        calls = [c for c in _calls_under(index, _sync_owner(index, row)) if _blocking(index, c)]
        copies = [d for c in calls for d in _launched(index, c).tolist()
                  if _matches(_PAGEABLE_UPLOAD, index.name[d])]
    return float(sum(float(dur[r]) for r in copies)) + float(sum(float(dur[c]) for c in calls))


def _device_time_us(index: ScopeIndex, row: int) -> tuple[float | None, str]:
    dur = index.columns["dur"]
    if index.kind[row] in DEVICE_KINDS:
        return float(dur[row]), DEVICE_TIME
    if not index.table.has_device_events:
        return float(dur[row]), HOST_TIME
    launched = _launched(index, row)
    if not len(launched) and index.kind[row] in ("op", "runtime"):
        return float(dur[row]), HOST_WORK
    return float(dur[launched].sum()), DEVICE_TIME


def _step_span(index: ScopeIndex, row: int) -> tuple[float, float] | None:
    if index.profiler_step(row) is None:
        return None
    starts, ends, _ = index.__dict__["_step_spans"]
    i = int(starts.searchsorted(float(index.launch_ts[row]), "right")) - 1
    return float(starts[i]), float(ends[i])


def _replay_span(index: ScopeIndex, row: int) -> tuple[float, float] | None:
    replay = int(index.replay[row]) if index.kind[row] in DEVICE_KINDS else -1
    if replay < 0:
        return None
    rows = index.rows_of(DEVICE_KINDS)
    rows = rows[index.replay[rows] == replay]
    return float(index.ts[rows].min()), float(index.end[rows].max())


def _window_span(index: ScopeIndex) -> tuple[float, float] | None:
    span = index.memo.get("cost-window")
    if span is None:
        rows = index.rows_of(("op", "runtime", *DEVICE_KINDS))
        span = index.memo["cost-window"] = ((float(index.ts[rows].min()), float(index.end[rows].max()))
                                            if len(rows) else (0.0, 0.0))
    return span


def _device_time_launched(index: ScopeIndex, lo: float, hi: float, replay: int = -1) -> float:
    """The summed time of the device events launched in [lo, hi) (the events of graph replay `replay`, when
    given): the device time a step, scope or window ran."""
    memo = index.memo.get("cost-device-time")
    if memo is None:
        rows = index.rows_of(DEVICE_KINDS)
        rows = rows[np.argsort(index.launch_ts[rows], kind="stable")]
        dur = index.columns["dur"][rows].astype(float)
        memo = index.memo["cost-device-time"] = (index.launch_ts[rows].astype(float),
                                                 np.concatenate(([0.0], np.cumsum(dur))), rows)
    starts, summed, rows = memo
    if replay >= 0:
        mine = rows[index.replay[rows] == replay]
        return float(index.columns["dur"][mine].astype(float).sum())
    i, j = int(starts.searchsorted(lo, "left")), int(starts.searchsorted(hi, "left"))
    return float(summed[j] - summed[i])


def _share(index: ScopeIndex, row: int, scope: Scope | None, us: float | None, basis: str | None = None
           ) -> tuple[float | None, str | None, str | None]:
    """(share, what it is of, why there is none). Avoidable device work is a share of the device time the
    step ran (what removing it frees, and the frame of the trace's where-the-time-goes breakdown); a sync, an
    upload or host work a share of the step's wall time."""
    if us is None:
        return None, None, "no time was measured"
    device = basis == DEVICE_TIME and index.table.has_device_events
    replay = int(index.replay[row]) if index.kind[row] in DEVICE_KINDS else -1
    spans = [("the step", _step_span(index, row), -1), ("the graph replay", _replay_span(index, row), replay)]
    if scope is not None and scope.kind != WINDOW and scope.end > scope.ts and np.isfinite(scope.end - scope.ts):
        spans.append(("the scope", (float(scope.ts), float(scope.end)), -1))
    spans.append(("the profiled window", _window_span(index), -1))
    for of, span, in_replay in spans:
        if span is None or not span[1] > span[0]:
            continue
        if not device:
            return us / (span[1] - span[0]), of, None
        total = _device_time_launched(index, span[0], span[1], in_replay)
        if total > 0:
            return min(us / total, 1.0), f"{of}'s device time", None
    return None, None, "the trace records no step, scope or window with a duration"


def finding_cost(index: ScopeIndex, rows, kind: str | None = None, scope: Scope | None = None) -> Cost:
    """The cost of a finding on `rows` (one event row, or several whose costs add up), each costed on `kind`
    (classify's basis when None); the share is of the first row's step (or `scope`, or the window)."""
    rows = [int(rows)] if np.ndim(rows) == 0 else [int(r) for r in rows]
    if not rows:
        return Cost(None, None, DEVICE_TIME, reason="no event")
    total, basis = 0.0, kind
    for row in rows:
        kind_of = kind or classify(index, row)
        if kind_of == ALLOCATION:
            return Cost(None, None, ALLOCATION, reason="an allocation costs bytes, not time")
        if kind_of == SYNC:
            us, kind_of = _sync_us(index, row)
        elif kind_of == UPLOAD:
            us = _upload_us(index, row)
        else:
            us, kind_of = _device_time_us(index, row)
        total += us
        basis = basis or kind_of
    share, of, reason = _share(index, rows[0], scope, total, basis)
    return Cost(us=total, share=share, basis=basis or DEVICE_TIME, of=of, reason=reason,
                category=event_category(index, rows))


def per_run_cost(us: float | None) -> Cost:
    """The cost of a baseline finding: `us` a run (a launch's median, a timing shift); a comparison of runs
    says nothing of a step."""
    if us is None or not np.isfinite(us):
        return Cost(None, None, PER_RUN, reason="the comparison measured no time")
    return Cost(float(us), None, PER_RUN, reason="a baseline comparison is per run, not of one step")
