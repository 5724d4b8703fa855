"""The rule engine: rules x traces -> per-trace reports. Returns data, prints nothing.

Each check kind lives in its own module under kernlint.rules.checks and is dispatched through the
registry; run grouping (which traces are the ranks of one run, and which profiling cycle) lives in
kernlint.trace.runs; result types and the exit policy in kernlint.rules.result.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence

import msgspec

from kernlint.rules.checks.base import named_scopes
from kernlint.rules.result import (
    STATUS_NOT_APPLICABLE,
    Finding,
    RuleOutcome,
    TraceReport,
    decided,
    exit_status,
    mark_incomplete,
    merge_outcomes,
    merge_reports,
    not_applicable,
)
from kernlint.rules.schema import Rule
from kernlint.trace.damage import trace_damage
from kernlint.trace.runs import group_runs
from kernlint.trace.scopes import ScopeIndex
from kernlint.trace.table import DEVICE_KINDS, EventTable
from kernlint.trace.window import window_edges

__all__ = ["check_trace", "check_traces", "exit_status", "merge_outcomes", "merge_reports", "Finding",
           "RuleOutcome", "TraceReport", "decided", "not_applicable"]

_SINGLE = "needs the traces of two or more ranks of one distributed run"


def _run_rule(rule: Rule, table: EventTable, index: ScopeIndex) -> RuleOutcome:
    if rule.spec.requires_device and not table.has_device_events:
        return not_applicable(rule, "the trace has no GPU events", absent=True)
    scope = rule.spec.scope
    if scope.when_absent == "profiled-window" and scope.is_named and not _has_steps(index, rule):
        return _run_on_profiled_window(rule, table, index)
    return rule.kind.run(rule, table, index)


def _has_steps(index: ScopeIndex, rule: Rule) -> bool:
    """Whether the trace shows the rule's steps: a range or frame matching [scope] steps (any of the
    rule's scopes when it names no steps)."""
    steps = rule.spec.scope.steps
    if steps:
        return bool(index.named_scopes(annotations=steps, frames=steps))
    return bool(named_scopes(index, rule))


def _run_on_profiled_window(rule: Rule, table: EventTable, index: ScopeIndex) -> RuleOutcome:
    """The trace shows no step (no step range or step function): check each thread's whole profiled window
    instead, set-up code excepted. Findings inside the rule's scopes (a forward, a module) keep its severity;
    the others get the window severity, since the trace cannot say whether they ran in a step or in set-up."""
    scope = rule.spec.scope
    spec = msgspec.structs.replace(rule.spec, scope=msgspec.structs.replace(scope, window=True))
    window_rule = Rule(spec=spec, path=rule.path)
    windows = named_scopes(index, window_rule)
    if not windows:
        return not_applicable(rule, "no step range or step function in the trace, and all of its profiled window "
                                    "is set-up code (loading, warm-up, capture)", absent=True)
    if table.has_device_events and not any(len(index.device_events_between(w.thread, w.ts, w.end))
                                           for w in windows):
        # Nothing outside set-up reached the device: a verdict there would rest on no step at all.
        return not_applicable(rule, "no step range or step function in the trace, and its profiled window "
                                    "launches no device work outside set-up code")   # damage may have hidden it
    outcome = rule.kind.run(window_rule, table, index)
    if outcome.status != STATUS_NOT_APPLICABLE:
        extra = ("no step range or step function in the trace: checked the whole profiled window, set-up "
                 f"excepted; what ran outside the rule's scopes is reported at severity {scope.window_severity}")
        outcome.note = f"{outcome.note}; {extra}" if outcome.note else extra
    return outcome


def reads_device_events(rule: Rule, table: EventTable) -> bool:
    """Whether the rule's verdict on this trace rests on device events and their links to launches."""
    check = rule.spec.check
    if rule.spec.anchor is not None and rule.spec.anchor.kernel and table.has_device_events:
        return True
    return bool(getattr(check, "device_categories", ())) or bool(set(getattr(check, "kinds", ())) & DEVICE_KINDS)


def relevant_damage(rule: Rule, table: EventTable) -> list[str]:
    """What was damaged in the trace that this rule's verdict rests on: host events that could not be
    placed (every rule), device events that could not be linked (rules that read device events)."""
    damage = trace_damage(table)
    lines = list(damage.host_summary())
    if reads_device_events(rule, table):
        lines += damage.device_summary()
    return lines


def check_trace(table: EventTable, rules: Iterable[Rule], *, cross_rank_reason: str | None = _SINGLE,
                in_rank_group: bool = False) -> TraceReport:
    """One trace. Cross-rank rules are left to check_traces when the trace belongs to a group of ranks;
    otherwise they are not applicable, with `cross_rank_reason`. A verdict that rests on damaged events is
    incomplete, never passed."""
    index = ScopeIndex.of(table)
    outcomes = []
    for rule in rules:
        if rule.needs_baseline:   # runs in check_traces, against the baseline, when one is given
            continue
        if rule.cross_rank:
            if not in_rank_group:
                outcomes.append(not_applicable(rule, cross_rank_reason or _SINGLE, absent=True))
            continue
        outcomes.append(mark_incomplete(_run_rule(rule, table, index), relevant_damage(rule, table)))
    return TraceReport(trace=table.path, events=len(table), has_device_events=table.has_device_events,
                       has_stacks=table.has_stacks, rank=table.meta.rank, outcomes=outcomes,
                       outside_window=window_edges(table).counts(), damage=trace_damage(table).summary())


def check_traces(tables: Sequence[EventTable], rules: Sequence[Rule], *, baseline=None) -> list[TraceReport]:
    """Every trace on its own, then each run group (the ranks of one run, one profiling cycle) as one more
    report holding the cross-rank rules, then, with `baseline` (a kernlint.baseline.Baseline, or a
    BaselineComparison already made), one report of the baseline rules."""
    reports = _check_traces(tables, rules)
    baseline_rules = [r for r in rules if r.needs_baseline]
    if baseline is not None and baseline_rules:
        reports.append(check_against_baseline(tables, baseline_rules, baseline))
    return reports


def check_against_baseline(tables: Sequence[EventTable], rules: Sequence[Rule], baseline) -> TraceReport:
    """The baseline rules on the traces against a baseline. Damaged traces make every verdict incomplete:
    an alignment over lost launches proves nothing."""
    from kernlint.baseline import BaselineComparison, compare_with_baseline

    comparison = baseline if isinstance(baseline, BaselineComparison) else compare_with_baseline(baseline, list(tables))
    damage = [f"{t.path}: {line}" for t in tables for line in trace_damage(t).summary()]
    outcomes = [mark_incomplete(rule.kind.run_baseline(rule, comparison), damage) for rule in rules]
    warnings = [f"timing environment: {w}" for w in comparison.environment_warnings]
    warnings += [f"{p.name}: {p.timing_note}" for p in comparison.programs if p.timing_note]
    return TraceReport(trace=f"baseline {comparison.baseline_path}".strip(), events=sum(len(t) for t in tables),
                       has_device_events=all(t.has_device_events for t in tables),
                       has_stacks=all(t.has_stacks for t in tables), rank=None, outcomes=outcomes,
                       notes=list(comparison.notes), damage=damage, warnings=warnings + list(comparison.notes),
                       subject="baseline")


def _check_traces(tables: Sequence[EventTable], rules: Sequence[Rule]) -> list[TraceReport]:
    grouping = group_runs(tables)
    grouped = {id(t) for g in grouping.groups for t in g.tables}
    unmatched = {u.path: u.reason for u in grouping.unmatched}
    reports = []
    for t in tables:
        reason = unmatched.get(t.path)
        reports.append(check_trace(t, rules, in_rank_group=id(t) in grouped,
                                   cross_rank_reason=f"{_SINGLE}: {reason}" if reason else _SINGLE))
    cross = [r for r in rules if r.cross_rank and not r.needs_baseline]
    if not cross:
        return reports
    for group in grouping.groups:
        outcomes = []
        for rule in cross:
            if rule.spec.requires_device and not all(t.has_device_events for t in group.tables):
                outcomes.append(not_applicable(rule, "some rank's trace has no GPU events", absent=True))
            else:
                damage = [f"rank {t.meta.rank}: {line}" for t in group.tables for line in relevant_damage(rule, t)]
                outcomes.append(mark_incomplete(rule.kind.run_group(rule, group), damage))
        outside: dict[str, int] = {}
        notes = list(group.notes)
        for t in group.tables:
            edges = window_edges(t)
            for what, n in edges.counts().items():
                outside[what] = outside.get(what, 0) + n
                notes.append(f"rank {t.meta.rank}: {n} {what}, kept out of the cross-rank comparison")
            for what, n in edges.unlinked_counts().items():
                notes.append(f"rank {t.meta.rank}: {n} {what} (a damaged or truncated trace): what those "
                             "launches ran is not compared")
        reports.append(TraceReport(
            trace=group.label, events=sum(len(t) for t in group.tables),
            has_device_events=all(t.has_device_events for t in group.tables),
            has_stacks=all(t.has_stacks for t in group.tables), rank=None, outcomes=outcomes,
            ranks=[t.meta.rank for t in group.tables], notes=notes, outside_window=outside, subject="run group",
            damage=[f"rank {t.meta.rank}: {line}" for t in group.tables for line in trace_damage(t).summary()]))
    return reports
