"""The rule engine: rules x traces -> per-trace reports. Returns data, prints nothing.

Each check kind lives in its own module under kernlint.rules.checks and is dispatched through the
registry; run grouping (which traces are the ranks of one run, and which profiling cycle) lives in
kernlint.trace.runs; result types and the exit policy in kernlint.rules.result.

Many traces are a map and a reduce: summarize_trace checks one trace and leaves a small summary
(kernlint.rules.summary), combine_checked groups the ranks and runs the cross-rank and baseline rules on the
summaries alone. check_traces runs both here; kernlint.parallel runs the map in worker processes or on a
cluster. Either way the reduce is the same code, so the reports are the same.
"""
from __future__ import annotations

import dataclasses
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
from kernlint.rules.summary import CheckedTrace, TraceSummary
from kernlint.trace.damage import trace_damage
from kernlint.trace.graphs import graph_replays
from kernlint.trace.kinds import DEVICE_KINDS
from kernlint.trace.runs import group_runs, run_identity
from kernlint.trace.scopes import ScopeIndex
from kernlint.trace.table import EventTable
from kernlint.trace.time_breakdown import time_breakdown
from kernlint.trace.window import window_edges

__all__ = ["check_trace", "check_traces", "summarize_trace", "combine_checked", "exit_status",
           "merge_outcomes", "merge_reports", "Finding",
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
    rules = list(rules)
    index = ScopeIndex.of(table)
    outcomes = []
    for rule in rules:
        if rule.needs_baseline or rule.cross_rank:   # against the baseline, or across ranks: in _combine
            continue
        outcomes.append(mark_incomplete(_run_rule(rule, table, index), relevant_damage(rule, table)))
    graphs = graph_replays(table)
    # Replays with a low share attributed are judged by kernel order only: a warning, never a silent pass.
    notes, warnings = graphs.report_lines()
    # Python frames re-parented by compiled regions, custom ops and checkpoint recomputes: not damage, said.
    notes = table.derived.frame_tree.notes() + notes
    report = TraceReport(trace=table.path, events=len(table), has_device_events=table.has_device_events,
                         has_stacks=table.has_stacks, rank=table.meta.rank, outcomes=outcomes,
                         outside_window=window_edges(table).counts(), damage=trace_damage(table).summary(),
                         notes=notes, warnings=warnings, graphs=graphs.as_dict() if graphs.replays else None,
                         time=_time(table, index))
    return report if in_rank_group else _alone(report, rules, cross_rank_reason or _SINGLE)


def _time(table: EventTable, index: ScopeIndex) -> dict | None:
    breakdown = time_breakdown(table, index)
    return None if breakdown is None else breakdown.as_dict()


def _alone(report: TraceReport, rules: Sequence[Rule], reason: str) -> TraceReport:
    """The report of a trace in no group of ranks: each cross-rank rule not applicable, in rule order."""
    checked = iter(report.outcomes)
    outcomes = []
    for rule in rules:
        if rule.needs_baseline:
            continue
        outcomes.append(not_applicable(rule, reason, one_rank=True) if rule.cross_rank else next(checked))
    return dataclasses.replace(report, outcomes=outcomes)


# ---- many traces: a map over the traces (summarize_trace, anywhere), a reduce over what they leave --------

def summarize_trace(table: EventTable, rules: Sequence[Rule], *, baseline_part: bool = False) -> CheckedTrace:
    """The map step of checking many traces: the trace's own report (its cross-rank verdicts still to come)
    and the summary that grouping, the cross-rank rules and (with `baseline_part`) the baseline comparison read."""
    rules = list(rules)
    report = check_trace(table, rules, in_rank_group=True)
    identity = run_identity(table)
    edges = window_edges(table)
    summary = TraceSummary(path=table.path, rank=table.meta.rank, identity=identity, events=len(table),
                           has_device_events=table.has_device_events, has_stacks=table.has_stacks,
                           outside_window=edges.counts(), unlinked=edges.unlinked_counts(),
                           damage=trace_damage(table).summary())
    if identity.distributed:   # only ranks of a multi-rank run can be grouped
        index = ScopeIndex.of(table)
        for rule in rules:
            if not rule.cross_rank or rule.needs_baseline:
                continue
            summary.rule_damage[rule.id] = relevant_damage(rule, table)
            if rule.kind.rank_part is not None and not (rule.spec.requires_device and not table.has_device_events):
                summary.parts[rule.id] = rule.kind.rank_part(rule, table, index)
    if baseline_part:
        from kernlint.baseline import trace_environment
        from kernlint.baseline.profile import trace_runs

        summary.baseline_runs = trace_runs(table)
        summary.environment = trace_environment(table)
    return CheckedTrace(report=report, summary=summary)


def check_traces(tables: Sequence[EventTable], rules: Sequence[Rule]) -> list[TraceReport]:
    """Every trace on its own, then each run group (the ranks of one run, one profiling cycle) as one more
    report holding the cross-rank rules: the map (summarize_trace) and the reduce (combine_checked), run
    here. A baseline comparison is kernlint.pipeline's, which hands combine_checked its result."""
    rules = list(rules)
    return combine_checked([summarize_trace(t, rules) for t in tables], rules)


def combine_checked(checked: Sequence[CheckedTrace], rules: Sequence[Rule], *, comparison=None
                    ) -> list[TraceReport]:
    """The reduce step: the traces' reports (in the order given), each run group's cross-rank report, and with
    `comparison` (a kernlint.baseline.BaselineComparison of these traces) the baseline report. Reads only the
    summaries."""
    rules = list(rules)
    reports = _combine(checked, rules)
    baseline_rules = [r for r in rules if r.needs_baseline]
    if comparison is not None and baseline_rules:
        reports.append(check_against_baseline([c.summary for c in checked], baseline_rules, comparison))
    return reports


def _facts(item) -> tuple[str, int, bool, bool, list[str]]:
    """(path, events, has device events, has stacks, damage lines) of an EventTable or a TraceSummary."""
    if isinstance(item, EventTable):
        return item.path, len(item), item.has_device_events, item.has_stacks, trace_damage(item).summary()
    return item.path, item.events, item.has_device_events, item.has_stacks, list(item.damage)


def check_against_baseline(tables: Sequence[EventTable | TraceSummary], rules: Sequence[Rule], comparison
                           ) -> TraceReport:
    """The baseline rules on the traces (EventTables, or their TraceSummaries) and their comparison with a
    baseline (a kernlint.baseline.BaselineComparison). Damaged traces make every verdict incomplete: an
    alignment over lost launches proves nothing."""
    facts = [_facts(t) for t in tables]
    damage = [f"{path}: {line}" for path, _, _, _, lines in facts for line in lines]
    if comparison.compared_nothing:   # never "passed with 0 checked"
        why = "; ".join(comparison.notes) or (
            "no checked program has a program of the baseline's identity" if comparison.unmatched
            else "the baseline holds no program")
        outcomes = [rule.kind.run_baseline(rule, comparison) if rule.kind.judges_pairing else
                    RuleOutcome(rule.id, rule.name, rule.severity, STATUS_NOT_APPLICABLE,
                                reason=f"the baseline compares nothing ({why}); record it from traces of "
                                       "these programs") for rule in rules]
    else:
        outcomes = [mark_incomplete(rule.kind.run_baseline(rule, comparison), damage) for rule in rules]
    warnings = [f"timing environment: {w}" for w in comparison.environment_warnings]
    if comparison.compared_nothing:
        warnings.append(next((o.reason for o in outcomes if o.reason), "the baseline compares nothing"))
    unknown = comparison.unknown_timings
    if unknown and not comparison.strict_timing:   # Pinpoint's UNKNOWN: never a silent pass
        most = unknown[0]
        warnings.append(f"timing: {len(unknown)} of {len(comparison.timings)} timings unknown (neither the same "
                        "nor slower); "
                        f"about {most.verdict.runs_needed} more run(s) would decide {most.subject}; "
                        "--strict-timing makes unknown a finding")
    warnings += [f"{p.name}: {p.timing_note}" for p in comparison.programs if p.timing_note]
    return TraceReport(trace=f"baseline {comparison.baseline_path}".strip(), events=sum(f[1] for f in facts),
                       has_device_events=all(f[2] for f in facts), has_stacks=all(f[3] for f in facts), rank=None,
                       outcomes=outcomes, notes=[*comparison.notes, *_matching_note(comparison)], damage=damage,
                       warnings=warnings + list(comparison.notes), subject="baseline")


def _matching_note(comparison) -> list[str]:
    """Which checked program met which baseline program (by identity: kernlint.baseline.identity)."""
    if not comparison.matched:
        return []
    pairs = ", ".join(c if c == b else f"{c} -> {b}" for c, b in comparison.matched)
    return [f"programs compared with the baseline: {pairs}"]


def _combine(checked: Sequence[CheckedTrace], rules: Sequence[Rule]) -> list[TraceReport]:
    summaries = [c.summary for c in checked]
    grouping = group_runs(summaries)
    grouped = {id(s) for g in grouping.groups for s in g.tables}
    unmatched = {u.path: u.reason for u in grouping.unmatched}
    reports = []
    for c in checked:
        if id(c.summary) in grouped:
            reports.append(c.report)
        else:
            reason = unmatched.get(c.summary.path)
            reports.append(_alone(c.report, rules, f"{_SINGLE}: {reason}" if reason else _SINGLE))
    cross = [r for r in rules if r.cross_rank and not r.needs_baseline]
    if not cross:
        return reports
    for group in grouping.groups:
        members: list[TraceSummary] = group.tables
        outcomes = []
        for rule in cross:
            if rule.spec.requires_device and not all(s.has_device_events for s in members):
                outcomes.append(not_applicable(rule, "some rank's trace has no GPU events", absent=True))
            else:
                damage = [f"rank {s.rank}: {line}" for s in members for line in s.rule_damage.get(rule.id, [])]
                # The kind sees each rank's own part of the trace, in the group's rank order.
                parts = dataclasses.replace(group, tables=[s.parts.get(rule.id) for s in members])
                outcomes.append(mark_incomplete(rule.kind.run_group(rule, parts), damage))
        outside: dict[str, int] = {}
        notes = list(group.notes)
        for s in members:
            for what, n in s.outside_window.items():
                outside[what] = outside.get(what, 0) + n
                notes.append(f"rank {s.rank}: {n} {what}, kept out of the cross-rank comparison")
            for what, n in s.unlinked.items():
                notes.append(f"rank {s.rank}: {n} {what} (a damaged or truncated trace): what those "
                             "launches ran is not compared")
        reports.append(TraceReport(
            trace=group.label, events=sum(s.events for s in members),
            has_device_events=all(s.has_device_events for s in members),
            has_stacks=all(s.has_stacks for s in members), rank=None, outcomes=outcomes,
            ranks=[s.rank for s in members], notes=notes, outside_window=outside, subject="run group",
            damage=[f"rank {s.rank}: {line}" for s in members for line in s.damage]))
    return reports
