"""The terminal output: findings and a summary line (one line when the check is clean); with -v also a
per-rule verdict table for each trace; with -q only findings and what could not be checked.

Every string that comes from a trace or a path goes through `printable` (kernlint.report.safe), and into a
`Line` (kernlint.report.styled: a rich `Text` where rich shows it), never a markup string: a kernel name
cannot move the cursor, retitle the terminal, forge a line of this output, or be read as rich markup. The
report is `Lines`, a rich renderable; the tables (-v, --statistics, the audit) are rich's, made where they
are drawn, so a report of lines alone goes to a pipe or file without importing rich.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from kernlint.report import RenderContext, Renderer
from kernlint.report.breakdown import summary_line, top_texts
from kernlint.report.safe import cost_text, format_bytes, format_duration_us, is_missing, printable
from kernlint.report.styled import Line, Lines
from kernlint.rules.causes import (
    Cause,
    causes_of,
    describe_instances,
    group_causes,
    instance_step,
    linked,
    problem_count,
)
from kernlint.rules.result import STATUS_INCOMPLETE, CheckResult, clean_finding, sorted_findings

if TYPE_CHECKING:
    from rich.table import Table

_SEVERITY_STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan"}
_STATUS_STYLE = {"failed": "bold red", "passed": "green", "not-applicable": "dim", "incomplete": "bold magenta"}
_INCOMPLETE_STYLE = "bold magenta"
_LISTED = 5   # incomplete verdicts named in the summary line before "and N more"
_NAMED = 3    # scopes, steps named in a cause's instances line before "and N more"
_INSTANCE_LINES = 50   # instances listed under a cause with -v
# How much the text report says: -q, the default, -v.
QUIET, NORMAL, VERBOSE = -1, 0, 1


def _t(value: object, style: str = "") -> Line:
    return Line(printable(value), style=style)


def _rich_t(value: object, style: str = ""):
    """A table cell: `_t` as the rich Text that rich.table takes."""
    from rich.text import Text

    return Text(printable(value), style=style)


def _finding_lines(f, report, *, rank: bool = True) -> list[Line]:
    f = clean_finding(f)
    line = Line("  ")
    line.append(f"{printable(f.rule)} {printable(f.name)}", style=_SEVERITY_STYLE.get(f.severity, "bold"))
    if rank and f.rank is not None and report.rank is None:
        line.append(f" (rank {printable(f.rank)})")
    line.append(f" [{printable(f.severity)}] ")
    line.append(printable(f.message))
    detail = Line("      ", style="dim")
    detail.append(f"scope: {printable(f.scope)} | event: {printable(f.event)} ({printable(f.event_kind)}, "
                  f"{printable(f.event_category) or '-'})")
    if f.launch_op:
        detail.append(f" | launched by {printable(f.launch_op)}")
        if f.top_op and f.top_op != f.launch_op:
            detail.append(f" in {printable(f.top_op)}")
    if f.source:
        where = printable(f.source) + (f" ({printable(f.function)})" if f.function else "")
    else:
        where = "unknown (record with with_stack=True)"
    detail.append(f" | source: {where}")
    if f.anchor:
        detail.append(f" | anchor: {printable(f.anchor)}")
    cost = cost_text(f)
    if cost:
        detail.append(f" | cost: {cost}")
    return [line, detail]


def _instances_line(cause: Cause) -> Line:
    """`64 instances: 8 scopes (module A_0, module A_1, module A_2 and 5 more); 2 steps (...); 2 traces;
    cost in all: 51.2 µs device time`."""
    cost = cost_text(cause)
    return Line("      " + printable(describe_instances(cause, _NAMED)) + (f"; cost in all: {cost}" if cost else ""),
                style="dim")


def _instance_line(f, report) -> Line:
    f = clean_finding(f)
    where = [printable(f.scope) or "-"]
    step = instance_step(f)
    if step:
        where.append(printable(step))
    if f.rank is not None and report.rank is None:
        where.append(f"rank {printable(f.rank)}")
    if f.trace != report.trace:
        where.append(printable(f.trace))
    if f.ts is not None:
        where.append(f"at {f.ts:.1f} µs")
    cost = cost_text(f)
    if cost:
        where.append(cost)
    return Line("        - " + " | ".join(where), style="dim")


def _cause_lines(cause: Cause, report, verbosity: int) -> list[Line]:
    """A cause: its worst instance's finding lines (`(64 instances)` after its message), then a line on
    where its instances are; with -v one line per instance."""
    lines = _finding_lines(cause.representative, report, rank=cause.count == 1)
    if cause.count == 1:
        return lines
    lines[0].append(f" ({cause.count} instances)", style="bold")
    lines.append(_instances_line(cause))
    if verbosity >= VERBOSE:
        lines += [_instance_line(f, report) for f in cause.findings[:_INSTANCE_LINES]]
        if cause.count > _INSTANCE_LINES:
            lines.append(Line(f"        ... and {cause.count - _INSTANCE_LINES} more (--format json lists them "
                              "all)", style="dim"))
    return lines


def _context_line(causes) -> str:
    """`8 more right but not to act on first (info): 6 step edge, 1 warm-up, 1 result readback`, by cause."""
    counts: dict[str, int] = {}
    for c in causes:
        counts[c.context] = counts.get(c.context, 0) + 1
    by = ", ".join(f"{n} {printable(c)}" for c, n in counts.items())
    return f"{len(causes)} more right but not to act on first (info): {by}"


def _plural(n: int, one: str, many: str | None = None) -> str:
    return f"{n} {one if n == 1 else (many or one + 's')}"


def _gaps(result: CheckResult) -> list[str]:
    """What could not be fully checked (each makes the exit code 4): never left out of any summary."""
    gaps = []
    incomplete = result.incomplete
    if incomplete:
        named = [f"{printable(o.rule)} ({printable(r.trace)})" for r, o in incomplete[:_LISTED]]
        more = f" and {len(incomplete) - _LISTED} more" if len(incomplete) > _LISTED else ""
        gaps.append(f"{len(incomplete)} rule verdict(s) incomplete: {', '.join(named)}{more}")
    if result.unreadable:
        gaps.append(f"{len(result.unreadable)} entr{'y' if len(result.unreadable) == 1 else 'ies'} could not be "
                    "read")
    return gaps


def _clean_line(result: CheckResult, verbosity: int) -> Line:
    """The one line of a check without findings or gaps, ruff's "All checks passed!" habit:
    `kernlint: 1 trace, 4 rules: all passed` or `...: no findings (1 passed, 3 not applicable)`."""
    statuses = [result.rule_status(r.id) for r in result.rules]
    passed, not_applicable = statuses.count("passed"), statuses.count("not-applicable")
    counts = f"kernlint: {_plural(result.traces_checked, 'trace')}, {_plural(len(result.rules), 'rule')}: "
    line = Line(counts)
    if passed == len(statuses):
        line.append("all passed", style="bold green")
    else:
        line.append("no findings", style="bold green")
        line.append(f" ({passed} passed, {not_applicable} not applicable)")
    not_traces = len(result.skipped) - len(result.unreadable)
    if not_traces > 0 and verbosity < VERBOSE:
        line.append(f"; skipped {_plural(not_traces, 'file')} that {'is' if not_traces == 1 else 'are'} not "
                    "a trace (-v lists them)", style="yellow")
    return line


def _suppressed_part(result: CheckResult) -> str:
    """`3 suppressed (2 file, 1 inline)`, or "" when nothing was."""
    from kernlint.rules.suppressions import suppression_counts

    if not result.suppressed:
        return ""
    by = ", ".join(f"{n} {how}" for how, n in suppression_counts(result.suppressed).items())
    return f"{len(result.suppressed)} suppressed ({by})"


def _summary(result: CheckResult, verbosity: int = NORMAL) -> Line:
    line = _summary_line(result, verbosity)
    suppressed = _suppressed_part(result)
    if suppressed:
        if line.plain.endswith("."):
            line.right_crop(1)
            line.append(f"; {suppressed}.", style="dim")
        else:
            line.append(f"; {suppressed}", style="dim")
    return line


def _summary_line(result: CheckResult, verbosity: int) -> Line:
    n = len(result.findings)
    checked = f"{result.traces_checked} trace(s) with {len(result.rules)} rule(s)"
    gaps = _gaps(result)
    if n:
        summary = Line.assemble("Found ", (f"{n} finding(s)", "bold red"), f" in {checked}")
        causes = causes_of(result)
        problems, in_context = problem_count(causes), sum(1 for c in causes if c.context)
        said = [_plural(len(causes), "cause")] if len(causes) != n else []
        if in_context or problems != len(causes):
            said.append(f"{_plural(problems, 'problem')} to act on")
        if in_context:
            said.append(f"{in_context} in context (info)")
        if said:
            summary.append(": " + ", ".join(said))
        summary.append(".")
        if gaps:
            summary.append(" Also " + "; ".join(gaps) + ".", style=_INCOMPLETE_STYLE)
        return summary
    if gaps:
        # Never a clean line when something was not fully checked.
        return Line.assemble(("0 findings, but " + ", and ".join(gaps), _INCOMPLETE_STYLE),
                             f"; checked {checked}.")
    return _clean_line(result, verbosity)


def _verdict_table(report) -> Table:
    from rich.table import Table
    from rich.text import Text

    table = Table(show_header=True, header_style="bold", box=None, padding=(0, 1, 0, 2))
    for column in ("rule", "name", "verdict", "level", "checked", "findings"):
        table.add_column(column, no_wrap=True)
    for o in report.outcomes:
        table.add_row(_rich_t(o.rule), _rich_t(o.name), _rich_t(o.status, _STATUS_STYLE.get(o.status, "bold")),
                      _rich_t(o.level or "-"), Text(str(o.instances)), Text(str(len(o.findings))))
    return table


def _trace_parts(report, verbosity: int, causes: list[Cause] | None = None,
                 same_as: dict[int, Cause] | None = None) -> list:
    """One trace's part of the report. Below -v: its causes (`causes`: those to show here, by default its
    findings' own) and incomplete verdicts only (a trace with neither says nothing); with -v: also the
    verdict of every rule, with reasons and notes. `same_as`: by id, the cause of another rule on the same
    events that a cause is the same problem as (kernlint.rules.causes.linked over the whole result)."""
    if causes is None:
        causes = group_causes(report.findings)
    incomplete = [o for o in report.outcomes if o.status == STATUS_INCOMPLETE]
    verbose = verbosity >= VERBOSE
    warnings = report.warnings if verbosity >= NORMAL else []
    if not (verbose or causes or incomplete or warnings):
        return []
    where = printable(report.trace) + (f" (rank {report.rank})" if report.rank is not None else "")
    device = "GPU events" if report.has_device_events else "no GPU events: op-level checks only"
    if report.subject == "baseline":   # its counts are the checked traces', not the baseline file's
        counted = f"  compared with the {report.events} events of the checked traces"
    else:
        counted = f"  {report.events} events, {device}"
    parts: list = [Line.assemble((where, "bold"), counted)]
    parts.extend(_time_lines(report, verbosity))
    in_context = [c for c in causes if c.context]
    for cause, first in linked(causes):
        if same_as is not None:
            first = same_as.get(id(cause))
        lines = _cause_lines(cause, report, verbosity)
        if first is not None:   # the same events as the cause above: one problem
            lines[0] = Line.assemble("  + ", (f"same problem as {printable(first.rule)}: ", "dim"),
                                     lines[0][2:])
        parts.extend(lines)
    if in_context and verbose:
        for cause in in_context:
            parts.extend(_cause_lines(cause, report, verbosity))
    elif in_context:
        parts.append(_t(f"  {_context_line(in_context)} (-v lists them)", _SEVERITY_STYLE["info"]))
    for line in warnings:
        parts.append(_t(f"  warning: {printable(line)}", "yellow"))
    if verbose:
        parts.append(_verdict_table(report))
    for o in report.outcomes:
        if o.reason and (verbose or o.status == STATUS_INCOMPLETE):
            if o.status == STATUS_INCOMPLETE:
                parts.append(_t(f"  {o.rule} incomplete: {printable(o.reason)}", _INCOMPLETE_STYLE))
            elif o.status == "not-applicable":
                parts.append(_t(f"  {o.rule} not applicable: {printable(o.reason)}", "dim"))
            else:
                parts.append(_t(f"  {o.rule}: {printable(o.reason)}", "dim"))
        if o.note and verbose:
            parts.append(_t(f"  {o.rule}: {printable(o.note)}", "dim"))
    if verbose or incomplete:   # the damage says why a verdict is incomplete
        for line in getattr(report, "damage", None) or []:
            parts.append(_t(f"  damage: {printable(line)}", _INCOMPLETE_STYLE))
    if verbose:
        for note in report.notes:
            parts.append(_t(f"  note: {printable(note)}", "dim"))
        if report.outside_window and report.ranks is None:
            outside = "; ".join(f"{printable(n)} {printable(what)}" for what, n in report.outside_window.items())
            parts.append(_t(f"  outside the window: {outside}", "dim"))
    parts.append(Line(""))
    return parts


def _time_lines(report, verbosity: int) -> list[Line]:
    """Where the trace's device time goes (kernlint.report.breakdown): one line, and below -q the top costs."""
    time = getattr(report, "time", None)
    if not time or verbosity <= QUIET:
        return []
    lines = [_t(f"  where the time goes: {summary_line(time)}", "dim")]
    lines += [_t(f"    {text}", "dim") for text in top_texts(time)]
    return lines


def causes_by_report(result: CheckResult) -> list[list[Cause]]:
    """For each report, the causes shown in its part: each cause once, in the first report holding one of its
    instances (a cause over several traces or ranks is one block, listing them)."""
    owner: dict[int, int] = {}
    for i, report in enumerate(result.reports):
        for f in report.findings:
            owner.setdefault(id(f), i)
    out: list[list[Cause]] = [[] for _ in result.reports]
    for cause in causes_of(result):
        out[min(owner[id(f)] for f in cause.findings)].append(cause)
    return out


def render(result: CheckResult, ctx: RenderContext | None = None) -> Lines:
    """The text report. `verbosity`: QUIET (-q) shows findings and what could not be checked, nothing for a
    clean check; NORMAL shows findings and a summary line, one line for a clean check; VERBOSE (-v) adds
    every trace's per-rule verdict table, reasons, notes and the files skipped."""
    verbosity = ctx.verbosity if ctx else NORMAL
    parts: list = []
    shown = causes_by_report(result)
    same_as = {id(cause): first for cause, first in linked([c for part in shown for c in part]) if first is not None}
    for report, causes in zip(result.reports, shown):
        parts.extend(_trace_parts(report, verbosity, causes, same_as))
    unreadable = set(result.unreadable)
    not_traces = [s for s in result.skipped if s not in unreadable]
    if result.unreadable:   # always shown: they make the exit code 4
        one = len(result.unreadable) == 1
        parts.append(Line(f"Could not read {len(result.unreadable)} entr{'y' if one else 'ies'}; what "
                          f"{'it holds' if one else 'they hold'} was not checked:", style=_INCOMPLETE_STYLE))
        for path, why in result.unreadable:
            parts.append(_t(f"  {printable(path)}: {printable(why)}", _INCOMPLETE_STYLE))
    if verbosity >= VERBOSE and result.suppressed:
        parts.append(Line(f"Suppressed {len(result.suppressed)} finding(s):", style="dim"))
        for s in result.suppressed:
            f = s.finding
            why = f" ({printable(s.reason)})" if s.reason else ""
            parts.append(_t(f"  {printable(f.rule)} {printable(f.message)} [{printable(f.source or '-')}]: "
                            f"{s.how}{why}", "dim"))
    if verbosity >= VERBOSE:
        if not_traces:
            parts.append(Line(f"Skipped {len(not_traces)} file(s) that are not traces:", style="yellow"))
            for path, why in not_traces:
                parts.append(_t(f"  {printable(path)}: {printable(why)}", "yellow"))
        if result.ignored_files:
            parts.append(Line(f"Ignored {result.ignored_files} file(s) without a .json / .json.gz suffix.",
                              style="dim"))
    if verbosity > QUIET or _gaps(result):
        parts.append(_summary(result, verbosity))
    if verbosity > QUIET:
        for note in result.notes:
            parts.append(_t(note, "dim"))
    while parts and isinstance(parts[-1], Line) and not parts[-1].plain:   # -q: no blank line to end on
        parts.pop()
    return Lines(*parts)


# -- --statistics ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RuleStatistic:
    """One rule's findings, summed: `ruff check --statistics`' row, with what the findings cost."""

    rule: str
    name: str
    count: int                # findings: every instance
    device_us: float | None   # summed device time of the offending launches; None when no finding had one
    bytes: int | None         # summed bytes they allocated; None when no finding had a size
    causes: int = 0           # causes (kernlint.rules.causes): findings of one line and event kind count once
    cost_us: float | None = None   # summed measured cost (kernlint.rules.cost), whatever its basis; None: none


def _total(values) -> float | None:
    present_values = [v for v in values if not is_missing(v)]
    return sum(present_values) if present_values else None


def rule_statistics(result: CheckResult) -> list[RuleStatistic]:
    """Per rule with findings: how many causes and findings (instances), and their summed device time and
    bytes; most causes first, then most findings."""
    by_rule: dict[str, list] = {}
    for f in result.findings:
        by_rule.setdefault(f.rule, []).append(f)
    causes: dict[str, int] = {}
    for cause in causes_of(result):
        causes[cause.rule] = causes.get(cause.rule, 0) + 1
    stats = [RuleStatistic(rule=rule, name=found[0].name, count=len(found),
                           device_us=_total(f.device_us for f in found),
                           bytes=_total(f.bytes for f in found), causes=causes.get(rule, 0),
                           cost_us=_total(f.cost.us for f in found if f.cost is not None and f.cost.us is not None))
             for rule, found in by_rule.items()]
    return sorted(stats, key=lambda s: (-s.causes, -s.count, s.rule))


def render_statistics(result: CheckResult, ctx: RenderContext | None = None) -> Lines:
    """`--statistics`: a row per rule with findings (causes, findings, rule, name, device time, bytes, measured
    cost summed: kernlint.rules.cost), then
    the summary line; what could not be checked is always named."""
    verbosity = ctx.verbosity if ctx else NORMAL
    parts: list = []
    stats = rule_statistics(result)
    if stats:
        from rich.table import Table
        from rich.text import Text

        table = Table(box=None, show_header=True, header_style="bold", padding=(0, 1, 0, 0))
        for column, justify in (("causes", "right"), ("findings", "right"), ("rule", "left"), ("name", "left"),
                                ("device time", "right"), ("bytes", "right"), ("cost", "right")):
            table.add_column(column, justify=justify, no_wrap=True)
        for s in stats:
            table.add_row(Text(str(s.causes)), Text(str(s.count)), _rich_t(s.rule), _rich_t(s.name),
                          Text(format_duration_us(s.device_us)),
                          Text(format_bytes(s.bytes)), Text(format_duration_us(s.cost_us)))
        parts.append(table)
    if verbosity > QUIET or _gaps(result):
        parts.append(_summary(result, verbosity))
    return Lines(*parts)


def render_audit(run, ctx: RenderContext | None = None) -> Lines:
    """`kernlint audit`: one row per workload, its expected and actual verdicts, then the findings."""
    from rich.table import Table
    from rich.text import Text

    meta = run.metadata
    gpu = (meta.get("gpu") or {}).get("name")
    header = Line.assemble(("kernlint audit", "bold"),
                           printable(f"  device {run.device}" + (f" ({gpu})" if gpu else "")),
                           printable(f", torch {meta.get('torch')}"),
                           f", {len(run.verdicts)} workload(s) in {run.seconds:.1f} s")
    table = Table("workload", "kind", "ranks", "expected", "verdict", "findings", "seconds", box=None,
                  header_style="bold", padding=(0, 1, 0, 2))
    for v in run.verdicts:
        outcomes = {o.rule: o for o in v.report.outcomes} if v.report else {}
        expected = ", ".join(f"{r} {s}" for r, s in v.workload.expect.items())
        actual = ", ".join(f"{r} {outcomes[r].status}" for r in v.workload.expect if r in outcomes)
        n = len(v.report.findings) if v.report else 0
        table.add_row(_rich_t(v.workload.name), Text("regressed" if v.workload.regressed else "fixed"),
                      Text(str(v.ranks)), _rich_t(expected), _rich_t(actual or "-", "green" if v.ok else "bold red"),
                      Text(str(n)), Text(f"{v.seconds:.1f}"))
    parts: list = [header, table]
    for name, why in getattr(run, "not_run", []):
        parts.append(_t(f"  not run on {printable(run.device)}: {printable(name)} ({printable(why)})", "yellow"))
    for v in run.verdicts:
        name = printable(v.workload.name)
        for problem in v.problems:
            parts.append(_t(f"  {name}: {printable(problem)}", "bold red"))
        causes = group_causes(v.report.findings) if v.report else []
        for cause in causes[:4]:
            f = clean_finding(cause.representative)
            rank = f" (rank {f.rank})" if f.rank is not None and cause.count == 1 else ""
            count = f" ({cause.count} instances)" if cause.count > 1 else ""
            parts.append(_t(f"  {name}{rank}: {printable(f.rule)} {printable(f.message)}{count}" +
                            (f" [{printable(f.source)}]" if f.source else ""), "dim"))
        if len(causes) > 4:
            parts.append(_t(f"  {name}: ... {len(causes) - 4} more", "dim"))
    if run.baseline_report is not None:
        report = run.baseline_report
        parts.append(Line(""))
        parts.append(_t("  " + ", ".join(f"{o.rule} {o.status}" for o in report.outcomes),
                        "bold red" if run.baseline_failed else "green"))
        parts.extend(_trace_parts(report, NORMAL))
    if run.out_dir:
        parts.append(_t(f"Traces and run metadata: {printable(run.out_dir)}", "dim"))
    ok = sum(v.ok for v in run.verdicts)
    against = "" if run.baseline_report is None else (
        "; the baseline: " + ("changed" if run.baseline_failed else "no regression"))
    parts.append(Line(f"{ok}/{len(run.verdicts)} workloads as expected{against}",
                      style="bold green" if run.all_as_expected else "bold red"))
    return Lines(*parts)


def render_replay(result, ctx: RenderContext | None = None) -> Lines:
    """`kernlint audit --replay`: the recorded fixture traces against their expected verdicts."""
    from rich.table import Table
    from rich.text import Text

    table = Table("rule", "case", "expected", "verdict", "findings", "detail", box=None, header_style="bold")
    for r in result.results:
        o = r.outcome
        findings = sorted_findings(o.findings) if o else []
        detail = "; ".join(r.problems) if r.problems else (
            findings[0].message if findings else (o.reason or "") if o else "")
        table.add_row(_rich_t(r.case.rule), _rich_t(r.case.spec.name), _rich_t(r.case.spec.expect),
                      _rich_t(o.status if o else "error", "green" if r.ok else "bold red"),
                      Text(str(len(o.findings)) if o else "-"), _rich_t(detail))
    ok = sum(r.ok for r in result.results)
    return Lines(table, Line(f"{ok}/{len(result.results)} verdicts as expected",
                             style="bold green" if result.all_as_expected else "bold red"))


# What this format renders (kernlint.report.builtin_formats declares it).
RENDERER = Renderer(check=render, audit=render_audit, replay=render_replay, statistics=render_statistics)
