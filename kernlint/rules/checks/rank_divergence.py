"""rank-divergence: the ranks of one run issue the same host-side stream of matching events.

Each rank's stream is its host-side events that pass the filter (ops, and runtime calls outside any
matching op), outermost first, keyed by what was issued and where: the op (or call) name and its launch
site (the user Python line). A rank that issues a key more or fewer times than the reference rank (the one
closest to the per-key mode) is an error, pointed at the extra instance by sequence alignment.

A rank that issues more of some keys AND fewer of others than the reference runs another program (uneven
embedding shards, data-dependent control flow), not the same program with a stray op: it is not compared,
and the outcome says so (not applicable when no rank could be compared).

Under the same host op, ranks may legitimately launch different device work: a library picks another sort
path for another size, a fill of an empty tensor launches nothing. Such differences are info findings.
Ranks whose outermost streams differ while the multisets of every matching event (nested ones included) agree
step by step issued the same events, nested differently (zero-duration ops at one timestamp): not compared
further, and noted. The same holds per op and place: a key (name, launch site) whose outermost counts differ
while all its instances, nested ones included, agree step by step is not a difference (noted); the other keys
are still compared.
Device work whose launch falls outside the profiling window (kernlint.trace.window) is left out of every
comparison and counted in the report.

Each rank's stream is made where its trace is loaded (rank_stream, the kind's rank part: in a --jobs worker
or on a cluster) and holds no table; run_group compares the streams, so the verdict is the same wherever the
traces were read.
"""
from __future__ import annotations

import bisect
from collections import Counter, defaultdict
from dataclasses import dataclass, field

import numpy as np

from kernlint.rules.checks.base import (
    CheckKind,
    CheckSpec,
    device_time_and_bytes,
    function_of,
    named_scopes,
    register,
)
from kernlint.rules.cost import finding_cost
from kernlint.rules.fields import EventKinds, OpCategories, Patterns
from kernlint.rules.result import Cost, Finding, RuleOutcome, decided, not_applicable
from kernlint.trace.kinds import DEVICE_KINDS
from kernlint.trace.names import named_pattern
from kernlint.trace.rows import EventFilter, inside_any, outermost
from kernlint.trace.scopes import Scope, ScopeIndex
from kernlint.trace.syncs import unconfirmed_sync_ops
from kernlint.trace.window import window_edges

_ALIGN_LIMIT = 20_000_000    # len(a) * len(b) above which the extra instance is taken to be the last one


class RankDivergence(CheckSpec, tag="rank-divergence"):
    kinds: EventKinds = []                # host kinds compared: op, runtime (default: both)
    names: Patterns = []
    op_categories: OpCategories = []        # host categories; ["*"] = every working op and launch
    # A rank with more of some keys and fewer of others runs another program (uneven shards): by default it
    # is not compared. Syncs are few and each one costs: a sync rule compares such ranks too.
    compare_different_programs: bool = False


@dataclass
class RankStream:
    """One rank's stream for one rule: the map side of the cross-rank comparison. It holds no table, so it
    crosses process boundaries small: strings are interned (pickle writes each distinct one once) and the
    per-event numbers are arrays. Positions index the stream in issue order (thread by thread)."""

    trace: str
    rank: int | None
    keys: list[tuple[str, str]]            # (name, launch site) per position
    device: dict[int, tuple[str, ...]]     # position -> short names of the device work it launched (in window)
    unknown: frozenset[int]                # positions with a launch whose device work is not in the trace
    # What a finding at a position says: (event, kind, category, launch op, top op, source, function).
    sites: list[tuple]
    # Every matching host event, nested ones included, as (name, launch site, step) -> count: ranks whose
    # outermost streams differ while these agree issued the same ops, nested differently (zero-duration ops
    # at one timestamp), not different code.
    multiset: Counter
    ts: np.ndarray                         # launch time per position
    device_us: np.ndarray | None           # device time launched while it ran; None: the trace has no GPU events
    nbytes: np.ndarray                     # bytes allocated while it ran; -1: no allocation
    costs: list[Cost] = field(default_factory=list)   # the measured cost per position (kernlint.rules.cost)

    def finding(self, rule, pos: int, scope: Scope, message: str, severity: str | None = None) -> Finding:
        """The finding at position `pos`: what make_finding gives for its row, without the table."""
        event, kind, category, launch_op, top_op, source, function = self.sites[pos]
        nbytes = int(self.nbytes[pos])
        return Finding(
            rule=rule.id, name=rule.name, severity=severity or rule.severity, message=message, trace=self.trace,
            scope=scope.label, event=event, event_kind=kind, event_category=category, launch_op=launch_op,
            top_op=top_op, source=source, anchor=None, ts=float(self.ts[pos]), rank=self.rank, function=function,
            device_us=None if self.device_us is None else float(self.device_us[pos]),
            bytes=None if nbytes < 0 else nbytes, cost=self.costs[pos] if pos < len(self.costs) else None)


def _key(index: ScopeIndex, row: int, device_names: list[str]) -> tuple[str, str]:
    source = index.source[row]
    site = source if isinstance(source, str) else ""
    # A launch outside any op is told by what it launched; inside an op (a library's op that no filter
    # keeps), which kernel the library picked (CUB's Onesweep or SingleTile sort) is dispatch, compared as
    # device work (info), not as another event.
    if index.kind[row] == "runtime" and device_names and int(index.parent_op[row]) < 0:
        return f"{index.name[row]} -> {device_names[0]}", site
    return str(index.name[row]), site


def _site(index: ScopeIndex, row: int) -> tuple:
    """The fields of make_finding for a host row (an op or a runtime call) that do not depend on the rule."""
    op = int(index.op[row]) if index.kind[row] != "op" else row
    top = int(index.top_op[row])
    source = index.source[row]
    return (str(index.short_name[row]), str(index.kind[row]), str(index.category[row]),
            str(index.name[op]) if op >= 0 else None, str(index.name[top]) if top >= 0 else None,
            source if isinstance(source, str) else None, function_of(index, int(index.user_frame[row])))


def _host_rows(rule, index: ScopeIndex) -> tuple[list[int], dict[int, list[str]], set[int], list[int]]:
    """The rule's host rows in issue order (thread by thread), the device work each launched (in window),
    the rows whose device work is not in the trace, and every matching row (nested ones too)."""
    spec = rule.spec.check
    flt = EventFilter(tuple(spec.kinds or ("op", "runtime")), tuple(spec.names), (), tuple(spec.op_categories))
    edges = window_edges(index.table)
    outside = set(edges.outside.tolist())
    host = np.flatnonzero(np.isin(index.kind, ["op", "runtime"])).tolist()
    # A sync op that the trace shows to read a CPU value is neither a sync nor device work (kernlint.trace.syncs).
    unconfirmed = unconfirmed_sync_ops(index)
    rows = [r for r in host if r not in outside and not unconfirmed[r] and flt(index, r) and not index.in_machinery(r)]
    if rule.spec.scope.is_named:
        rows = inside_any(index, named_scopes(index, rule), rows)
    every = list(rows)
    rows = outermost(index, rows)
    # Calls inside one op count once: a `.cpu()` copy is a pageable cudaMemcpyAsync and, on newer torch, a
    # cudaStreamSynchronize after it; that is one sync at one line.
    seen_ops: set[int] = set()
    deduped = []
    for r in sorted(rows, key=lambda r: index.ts[r]):
        parent = int(index.parent_op[r])
        if index.kind[r] == "runtime" and parent >= 0:
            if parent in seen_ops:
                continue
            seen_ops.add(parent)
        deduped.append(r)
    rows = deduped
    chosen = set(rows)
    device: dict[int, list[str]] = defaultdict(list)
    dev_rows = np.flatnonzero(np.isin(index.kind, list(DEVICE_KINDS)) & (index.launcher >= 0))
    short = index.short_name
    def owner_of(row: int) -> int:
        while row >= 0 and row not in chosen:
            row = int(index.parent_op[row])
        return row

    for d in dev_rows[np.argsort(index.ts[dev_rows], kind="stable")].tolist():
        owner = owner_of(int(index.launcher[d]))
        if owner >= 0:
            device[owner].append(str(short[d]))
    # A launch with no device event in the trace (past the window's end, or lost): what its op ran is
    # unknown, so that op's device work is not compared.
    unknown = {owner_of(int(r)) for r in np.concatenate([edges.past_end, edges.unlinked_launches]).tolist()}
    # Thread by thread (each in issue order), threads by their first event: thread ids differ across ranks.
    by_thread: dict[str, list[int]] = defaultdict(list)
    for r in sorted(rows, key=lambda r: index.ts[r]):
        by_thread[index.thread[r]].append(r)
    ordered = [r for t in sorted(by_thread, key=lambda t: index.ts[by_thread[t][0]]) for r in by_thread[t]]
    return ordered, device, unknown, every


def rank_stream(rule, table, index: ScopeIndex) -> RankStream:
    """One rank's stream for `rule` (the kind's rank part: computed where the trace is loaded)."""
    rows, device, unknown, every = _host_rows(rule, index)
    interned: dict = {}

    def intern(value):
        return interned.setdefault(value, value)

    keys, sites, ts, device_us, nbytes, costs = [], [], [], [], [], []
    dev_by_pos: dict[int, tuple[str, ...]] = {}
    for pos, r in enumerate(rows):
        names = device.get(r, [])
        keys.append(intern(_key(index, r, names)))
        if names:
            dev_by_pos[pos] = intern(tuple(intern(n) for n in names))
        sites.append(intern(tuple(intern(v) for v in _site(index, r))))
        cost = device_time_and_bytes(index, r)
        ts.append(float(index.launch_ts[r]))
        device_us.append(cost["device_us"])
        nbytes.append(-1 if cost["bytes"] is None else cost["bytes"])
        costs.append(finding_cost(index, r))
    position = {r: pos for pos, r in enumerate(rows)}
    step_of = _steps_of(index)
    multiset = Counter((str(index.name[r]), _key(index, r, [])[1], step_of(r)) for r in every)
    return RankStream(
        trace=table.path, rank=table.meta.rank, keys=keys, device=dev_by_pos, multiset=multiset,
        unknown=frozenset(position[r] for r in unknown if r in position), sites=sites,
        ts=np.asarray(ts, dtype=np.float64),
        device_us=np.asarray(device_us, dtype=np.float64) if table.has_device_events else None,
        nbytes=np.asarray(nbytes, dtype=np.int64), costs=costs)


def _steps_of(index: ScopeIndex):
    """row -> the `ProfilerStep#N` range it ran in on its thread ("" outside one)."""
    by_thread: dict[str, list] = defaultdict(list)
    for s in sorted(index.named_scopes(annotations=[named_pattern("profiler-step-range")]), key=lambda s: s.ts):
        by_thread[s.thread].append(s)   # instances on one thread do not overlap (nested ones merge)
    starts = {t: [s.ts for s in steps] for t, steps in by_thread.items()}

    def step_of(row: int) -> str:
        steps, at = by_thread.get(index.thread[row]), float(index.ts[row])
        if not steps:
            return ""
        i = bisect.bisect_right(starts[index.thread[row]], at) - 1
        return steps[i].name if i >= 0 and at < steps[i].end else ""

    return step_of


def _label(key: tuple[str, str]) -> str:
    return f"{key[0]} at {key[1]}" if key[1] else key[0]


def _extra_rows(ref: list, seq: list) -> dict[tuple, list[int]]:
    """For each key, the positions of `seq` that alignment with `ref` marks as inserted."""
    out: dict[tuple, list[int]] = defaultdict(list)
    if len(ref) * len(seq) > _ALIGN_LIMIT:
        seen: Counter = Counter()
        limit = Counter(ref)
        for pos, key in enumerate(seq):
            seen[key] += 1
            if seen[key] > limit[key]:
                out[key].append(pos)
        return out
    import difflib  # here: only a divergence needs it (start-up)

    for tag, _a1, _a2, b1, b2 in difflib.SequenceMatcher(None, ref, seq, autojunk=False).get_opcodes():
        if tag in ("insert", "replace"):
            for j in range(b1, b2):
                out[seq[j]].append(j)
    return out


def run_group(rule, group) -> RuleOutcome:
    """The ranks of one run (`group.tables`: each rank's RankStream for this rule, in rank order)."""
    streams: list[RankStream] = list(group.tables)
    if not any(s.keys for s in streams):
        return not_applicable(rule, "no host event on any rank matches the rule's filter", absent=True)
    counts = [Counter(s.keys) for s in streams]
    everything = sorted(set().union(*counts))
    mode = {}
    for key in everything:
        usual = Counter(c[key] for c in counts).most_common()
        mode[key] = min(v for v, n in usual if n == usual[0][1])  # ties go to the smaller count
    distance = [sum(abs(c[k] - mode[k]) for k in everything) for c in counts]
    ref = min(range(len(streams)), key=lambda i: (distance[i], streams[i].rank))
    ref_stream = streams[ref]
    ref_rank = ref_stream.rank
    scope = Scope(row=-1, kind="ranks", name=", ".join(str(s.rank) for s in streams), thread="", ts=0.0,
                  end=0.0)
    findings: list[Finding] = []
    heterogeneous: list[str] = []
    nested: list[str] = []
    ops = {k for s in streams for k, site in zip(s.keys, s.sites) if site[1] == "op"}
    for i, (stream, c) in enumerate(zip(streams, counts)):
        if i == ref:
            continue
        rank = stream.rank
        if c != counts[ref] and stream.multiset == ref_stream.multiset:
            nested.append(f"rank {rank} issues the same events as rank {ref_rank} step by step, nested "
                          "differently (ops of zero duration at one timestamp)")
            findings.extend(_device_differences(rule, stream, ref_stream, scope))
            continue
        # Per op and place: a key whose outermost count differs while every instance of it (nested ones
        # included) agrees step by step is the same op at the same line, nested differently.
        mine, theirs = _places(stream), _places(ref_stream)
        # Ops only: a runtime call counts once per enclosing op, so its nesting is what it ran under (an
        # item's copy, a .cpu()'s), not a tie of timestamps.
        renested = {k for k in everything if c[k] != counts[ref][k] and k in ops and mine.get(k)
                    and mine.get(k) == theirs.get(k)}
        if renested:
            nested.append(f"rank {rank} issues the same {', '.join(sorted(_label(k) for k in renested))} as rank "
                          f"{ref_rank} step by step, nested differently (ops of zero duration at one timestamp)")
        more = [k for k in everything if c[k] > counts[ref][k] and k not in renested]
        fewer = [k for k in everything if c[k] < counts[ref][k] and k not in renested]
        if more and fewer and not rule.spec.check.compare_different_programs:
            # Not one stray op but another program: more of some ops and fewer of others (embedding tables
            # sharded unevenly, data-dependent control flow). Comparing such ranks op by op says nothing.
            heterogeneous.append(f"rank {rank} issues more of {len(more)} and fewer of {len(fewer)} kinds of "
                                 f"event than rank {ref_rank} (e.g. {_label(more[0])}; {_label(fewer[0])})")
            continue
        if stream.keys != ref_stream.keys:
            extra = _extra_rows(ref_stream.keys, stream.keys)
            for key in everything:
                delta = c[key] - counts[ref][key]
                if delta == 0 or key in renested:
                    continue
                message = (f"rank {rank} issues {abs(delta)} {'more' if delta > 0 else 'fewer'} {_label(key)} "
                           f"than rank {ref_rank} ({c[key]} against {counts[ref][key]})")
                positions = extra.get(key) if delta > 0 else None
                if delta < 0 and len(streams) == 2:
                    # Two ranks: no majority, so point at the rank that has the extra one, at its line.
                    ref_extra = _extra_rows(stream.keys, ref_stream.keys).get(key)
                    if ref_extra:
                        findings.append(ref_stream.finding(
                            rule, ref_extra[0], scope,
                            f"rank {ref_rank} issues {-delta} more {_label(key)} than rank {rank} "
                            f"({counts[ref][key]} against {c[key]})"))
                        continue
                if positions:
                    findings.append(stream.finding(rule, positions[0], scope, message))
                else:
                    findings.append(Finding(
                        rule=rule.id, name=rule.name, severity=rule.severity, message=message, trace=stream.trace,
                        scope=scope.label, event=key[0], event_kind="missing", event_category="",
                        launch_op=None, top_op=None, source=key[1] or None, anchor=None, ts=0.0, rank=rank))
            if c == counts[ref]:
                j = next(j for j, (a, b) in enumerate(zip(stream.keys, ref_stream.keys)) if a != b)
                findings.append(stream.finding(rule, j, scope,
                                               f"rank {rank} issues {_label(stream.keys[j])} where rank {ref_rank} "
                                               f"issues {_label(ref_stream.keys[j])} (position {j}): same "
                                               "events in another order", severity="info"))
        findings.extend(_device_differences(rule, stream, ref_stream, scope))
    if heterogeneous and not findings:
        return not_applicable(rule, "the ranks run different host programs, not one program with a stray "
                                    "difference: " + "; ".join(heterogeneous))
    notes = (["not compared, running different host programs: " + "; ".join(heterogeneous)] if heterogeneous
             else []) + nested
    return decided(rule, findings, "host", len(streams), "; ".join(notes) or None)


def _places(stream: RankStream) -> dict[tuple[str, str], Counter]:
    """(name, launch site) -> its instances per step, nested ones included (from the stream's multiset)."""
    found: dict[tuple[str, str], Counter] = defaultdict(Counter)
    for (name, site, step), n in stream.multiset.items():
        found[(name, site)][step] += n
    return found


def _device_differences(rule, stream: RankStream, ref: RankStream, scope) -> list[Finding]:
    """Info findings: under the k-th instance of the same host key, different device work (per key, once)."""
    by_key_ref: dict[tuple, list[int]] = defaultdict(list)
    for pos, key in enumerate(ref.keys):
        by_key_ref[key].append(pos)
    by_key: dict[tuple, list[int]] = defaultdict(list)
    for pos, key in enumerate(stream.keys):
        by_key[key].append(pos)
    out = []
    for key, positions in by_key.items():
        ref_positions = by_key_ref.get(key, [])
        if len(positions) != len(ref_positions):
            continue  # a count difference is already an error above
        differing = [(p, q) for p, q in zip(positions, ref_positions)
                     if p not in stream.unknown and q not in ref.unknown
                     and Counter(stream.device.get(p, ())) != Counter(ref.device.get(q, ()))]
        if not differing:
            continue
        p, q = differing[0]
        mine = ", ".join(stream.device.get(p, ())) or "no device work"
        theirs = ", ".join(ref.device.get(q, ())) or "no device work"
        out.append(stream.finding(
            rule, p, scope,
            f"under {_label(key)}, rank {stream.rank} launched {mine} where rank {ref.rank} launched {theirs} "
            f"({len(differing)} of {len(positions)} instance(s); data-dependent dispatch, not a divergence of the "
            "code)", severity="info"))
    return out


def _needs_a_filter(rule):
    c = rule.spec.check
    if not (c.kinds or c.names or c.op_categories):
        return "rank-divergence needs at least one of kinds, names, op-categories", ["check", "type"]
    return None


register(CheckKind(
    type="rank-divergence", spec=RankDivergence, rank_part=rank_stream, run_group=run_group, validate=_needs_a_filter,
    summary="The ranks of one distributed run issue the same host-side stream of matching events."))
