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

from kernlint.report import RenderContext
from kernlint.report.safe import cost_text, format_bytes, format_duration_us, is_missing, printable
from kernlint.report.styled import Line, Lines
from kernlint.rules.result import STATUS_INCOMPLETE, CheckResult, clean_finding, sorted_findings

if TYPE_CHECKING:
    from rich.table import Table

_SEVERITY_STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan"}
_STATUS_STYLE = {"failed": "bold red", "passed": "green", "not-applicable": "dim", "incomplete": "bold magenta"}
_INCOMPLETE_STYLE = "bold magenta"
_LISTED = 5   # incomplete verdicts named in the summary line before "and N more"
# How much the text report says: -q, the default, -v.
QUIET, NORMAL, VERBOSE = -1, 0, 1


def _t(value: object, style: str = "") -> Line:
    return Line(printable(value), style=style)


def _rich_t(value: object, style: str = ""):
    """A table cell: `_t` as the rich Text that rich.table takes."""
    from rich.text import Text

    return Text(printable(value), style=style)


def _finding_lines(f, report) -> list[Line]:
    f = clean_finding(f)
    line = Line("  ")
    line.append(f"{printable(f.rule)} {printable(f.name)}", style=_SEVERITY_STYLE.get(f.severity, "bold"))
    if f.rank is not None and report.rank is None:
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


def ordered_findings(findings) -> tuple[list, list]:
    """(findings to act on, each with the finding of its group printed before it or None; findings with a
    context). Those to act on keep their order, each group's members together after its first."""
    acted = [f for f in findings if not f.context]
    in_context = [f for f in findings if f.context]
    by_group: dict[str, list] = {}
    for f in acted:
        if f.group:
            by_group.setdefault(f.group, []).append(f)
    out, placed = [], set()
    for f in acted:
        if id(f) in placed:
            continue
        members = by_group.get(f.group, [f]) if f.group else [f]
        for m in members:
            placed.add(id(m))
            out.append((m, None if m is members[0] or m.rule == members[0].rule else members[0]))
    return out, in_context


def _context_line(findings) -> str:
    """`8 more in context, info: 6 step edge, 1 warm-up, 1 result readback`."""
    counts: dict[str, int] = {}
    for f in findings:
        counts[f.context] = counts.get(f.context, 0) + 1
    by = ", ".join(f"{n} {printable(c)}" for c, n in counts.items())
    return f"{len(findings)} more right but not to act on first (info): {by}"


def problem_count(findings) -> int:
    """Findings to act on, a group of findings on one event counted once."""
    groups = {f.group for f in findings if not f.context and f.group}
    return len(groups) + sum(1 for f in findings if not f.context and not f.group)


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
        problems, in_context = problem_count(result.findings), sum(1 for f in result.findings if f.context)
        if in_context or problems != n:
            summary.append(f": {_plural(problems, 'problem')} to act on"
                           + (f", {in_context} in context (info)" if in_context else ""))
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


def _trace_parts(report, verbosity: int) -> list:
    """One trace's part of the report. Below -v: its findings and incomplete verdicts only (a trace with
    neither says nothing); with -v: also the verdict of every rule, with reasons and notes."""
    findings = sorted_findings(report.findings)
    incomplete = [o for o in report.outcomes if o.status == STATUS_INCOMPLETE]
    verbose = verbosity >= VERBOSE
    warnings = report.warnings if verbosity >= NORMAL else []
    if not (verbose or findings or incomplete or warnings):
        return []
    where = printable(report.trace) + (f" (rank {report.rank})" if report.rank is not None else "")
    device = "GPU events" if report.has_device_events else "no GPU events: op-level checks only"
    if report.subject == "baseline":   # its counts are the checked traces', not the baseline file's
        counted = f"  compared with the {report.events} events of the checked traces"
    else:
        counted = f"  {report.events} events, {device}"
    parts: list = [Line.assemble((where, "bold"), counted)]
    acted, in_context = ordered_findings(findings)
    for f, first in acted:
        lines = _finding_lines(f, report)
        if first is not None:   # the same event as the finding above: one problem
            lines[0] = Line.assemble("  + ", (f"same problem as {printable(first.rule)}: ", "dim"),
                                     lines[0][2:])
        parts.extend(lines)
    if in_context and verbose:
        for f in in_context:
            parts.extend(_finding_lines(f, report))
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


def render(result: CheckResult, ctx: RenderContext | None = None) -> Lines:
    """The text report. `verbosity`: QUIET (-q) shows findings and what could not be checked, nothing for a
    clean check; NORMAL shows findings and a summary line, one line for a clean check; VERBOSE (-v) adds
    every trace's per-rule verdict table, reasons, notes and the files skipped."""
    verbosity = ctx.verbosity if ctx else NORMAL
    parts: list = []
    for report in result.reports:
        parts.extend(_trace_parts(report, verbosity))
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
            parts.append(Line(f"Skipped {len(not_traces)} file(s) that are not kineto traces:", style="yellow"))
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
    count: int
    device_us: float | None   # summed device time of the offending launches; None when no finding had one
    bytes: int | None         # summed bytes they allocated; None when no finding had a size


def _total(values) -> float | None:
    present_values = [v for v in values if not is_missing(v)]
    return sum(present_values) if present_values else None


def rule_statistics(result: CheckResult) -> list[RuleStatistic]:
    """Per rule with findings: how many, and their summed device time and bytes; most findings first."""
    by_rule: dict[str, list] = {}
    for f in result.findings:
        by_rule.setdefault(f.rule, []).append(f)
    stats = [RuleStatistic(rule=rule, name=found[0].name, count=len(found),
                           device_us=_total(f.device_us for f in found),
                           bytes=_total(f.bytes for f in found))
             for rule, found in by_rule.items()]
    return sorted(stats, key=lambda s: (-s.count, s.rule))






def render_statistics(result: CheckResult, ctx: RenderContext | None = None) -> Lines:
    """`--statistics`: a row per rule with findings (count, rule, name, device time, bytes), then the
    summary line; what could not be checked is always named."""
    verbosity = ctx.verbosity if ctx else NORMAL
    parts: list = []
    stats = rule_statistics(result)
    if stats:
        from rich.table import Table
        from rich.text import Text

        table = Table(box=None, show_header=True, header_style="bold", padding=(0, 1, 0, 0))
        for column, justify in (("count", "right"), ("rule", "left"), ("name", "left"),
                                ("device time", "right"), ("bytes", "right")):
            table.add_column(column, justify=justify, no_wrap=True)
        for s in stats:
            table.add_row(Text(str(s.count)), _rich_t(s.rule), _rich_t(s.name), Text(format_duration_us(s.device_us)),
                          Text(format_bytes(s.bytes)))
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
        findings = sorted_findings(v.report.findings) if v.report else []
        for f in findings[:4]:
            f = clean_finding(f)
            rank = f" (rank {f.rank})" if f.rank is not None else ""
            parts.append(_t(f"  {name}{rank}: {printable(f.rule)} {printable(f.message)}" +
                            (f" [{printable(f.source)}]" if f.source else ""), "dim"))
        if len(findings) > 4:
            parts.append(_t(f"  {name}: ... {len(findings) - 4} more", "dim"))
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
