"""The rule engine: rules x event table -> findings and per-rule outcomes. Returns data, prints nothing."""
from __future__ import annotations

import difflib
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np

from kernlint.rules.schema import SEVERITY_ORDER, Rule
from kernlint.trace.names import frame_parts
from kernlint.trace.scopes import COARSE_ANNOTATIONS, Scope, ScopeIndex
from kernlint.trace.table import DEVICE_KINDS, EventTable

STATUS_FAILED = "failed"
STATUS_PASSED = "passed"
STATUS_NOT_APPLICABLE = "not-applicable"


@dataclass(frozen=True)
class Finding:
    """One rule violation, pointing at the offending event and the code that launched it."""

    rule: str
    name: str
    severity: str
    message: str
    trace: str
    scope: str
    event: str
    event_kind: str
    event_category: str
    launch_op: str | None
    top_op: str | None
    source: str | None
    anchor: str | None
    ts: float
    rank: int | None = None
    function: str | None = None    # the user function at `source`

    @property
    def fingerprint(self) -> str:
        """Stable identity across runs (no timestamps, no file paths): for baselines."""
        return "|".join([self.rule, self.scope, self.event, self.top_op or "", self.anchor or ""])


@dataclass
class RuleOutcome:
    rule: str
    name: str
    severity: str
    status: str
    level: str | None = None       # "kernel" or "op" for anchored checks
    instances: int = 0             # anchors or scope instances checked
    reason: str | None = None      # why not applicable
    note: str | None = None        # e.g. which part of the rule could not run on this trace
    findings: list[Finding] = field(default_factory=list)


@dataclass
class TraceReport:
    trace: str
    events: int
    has_device_events: bool
    has_stacks: bool
    rank: int | None
    outcomes: list[RuleOutcome]
    ranks: list[int] | None = None   # set for the report of a group of ranks (the cross-rank rules)

    @property
    def findings(self) -> list[Finding]:
        return [f for o in self.outcomes for f in o.findings]


def check_trace(table: EventTable, rules: Iterable[Rule],
                coarse: Sequence[str] = COARSE_ANNOTATIONS, *, in_rank_group: bool = False) -> TraceReport:
    """One trace. Cross-rank rules are left to check_traces when the trace belongs to a group of ranks,
    and are not applicable to a trace on its own."""
    index = ScopeIndex.of(table, coarse)
    outcomes = []
    for rule in rules:
        if rule.cross_rank:
            if not in_rank_group:
                outcomes.append(_na(rule, "needs the traces of two or more ranks of one distributed run"))
            continue
        outcomes.append(_check_rule(rule, table, index))
    return TraceReport(trace=table.path, events=len(table), has_device_events=table.has_device_events,
                       has_stacks=table.has_stacks, rank=table.meta.rank, outcomes=outcomes)


def rank_groups(tables: Sequence[EventTable]) -> list[list[EventTable]]:
    """Traces of one distributed run: same folder, same world size, distinct ranks (two or more)."""
    groups: dict[tuple, list[EventTable]] = {}
    for t in tables:
        if t.meta.rank is None:
            continue
        world = (t.meta.distributed or {}).get("world_size")
        groups.setdefault((str(Path(t.path).parent), world), []).append(t)
    out = []
    for members in groups.values():
        ranks = [m.meta.rank for m in members]
        if len(members) >= 2 and len(set(ranks)) == len(ranks):
            out.append(sorted(members, key=lambda m: m.meta.rank))
    return out


def check_traces(tables: Sequence[EventTable], rules: Sequence[Rule],
                 coarse: Sequence[str] = COARSE_ANNOTATIONS) -> list[TraceReport]:
    """Every trace on its own, then each group of ranks as one more report holding the cross-rank rules."""
    groups = rank_groups(tables)
    grouped = {id(t) for g in groups for t in g}
    reports = [check_trace(t, rules, coarse, in_rank_group=id(t) in grouped) for t in tables]
    cross = [r for r in rules if r.cross_rank]
    for group in groups:
        if not cross:
            continue
        indexes = [ScopeIndex.of(t, coarse) for t in group]
        outcomes = [_rank_divergence(rule, group, indexes) for rule in cross]
        ranks = [t.meta.rank for t in group]
        reports.append(TraceReport(
            trace=f"{Path(group[0].path).parent} (ranks {', '.join(map(str, ranks))})",
            events=sum(len(t) for t in group), has_device_events=all(t.has_device_events for t in group),
            has_stacks=all(t.has_stacks for t in group), rank=None, outcomes=outcomes, ranks=ranks))
    return reports


def merge_outcomes(outcomes: list[RuleOutcome]) -> RuleOutcome:
    """One rule's outcomes over several traces (the ranks of a run) as one: failed if any failed, passed if
    any passed, else not applicable."""
    if len(outcomes) == 1:
        return outcomes[0]
    statuses = {o.status for o in outcomes}
    status = next(s for s in (STATUS_FAILED, STATUS_PASSED, STATUS_NOT_APPLICABLE) if s in statuses)
    first = outcomes[0]
    levels = {o.level for o in outcomes if o.status != STATUS_NOT_APPLICABLE}
    return RuleOutcome(first.rule, first.name, first.severity, status,
                       level=levels.pop() if len(levels) == 1 else None,
                       instances=sum(o.instances for o in outcomes),
                       reason="; ".join(sorted({o.reason for o in outcomes if o.reason})) or None,
                       findings=[f for o in outcomes for f in o.findings])


def merge_reports(reports: Sequence[TraceReport]) -> TraceReport:
    """The reports of one run's traces (its ranks, and their group) as one, rule by rule."""
    if len(reports) == 1:
        return reports[0]
    by_rule: dict[str, list[RuleOutcome]] = {}
    for report in reports:
        for o in report.outcomes:
            by_rule.setdefault(o.rule, []).append(o)
    return TraceReport(trace=str(Path(reports[0].trace).parent), events=sum(r.events for r in reports),
                       has_device_events=all(r.has_device_events for r in reports),
                       has_stacks=all(r.has_stacks for r in reports), rank=None,
                       outcomes=[merge_outcomes(outs) for outs in by_rule.values()])


def exit_status(reports: Iterable[TraceReport], fail_on: str = "warning") -> int:
    """0 when no finding at or above `fail_on` severity, else 1."""
    threshold = SEVERITY_ORDER[fail_on]
    for report in reports:
        for f in report.findings:
            if SEVERITY_ORDER[f.severity] >= threshold:
                return 1
    return 0


# -- helpers ---------------------------------------------------------------------------------------------------

def _na(rule: Rule, reason: str) -> RuleOutcome:
    return RuleOutcome(rule.id, rule.name, rule.severity, STATUS_NOT_APPLICABLE, reason=reason)


def _rows_matching(index: ScopeIndex, kinds: Iterable[str], pattern: str) -> np.ndarray:
    regex = re.compile(pattern)
    rows = np.flatnonzero(np.isin(index.kind, list(kinds)))
    names = index.name
    return np.array([r for r in rows.tolist() if regex.search(names[r])], dtype=np.int64)


def _drop_nested(index: ScopeIndex, rows: np.ndarray) -> np.ndarray:
    """Anchor ranges nested in another anchor range on the same thread count once (the outer one)."""
    if len(rows) < 2:
        return rows
    order = sorted(rows.tolist(), key=lambda r: (index.thread[r], index.ts[r], -index.end[r]))
    kept: list[int] = []
    for r in order:
        if kept and index.thread[kept[-1]] == index.thread[r] and index.ts[r] < index.end[kept[-1]]:
            continue
        kept.append(r)
    return np.array(kept, dtype=np.int64)


def _find_anchors(rule: Rule, table: EventTable, index: ScopeIndex) -> tuple[str | None, np.ndarray]:
    anchor = rule.spec.anchor
    if anchor is None:
        return None, np.empty(0, dtype=np.int64)
    if anchor.kernel and table.has_device_events:
        rows = _rows_matching(index, DEVICE_KINDS, anchor.kernel)
        if len(rows):
            return "kernel", rows
    if anchor.op:
        rows = _drop_nested(index, _rows_matching(index, ("op", "annotation"), anchor.op))
        if len(rows):
            return "op", rows
    return None, np.empty(0, dtype=np.int64)


def _anchor_reason(rule: Rule, table: EventTable) -> str:
    anchor = rule.spec.anchor
    parts = []
    if anchor.kernel:
        parts.append(f"no kernel matches /{anchor.kernel}/" if table.has_device_events
                     else "the trace has no GPU events (kernel-level check)")
    if anchor.op:
        parts.append(f"no op or range matches /{anchor.op}/")
    return "; ".join(parts)


def _outermost(index: ScopeIndex, rows: Sequence[int]) -> list[int]:
    """Of candidate ops, those with no other candidate above them (report `new_ones`, not its `fill_`)."""
    chosen = set(rows)
    parent = index.frame["parent_op"].to_numpy()
    out = []
    for r in rows:
        p = parent[r]
        while p >= 0 and p not in chosen:
            p = parent[p]
        if p < 0:
            out.append(r)
    return out


def _keep_outermost_ops(index: ScopeIndex, rows: list[int]) -> list[int]:
    """Non-op rows as they are; of the ops, only those with no other listed op above them."""
    ops = [r for r in rows if index.kind[r] == "op"]
    if not ops:
        return rows
    keep = set(_outermost(index, ops))
    return [r for r in rows if index.kind[r] != "op" or r in keep]


def _inside_any(index: ScopeIndex, scopes: Sequence[Scope], rows: Iterable[int]) -> list[int]:
    """Those rows issued (launch_ts) from inside one of `scopes`, on the scope's thread."""
    key = index.launch_ts
    return [r for r in rows if any(s.thread == index.thread[r] and s.holds(key[r]) for s in scopes)]


def _category_ok(category: str, allowed: Sequence[str]) -> bool:
    return "*" in allowed or category in allowed


class _EventFilter:
    def __init__(self, rule: Rule):
        check = rule.spec.check
        self.kinds = set(check.kinds)
        self.names = [re.compile(p) for p in check.names]
        self.device_categories = list(check.device_categories)
        self.op_categories = list(check.op_categories)

    def __call__(self, index: ScopeIndex, row: int) -> bool:
        kind = index.kind[row]
        if self.kinds and kind not in self.kinds:
            return False
        if self.names and not any(rx.search(index.name[row]) for rx in self.names):
            return False
        if self.device_categories or self.op_categories:
            allowed = self.device_categories if kind in DEVICE_KINDS else self.op_categories
            if not _category_ok(index.frame.at[row, "category"], allowed):
                return False
        return True


def _finding(rule: Rule, index: ScopeIndex, row: int, scope: Scope, message: str,
             anchor: str | None, event: str | None = None) -> Finding:
    f = index.frame
    op = int(f.at[row, "op"]) if index.kind[row] != "op" else row
    top = int(f.at[row, "top_op"])
    return Finding(
        rule=rule.id, name=rule.name, severity=rule.severity, message=message, trace=index.table.path,
        scope=scope.label, event=event or str(f.at[row, "short_name"]), event_kind=str(index.kind[row]),
        event_category=str(f.at[row, "category"]),
        launch_op=str(index.name[op]) if op >= 0 else None,
        top_op=str(index.name[top]) if top >= 0 else None,
        source=f.at[row, "source"], anchor=anchor, ts=float(f.at[row, "launch_ts"]),
        rank=index.table.meta.rank, function=_function_of(index, int(f.at[row, "user_frame"])),
    )


def _function_of(index: ScopeIndex, frame_row: int) -> str | None:
    if frame_row < 0:
        return None
    return frame_parts(str(index.name[frame_row]))[2]


# -- the five checks -----------------------------------------------------------------------------------------------

def _check_rule(rule: Rule, table: EventTable, index: ScopeIndex) -> RuleOutcome:
    if rule.spec.requires_device and not table.has_device_events:
        return _na(rule, "the trace has no GPU events")
    check = rule.spec.check.type
    if check == "forbid-before-anchor":
        return _forbid_before_anchor(rule, table, index)
    scopes = index.named_scopes(rule.spec.scope.annotations, rule.spec.scope.modules,
                                rule.spec.scope.frames, rule.spec.scope.ops)
    if not scopes:
        return _na(rule, "no annotation, module, frame or op matches the rule's [scope]")
    if check == "forbid-in-scope":
        return _forbid_in_scope(rule, table, index, scopes)
    if check == "forbid-temporary-alloc":
        return _forbid_temporary_alloc(rule, index, scopes)
    if check == "max-count":
        return _max_count(rule, table, index, scopes)
    return _require_anchor(rule, table, index, scopes)


def _done(rule: Rule, findings: list[Finding], level: str | None, instances: int) -> RuleOutcome:
    return RuleOutcome(rule.id, rule.name, rule.severity, STATUS_FAILED if findings else STATUS_PASSED,
                       level=level, instances=instances, findings=findings)


def _forbid_before_anchor(rule: Rule, table: EventTable, index: ScopeIndex) -> RuleOutcome:
    level, anchors = _find_anchors(rule, table, index)
    if level is None:
        return _na(rule, _anchor_reason(rule, table))
    if rule.spec.scope.is_named:
        named = index.named_scopes(rule.spec.scope.annotations, rule.spec.scope.modules,
                                   rule.spec.scope.frames, rule.spec.scope.ops)
        anchors = np.array(_inside_any(index, named, anchors.tolist()), dtype=np.int64)
        if not len(anchors):
            return _na(rule, "no anchor lies inside the rule's [scope]")
    note = None
    if level == "kernel":
        # Kernels replayed from a CUDA graph share one launch call: their launching module is unknown.
        launcher = index.frame["launcher"].to_numpy()
        graph = np.array([launcher[a] >= 0 and "GraphLaunch" in index.name[launcher[a]] for a in anchors.tolist()],
                         dtype=bool)
        if graph.all():
            return _na(rule, "every anchor kernel was replayed from a CUDA graph (no per-kernel launch to attribute)")
        if graph.any():
            note = f"{int(graph.sum())} anchor kernel(s) replayed from CUDA graphs were not checked"
        anchors = anchors[~graph]
    check = rule.spec.check
    findings: list[Finding] = []
    anchor_set = set(anchors.tolist())
    if level == "op" and rule.spec.anchor.kernel:
        note = ("kernel-level check not applicable: the trace has no GPU events; checked at op level"
                if not table.has_device_events else
                f"no kernel matches /{rule.spec.anchor.kernel}/; checked at op level")
    unplaced = 0
    for a in anchors.tolist():
        scope = index.anchor_scope(a, level, anchors.tolist())
        anchor_name = str(index.frame.at[a, "short_name"])
        if scope.kind == "anchor":
            unplaced += 1  # no module, range, frame or op encloses its launch: nothing can precede it in scope
        if level == "kernel":
            start = index.launch_ts[a]
            rows = [r for r in index.device_events_between(scope.thread, scope.ts, start).tolist()
                    if r not in anchor_set and _category_ok(index.frame.at[r, "category"], check.device_categories)]
        else:
            a_ts, a_end = index.ts[a], index.end[a]
            cand = index.work_ops_between(scope.thread, scope.ts, a_ts).tolist()
            rows = [r for r in cand if index.end[r] <= a_ts or not (index.ts[r] <= a_ts and index.end[r] >= a_end)]
            rows = [r for r in rows if _category_ok(index.frame.at[r, "category"], check.op_categories)
                    or (("*" in check.op_categories) and index.frame.at[r, "does_work"])]
            rows = _outermost(index, rows)
        for r in rows:
            event = str(index.frame.at[r, "short_name"])
            findings.append(_finding(rule, index, r, scope,
                                     f"{event} ({index.frame.at[r, 'category']}) runs before {anchor_name} "
                                     f"in {scope.label}", anchor_name))
    if unplaced and unplaced == len(anchors):
        return _na(rule, "no anchor lies in any module, range, Python frame or op (compiled code, or a trace "
                         "recorded without stacks): there is no scope to check")
    if unplaced:
        extra = (f"{unplaced} of {len(anchors)} anchor(s) have no enclosing module, range, Python frame or op "
                 "(compiled code, or a trace without stacks): nothing could be checked before them")
        note = f"{note}; {extra}" if note else extra
    outcome = _done(rule, findings, level, len(anchors))
    outcome.note = note
    return outcome


def _scope_rows(index: ScopeIndex, scope: Scope, rule_filter: _EventFilter) -> list[int]:
    kinds = index.kind
    device = index.device_events_between(scope.thread, scope.ts, scope.end).tolist()
    host_rows = np.flatnonzero(np.isin(kinds, ["runtime", "op", "annotation", "module", "python"]))
    host_rows = index.rows_in_scope(scope, host_rows, key="ts").tolist()
    rows = _keep_outermost_ops(index, [r for r in device + host_rows if r != scope.row and rule_filter(index, r)])
    return sorted(rows, key=lambda r: index.launch_ts[r])


def _forbid_in_scope(rule: Rule, table: EventTable, index: ScopeIndex, scopes: list[Scope]) -> RuleOutcome:
    flt = _EventFilter(rule)
    findings = []
    for scope in scopes:
        for r in _scope_rows(index, scope, flt):
            event = str(index.frame.at[r, "short_name"])
            findings.append(_finding(rule, index, r, scope, f"{event} in {scope.label}", None))
    return _done(rule, findings, "kernel" if table.has_device_events else "op", len(scopes))


def _max_count(rule: Rule, table: EventTable, index: ScopeIndex, scopes: list[Scope]) -> RuleOutcome:
    flt = _EventFilter(rule)
    limit = rule.spec.check.max
    findings = []
    for scope in scopes:
        rows = _scope_rows(index, scope, flt)
        if len(rows) > limit:
            first_over = rows[limit]
            f = _finding(rule, index, first_over, scope,
                         f"{len(rows)} matching events in {scope.label}, at most {limit} allowed", None)
            findings.append(f)
    return _done(rule, findings, "kernel" if table.has_device_events else "op", len(scopes))


def _forbid_temporary_alloc(rule: Rule, index: ScopeIndex, scopes: list[Scope]) -> RuleOutcome:
    check = rule.spec.check
    f = index.frame
    recorded = index.table.meta.profile_memory
    if recorded is False or (recorded is None and not (index.kind == "alloc").any()):
        # Without memory events a temporary is invisible: say so rather than pass.
        return _na(rule, "the trace has no [memory] events (record with profile_memory=True)")
    dtypes = set(check.dtypes)
    allocs = np.flatnonzero((index.kind == "alloc") & f["dtype"].isin(dtypes).to_numpy()
                            & (f["bytes"].to_numpy() >= max(check.min_bytes, 1)))
    paired = f["paired"].to_numpy()
    findings = []
    for scope in scopes:
        for r in index.rows_in_scope(scope, allocs, key="ts").tolist():
            free = paired[r]
            if free < 0 or not (index.ts[free] < scope.end):
                continue  # kept beyond the scope: that is the parameter itself, or a real output
            dtype, nbytes = f.at[r, "dtype"], int(f.at[r, "bytes"])
            findings.append(_finding(rule, index, r, scope,
                                     f"temporary {dtype} buffer of {nbytes} bytes allocated and freed inside "
                                     f"{scope.label}", None, event=f"{dtype} temporary ({nbytes} B)"))
    return _done(rule, findings, None, len(scopes))


def _require_anchor(rule: Rule, table: EventTable, index: ScopeIndex, scopes: list[Scope]) -> RuleOutcome:
    level, anchors = _find_anchors(rule, table, index)
    key = index.launch_ts
    findings = []
    for scope in scopes:
        inside = [a for a in anchors.tolist() if index.thread[a] == scope.thread and scope.holds(key[a])]
        if not inside:
            pattern = rule.spec.anchor.kernel if level != "op" and table.has_device_events else rule.spec.anchor.op
            row = scope.row
            findings.append(Finding(
                rule=rule.id, name=rule.name, severity=rule.severity,
                message=f"{scope.label} has no event matching /{pattern}/", trace=table.path, scope=scope.label,
                event=scope.name, event_kind=scope.kind, event_category="", launch_op=None, top_op=None,
                source=index.frame.at[row, "source"] if row >= 0 else None, anchor=None, ts=scope.ts,
                rank=table.meta.rank))
    return _done(rule, findings, level, len(scopes))


# -- across ranks ------------------------------------------------------------------------------------------------

def _rank_events(rule: Rule, index: ScopeIndex, level: str) -> list[int]:
    """The rows a rank-divergence rule compares, in launch order: device events at kernel level; at op
    level, top-level working ops and runtime calls that pass the rule's filter."""
    flt = _EventFilter(rule)
    kinds = index.kind
    f = index.frame
    if level == "kernel":
        rows = np.flatnonzero(np.isin(kinds, list(DEVICE_KINDS)) | (kinds == "runtime"))
    else:
        rows = np.flatnonzero(((kinds == "op") & f["does_work"].to_numpy()) | (kinds == "runtime"))
    rows = [r for r in rows.tolist() if flt(index, r)]
    if rule.spec.scope.is_named:
        scopes = index.named_scopes(rule.spec.scope.annotations, rule.spec.scope.modules,
                                    rule.spec.scope.frames, rule.spec.scope.ops)
        rows = _inside_any(index, scopes, rows)
    return sorted(_keep_outermost_ops(index, rows), key=lambda r: index.launch_ts[r])


def _rank_divergence(rule: Rule, group: list[EventTable], indexes: list[ScopeIndex]) -> RuleOutcome:
    """Each rank's matching events against a reference rank: the one closest to the per-name mode counts.

    Counts per name decide what is extra or missing; a sequence alignment (difflib) finds which instance
    is the extra one, so the finding points at the line that launched it. Equal counts in another order
    are reported at the first place the order differs.
    """
    if rule.spec.requires_device and not all(t.has_device_events for t in group):
        return _na(rule, "some rank's trace has no GPU events")
    level = "kernel" if all(t.has_device_events for t in group) else "op"
    per_rank = [_rank_events(rule, index, level) for index in indexes]
    names = [[str(ix.frame.at[r, "short_name"]) for r in rows] for ix, rows in zip(indexes, per_rank)]
    if not any(names):
        return _na(rule, "no event on any rank matches the rule's filter")
    counts = [Counter(n) for n in names]
    everything = sorted(set().union(*counts))
    mode = {}
    for name in everything:
        usual = Counter(c[name] for c in counts).most_common()
        mode[name] = min(v for v, n in usual if n == usual[0][1])  # ties go to the smaller count
    distance = [sum(abs(c[name] - mode[name]) for name in everything) for c in counts]
    ref = min(range(len(group)), key=lambda i: (distance[i], group[i].meta.rank))
    ref_rank = group[ref].meta.rank
    scope = Scope(row=-1, kind="ranks", name=", ".join(str(t.meta.rank) for t in group), thread="", ts=0.0,
                  end=0.0)
    findings: list[Finding] = []
    for i, (table, index, rows, seq, c) in enumerate(zip(group, indexes, per_rank, names, counts)):
        if i == ref or seq == names[ref]:
            continue
        extra_rows: dict[str, int] = {}
        for tag, _a1, _a2, b1, b2 in difflib.SequenceMatcher(None, names[ref], seq, autojunk=False).get_opcodes():
            if tag in ("insert", "replace"):
                for j in range(b1, b2):
                    extra_rows.setdefault(seq[j], rows[j])
        differs = False
        for name in everything:
            delta = c[name] - counts[ref][name]
            if delta == 0:
                continue
            differs = True
            message = (f"rank {table.meta.rank} issues {abs(delta)} {'more' if delta > 0 else 'fewer'} {name} "
                       f"than rank {ref_rank} ({c[name]} against {counts[ref][name]})")
            row = extra_rows.get(name) if delta > 0 else None
            if row is not None:
                findings.append(_finding(rule, index, row, scope, message, None))
            else:
                findings.append(Finding(
                    rule=rule.id, name=rule.name, severity=rule.severity, message=message, trace=table.path,
                    scope=scope.label, event=name, event_kind="missing", event_category="", launch_op=None,
                    top_op=None, source=None, anchor=None, ts=0.0, rank=table.meta.rank))
        if not differs:  # the same events in another order
            j = next(j for j, (a, b) in enumerate(zip(seq, names[ref])) if a != b)
            findings.append(_finding(rule, index, rows[j], scope,
                                     f"rank {table.meta.rank} issues {seq[j]} where rank {ref_rank} issues "
                                     f"{names[ref][j]} (position {j})", None))
    return _done(rule, findings, level, len(group))
