"""From event tables to a program profile: the launch sequence per scope, with timing samples.

A run is one `ProfilerStep#N` range of a trace (the names table's `profiler-step-range`); in a trace
without steps, one CUDA-graph replay (from its graph launch to the next: a decode loop's step); else the
whole trace. The reference sequence is the one most runs share; only runs with that sequence give
timing samples, so a data-dependent dispatch never mixes two kernels' times.
"""
from __future__ import annotations

import dataclasses
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from kernlint.baseline.environment import run_metadata_of
from kernlint.baseline.identity import content_name, metadata_name, path_name, program_identity
from kernlint.baseline.model import Launch, ProgramProfile, ScopeProfile, Variant
from kernlint.baseline.stats import timer_quantum
from kernlint.trace.kinds import DEVICE_KINDS
from kernlint.trace.names import named_pattern
from kernlint.trace.rows import outermost
from kernlint.trace.scopes import ScopeIndex
from kernlint.trace.table import EventTable, TableMemo

NO_SCOPE = "(no scope)"
_STEP = re.compile(named_pattern("profiler-step-range"))
_STEP_ROWS: TableMemo[list[int]] = TableMemo("profiler-step rows")   # _step_rows
# A Python frame unit is `file.py(LINE): function`: the line moves with every edit above it, the scope does not.
_FRAME_LINE = re.compile(r"\(\d+\)(?=: )")


@dataclass
class _Element:
    row: int          # the event (device event, sync call or op)
    host: int         # the host row that issued it (its launching call, or itself)
    ts: float         # when it was issued
    launch: Launch
    order: float = 0.0   # within one issue time: a graph replay's kernels in the order they ran
    group: str = ""      # the finding group of the outermost op it ran in (rules.checks.base.make_finding)


def scope_label(index: ScopeIndex, host_row: int, cache: dict) -> str:
    key = (int(index.annotation[host_row]), int(index.module[host_row]), int(index.user_frame[host_row]))
    label = cache.get(key)
    if label is None:
        units = index.enclosing_units(host_row)
        label = cache[key] = _FRAME_LINE.sub("", units[0].label) if units else NO_SCOPE
    return label


def _text(value) -> str:
    return value if isinstance(value, str) else ""


def _elements(table: EventTable, index: ScopeIndex) -> tuple[list[_Element], int, str]:
    """Every launch and sync of the trace in issue order, the device events with no launching call, and
    the timing basis."""
    f = table.columns
    kind, category = index.kind, index.category
    dur = f["dur"]
    on_device = table.has_device_events
    if on_device:
        device = np.flatnonzero(np.isin(kind, list(DEVICE_KINDS)))
        linked = device[index.launcher[device] >= 0]
        unattributed = len(device) - len(linked)
        rows = [(int(r), int(index.launcher[r])) for r in linked.tolist()]
    else:
        unattributed = 0
        work = np.flatnonzero((kind == "op") & index.does_work).tolist()
        rows = [(r, r) for r in outermost(index, work)]
    syncs = np.flatnonzero((kind == "runtime") & (category == "sync")).tolist()
    rows += [(r, r) for r in syncs if not index.in_machinery(r)]
    out = []
    replay = index.replay
    for row, host in rows:
        ts = float(index.launch_ts[row]) if kind[row] in DEVICE_KINDS else float(index.ts[row])
        order = ts
        if replay[row] >= 0:
            # A replayed kernel was issued by its graph launch, in the replay's order, whatever captured launch
            # it is attributed to (that gives its op, source and scope).
            ts, order = float(index.ts[replay[row]]), float(index.ts[row])
        if not np.isfinite(ts):
            continue
        is_sync = kind[row] == "runtime"
        op = -1 if kind[row] == "op" else int(index.op[row])   # an op element is its own name
        launch = Launch(pos=0, kind="sync" if is_sync else str(kind[row]), name=str(index.short_name[row]),
                        category=str(category[row]), op=str(index.name[op]) if op >= 0 else "",
                        source=_text(index.source[host]),
                        us=[] if is_sync else [float(dur[row])])
        out.append(_Element(row, host, ts, launch, order, index.problem_group(row) or ""))
    out.sort(key=lambda e: (e.ts, e.order, e.row))
    return out, unattributed, "device" if on_device else "host"


def _step_rows(index: ScopeIndex) -> list[int]:
    """The profiler-step ranges of the trace, in time order (kept with the table's caches)."""
    names = index.name
    return index.table.caches.memo(_STEP_ROWS, lambda: sorted(
        (r for r in index.rows_of(("annotation",)).tolist() if _STEP.match(str(names[r]))),
        key=lambda r: index.ts[r]))


# A run: its elements and its host interval [start, stop) (where its allocations are counted).
_Run = tuple[list[_Element], tuple[float, float]]


def _split(elements: list[_Element], starts: list[float], ends: list[float]) -> list[_Run]:
    """The elements issued in each [start, end), with that interval; empty intervals left out."""
    cuts = np.array(starts)
    runs: list[list[_Element]] = [[] for _ in starts]
    for e in elements:
        i = int(cuts.searchsorted(e.ts, "right")) - 1
        if i >= 0 and e.ts < ends[i]:
            runs[i].append(e)
    return [(run, (starts[i], ends[i])) for i, run in enumerate(runs) if run]


def _runs(table: EventTable, index: ScopeIndex, elements: list[_Element]) -> list[_Run]:
    """The elements of each profiler step. Without steps but with two or more CUDA-graph replays (a decode
    loop): of each replay, from its graph launch to the next, so that windows holding different numbers of
    replays compare per replay; what ran before the first replay (set-up, capture, warm-up) is no run, the
    eager work of each later step shows in the run before it. Else all of them as one run."""
    steps = _step_rows(index)
    if steps:
        return _split(elements, [float(index.ts[r]) for r in steps], [float(index.end[r]) for r in steps])
    launches = sorted({float(index.ts[int(index.replay[e.row])]) for e in elements if index.replay[e.row] >= 0})
    if len(launches) >= 2:
        return _split(elements, launches, launches[1:] + [np.inf])
    return [(elements, (-np.inf, np.inf))]


def _allocations(table: EventTable, index: ScopeIndex, start: float, stop: float, labels: dict
                 ) -> tuple[dict[str, tuple[int, int]], tuple[int, int]]:
    """Per scope and for the whole run: (bytes allocated, peak bytes live at once) of the allocations made
    in [start, stop)."""
    f = table.columns
    allocs = np.flatnonzero((index.kind == "alloc") & (index.ts >= start) & (index.ts < stop))
    if not len(allocs):
        return {}, (0, 0)
    nbytes = f["bytes"]
    paired = f["paired"]
    changes: dict[str, list[tuple[float, int]]] = {}
    every: list[tuple[float, int]] = []
    for a in allocs.tolist():
        size = int(nbytes[a])
        if size <= 0:
            continue
        label = scope_label(index, a, labels)
        events = [(float(index.ts[a]), size)]
        free = int(paired[a])
        if free >= 0 and index.ts[free] < stop:
            events.append((float(index.ts[free]), -size))
        changes.setdefault(label, []).extend(events)
        every.extend(events)

    def totals(events: list[tuple[float, int]]) -> tuple[int, int]:
        events.sort(key=lambda e: (e[0], e[1]))   # a free at the same instant goes first
        live = np.cumsum([d for _, d in events])
        return sum(d for _, d in events if d > 0), int(live.max(initial=0))

    return {label: totals(events) for label, events in changes.items()}, totals(every)


@dataclass
class _Sequence:
    """A launch sequence as the first run of a trace that launched it shows it."""

    key: tuple                                # the launches' keys, in order
    launches: list[tuple[str, Launch]]        # (scope label, launch without samples)
    allocations: tuple[dict[str, tuple[int, int]], tuple[int, int]]   # of that run: per scope, and in all
    issued: list[tuple[float, str]]           # where that run issued each launch: (issue time, finding group)


@dataclass
class TraceRuns:
    """One trace's part of its program's profile, made where the trace is loaded (no events, picklable):
    each distinct launch sequence of its runs once, and per run which sequence and its durations."""

    path: str
    program: str
    basis: str                                # "device" or "host"
    unattributed: int
    sequences: list[_Sequence]
    runs: list[tuple[int, np.ndarray]]        # (sequence, duration per position; 0 at syncs)
    workload: str | None = None               # the workload `kernlint run` recorded it from (run metadata)
    world: int | None = None                  # and that run's number of ranks
    rank: int | None = None                   # the trace's rank
    named: str = ""                           # the program the run metadata names (workload or target)
    host: str | None = None                   # the host the run metadata names (stripped from file names)
    content: str = ""                         # a name from what it ran (identity.content_name)


def trace_runs(table: EventTable) -> TraceRuns:
    """The per-trace part of profile_program."""
    index = ScopeIndex.of(table)
    elements, unattributed, basis = _elements(table, index)
    labels: dict = {}
    sequences: list[_Sequence] = []
    seen: dict[tuple, int] = {}
    runs = []
    outermost: dict[str, None] = {}
    for run, (start, stop) in _runs(table, index, elements):
        key = tuple(e.launch.key for e in run)
        if key not in seen:
            seen[key] = len(sequences)
            launches = [(scope_label(index, e.host, labels),
                         Launch(pos=0, kind=e.launch.kind, name=e.launch.name, category=e.launch.category,
                                op=e.launch.op, source=e.launch.source)) for e in run]
            sequences.append(_Sequence(key, launches, _allocations(table, index, start, stop, labels),
                                       [(e.ts, e.group) for e in run]))
            if len(sequences) == 1:
                for e in run:
                    units = index.enclosing_units(e.host)
                    if units:
                        outermost.setdefault(_FRAME_LINE.sub("", units[-1].label))
        runs.append((seen[key], np.array([e.launch.us[0] if e.launch.us else 0.0 for e in run], dtype=np.float64)))
    workload, world, named, host = _run_facts(table)
    part = TraceRuns(table.path, "", basis, unattributed, sequences, runs, workload, world,
                     rank=table.meta.rank, named=named, host=host, content=content_name(list(outermost)))
    return identified(part)


def _run_facts(table: EventTable) -> tuple[str | None, int | None, str, str | None]:
    """(workload, world size, the program the metadata names, host) from the trace's run metadata."""
    meta = run_metadata_of(table) or {}
    if not isinstance(meta, dict):
        return None, None, "", None
    workload = meta["workload"] if isinstance(meta.get("workload"), str) and meta["workload"] else None
    world = meta.get("world_size")
    world = world if isinstance(world, int) and not isinstance(world, bool) else None
    host = meta["host"] if isinstance(meta.get("host"), str) and meta["host"] else None
    return workload, world if workload else None, metadata_name(meta), host


def identified(part: TraceRuns, root: str | Path | None = None) -> TraceRuns:
    """`part` named by its program's identity (kernlint.baseline.identity), its path read below `root` (the
    folder it was found in) or, with none, as a file given by itself."""
    name = program_identity(metadata=part.named, path=path_name(part.path, root, part.host), content=part.content,
                            rank=part.rank, world=part.world)
    return dataclasses.replace(part, program=name)


def legacy_names(part: TraceRuns) -> list[str]:
    """The names older kernlint gave the part's program, which older baseline files hold: `trace` or `rank r`,
    and for a recorded workload W, `W` or `W/rank r`."""
    plain = "trace" if part.rank is None else f"rank {part.rank}"
    names = [plain]
    if part.workload:
        names.append(part.workload if part.rank is None else f"{part.workload}/rank {part.rank}")
        if part.rank == 0 and part.world == 1:
            names.append(part.workload)
    return names


def named_as_in_baseline(parts: list[TraceRuns], baseline_programs) -> list[TraceRuns]:
    """Each part under the name its program has in the baseline: its identity, or, for a baseline file that
    older kernlint wrote, the name that kernlint gave it (legacy_names) when the baseline holds that one and
    not the identity."""
    out = []
    for part in parts:
        if part.program not in baseline_programs:
            alias = next((a for a in legacy_names(part) if a in baseline_programs), None)
            if alias is not None:
                part = dataclasses.replace(part, program=alias)
        out.append(part)
    return out


def profile_program(tables: list[EventTable]) -> ProgramProfile:
    """One program's profile from its traces (repeated runs of it: several traces, or several steps)."""
    return profile_from_runs([trace_runs(t) for t in tables])


def profile_from_runs(parts: list[TraceRuns]) -> ProgramProfile:
    """One program's profile from its traces' parts (trace_runs), in trace order."""
    runs = [(part, part.sequences[seq], us) for part in parts for seq, us in part.runs]
    unattributed = sum(part.unattributed for part in parts)
    basis = "device" if {part.basis for part in parts} == {"device"} else "host"
    if not runs:
        return ProgramProfile(runs=0, timing_basis=basis, traces=[p.path for p in parts], unattributed=unattributed)
    keys = [sequence.key for _, sequence, _ in runs]
    ranked = Counter(keys).most_common()
    reference_key = ranked[0][0]
    reference = [r for r, k in zip(runs, keys) if k == reference_key]
    process_of = {id(part): i for i, part in enumerate(parts)}   # each trace is one process
    _, first, _ = reference[0]
    timed = [pos for pos, (_, launch) in enumerate(first.launches) if launch.kind != "sync"]
    # Python floats summed in order, as the samples were when each run held its own launches.
    durations = [us.tolist() for _, _, us in reference]
    total_us = [round(sum(us[pos] for pos in timed), 3) for us in durations]
    samples = {pos: [round(us[pos], 3) for us in durations] for pos in timed}
    scopes = _scopes(first, samples)
    per_scope, (alloc_bytes, peak) = first.allocations
    for label, (allocated, scope_peak) in per_scope.items():
        scope = scopes.setdefault(label, ScopeProfile(launches=[], counts={}))
        scope.alloc_bytes, scope.peak_scratch_bytes = allocated, scope_peak
    run_process = [process_of[id(part)] for part, _, _ in reference]
    quantum = timer_quantum(list(samples.values())) if basis == "device" else 0.0
    variants = [_variant(next((p, s) for p, s, _ in runs if s.key == key), count) for key, count in ranked[1:]]
    first_part = reference[0][0]
    return ProgramProfile(runs=len(reference), timing_basis=basis, scopes=dict(sorted(scopes.items())),
                          total_us=total_us, alloc_bytes=alloc_bytes, peak_scratch_bytes=peak,
                          traces=sorted({p.path for p in parts}), other_sequences=len(runs) - len(reference),
                          unattributed=unattributed, run_process=run_process if len(parts) > 1 else [],
                          quantum_us=quantum, variants=variants, issued=list(first.issued),
                          issued_trace=first_part.path)


def _scopes(sequence: _Sequence, samples: dict[int, list[float]]) -> dict[str, ScopeProfile]:
    """A sequence's launches by scope, each at its position in the program, with its samples."""
    scopes: dict[str, ScopeProfile] = {}
    for pos, (label, launch) in enumerate(sequence.launches):
        scope = scopes.setdefault(label, ScopeProfile(launches=[], counts={}))
        scope.launches.append(Launch(pos=pos, kind=launch.kind, name=launch.name, category=launch.category,
                                     op=launch.op, source=launch.source, us=samples.get(pos, [])))
        scope.counts[launch.category] = scope.counts.get(launch.category, 0) + 1
    return scopes


def _variant(first: tuple[TraceRuns, _Sequence], runs: int) -> Variant:
    """Another sequence than the reference, as the first run that launched it shows it (untimed)."""
    part, sequence = first
    return Variant(runs=runs, scopes=dict(sorted(_scopes(sequence, {}).items())), issued=list(sequence.issued),
                   trace=part.path)


def profile_traces(tables: list[EventTable], baseline_programs=()) -> dict[str, ProgramProfile]:
    """The traces' programs by identity (kernlint.baseline.identity: run metadata, file name, content; and
    rank): the traces of one program are repeated runs of it; named as in a baseline that holds
    `baseline_programs` (named_as_in_baseline). Several traces of one program under other file names are one
    program to profile_program, not here."""
    return profiles_from_runs(named_as_in_baseline([trace_runs(t) for t in tables], baseline_programs))


def profiles_from_runs(parts: list[TraceRuns]) -> dict[str, ProgramProfile]:
    """profile_traces from the traces' parts (trace_runs), in trace order."""
    by_program: dict[str, list[TraceRuns]] = {}
    for part in parts:
        by_program.setdefault(part.program, []).append(part)
    return {name: profile_from_runs(group) for name, group in sorted(by_program.items())}
