"""The default terminal output: findings first, then a per-rule verdict table for each trace.

Every string that comes from a trace or a path goes through `printable` (kernlint.report.safe), and into a
rich `Text`, never a markup string: a kernel name cannot move the cursor, retitle the terminal, forge a line
of this output, or be read as rich markup.
"""
from __future__ import annotations

from rich.console import Group
from rich.table import Table
from rich.text import Text

from kernlint.report.model import CheckResult, clean_finding, sorted_findings
from kernlint.report.safe import printable

_SEVERITY_STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan"}
_STATUS_STYLE = {"failed": "bold red", "passed": "green", "not-applicable": "dim", "incomplete": "bold magenta"}
_INCOMPLETE_STYLE = "bold magenta"
_LISTED = 5   # incomplete verdicts named in the summary line before "and N more"


def _t(value: object, style: str = "") -> Text:
    return Text(printable(value), style=style)


def _finding_lines(f, report) -> list[Text]:
    f = clean_finding(f)
    line = Text("  ")
    line.append(f"{printable(f.rule)} {printable(f.name)}", style=_SEVERITY_STYLE.get(f.severity, "bold"))
    if f.rank is not None and report.rank is None:
        line.append(f" (rank {printable(f.rank)})")
    line.append(f" [{printable(f.severity)}] ")
    line.append(printable(f.message))
    detail = Text("      ", style="dim")
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
    return [line, detail]


def _summary(result: CheckResult) -> Text:
    n = len(result.findings)
    checked = f"{len(result.reports)} trace(s) with {len(result.rules)} rule(s)"
    gaps = []
    incomplete = result.incomplete
    if incomplete:
        named = [f"{printable(o.rule)} ({printable(r.trace)})" for r, o in incomplete[:_LISTED]]
        more = f" and {len(incomplete) - _LISTED} more" if len(incomplete) > _LISTED else ""
        gaps.append(f"{len(incomplete)} rule verdict(s) incomplete: {', '.join(named)}{more}")
    if result.unreadable:
        gaps.append(f"{len(result.unreadable)} entr{'y' if len(result.unreadable) == 1 else 'ies'} could not be "
                    "read")
    if n:
        summary = Text.assemble("Found ", (f"{n} finding(s)", "bold red"), f" in {checked}.")
        if gaps:
            summary.append(" Also " + "; ".join(gaps) + ".", style=_INCOMPLETE_STYLE)
        return summary
    if gaps:
        # Never a clean "Found 0 finding(s)" when something was not fully checked.
        return Text.assemble(("0 findings, but " + ", and ".join(gaps), _INCOMPLETE_STYLE),
                             f"; checked {checked}.")
    return Text.assemble("Found ", ("0 finding(s)", "bold green"), f" in {checked}.")


def render(result: CheckResult) -> Group:
    parts: list = []
    for report in result.reports:
        where = printable(report.trace) + (f" (rank {report.rank})" if report.rank is not None else "")
        device = "GPU events" if report.has_device_events else "no GPU events: op-level checks only"
        parts.append(Text.assemble((where, "bold"), f"  {report.events} events, {device}"))
        for f in sorted_findings(report.findings):
            parts.extend(_finding_lines(f, report))
        table = Table(show_header=True, header_style="bold", box=None, padding=(0, 1, 0, 2))
        for column in ("rule", "name", "verdict", "level", "checked", "findings"):
            table.add_column(column, no_wrap=True)
        for o in report.outcomes:
            table.add_row(_t(o.rule), _t(o.name), _t(o.status, _STATUS_STYLE.get(o.status, "bold")),
                          _t(o.level or "-"), Text(str(o.instances)), Text(str(len(o.findings))))
        parts.append(table)
        for o in report.outcomes:
            if o.reason:
                if o.status == "incomplete":
                    parts.append(_t(f"  {o.rule} incomplete: {printable(o.reason)}", _INCOMPLETE_STYLE))
                elif o.status == "not-applicable":
                    parts.append(_t(f"  {o.rule} not applicable: {printable(o.reason)}", "dim"))
                else:
                    parts.append(_t(f"  {o.rule}: {printable(o.reason)}", "dim"))
            if o.note:
                parts.append(_t(f"  {o.rule}: {printable(o.note)}", "dim"))
        for line in getattr(report, "damage", None) or []:
            parts.append(_t(f"  damage: {printable(line)}", _INCOMPLETE_STYLE))
        for note in report.notes:
            parts.append(_t(f"  note: {printable(note)}", "dim"))
        if report.outside_window and report.ranks is None:
            outside = "; ".join(f"{printable(n)} {printable(what)}" for what, n in report.outside_window.items())
            parts.append(_t(f"  outside the window: {outside}", "dim"))
        parts.append(Text(""))
    unreadable = set(result.unreadable)
    not_traces = [s for s in result.skipped if s not in unreadable]
    if result.unreadable:
        one = len(result.unreadable) == 1
        parts.append(Text(f"Could not read {len(result.unreadable)} entr{'y' if one else 'ies'}; what "
                          f"{'it holds' if one else 'they hold'} was not checked:", style=_INCOMPLETE_STYLE))
        for path, why in result.unreadable:
            parts.append(_t(f"  {printable(path)}: {printable(why)}", _INCOMPLETE_STYLE))
    if not_traces:
        parts.append(Text(f"Skipped {len(not_traces)} file(s) that are not kineto traces:", style="yellow"))
        for path, why in not_traces:
            parts.append(_t(f"  {printable(path)}: {printable(why)}", "yellow"))
    if result.ignored_files:
        parts.append(Text(f"Ignored {result.ignored_files} file(s) without a .json / .json.gz suffix.", style="dim"))
    parts.append(_summary(result))
    for note in result.notes:
        parts.append(_t(note, "dim"))
    return Group(*parts)


def render_audit(run) -> Group:
    """`kernlint audit`: one row per workload, its expected and actual verdicts, then the findings."""
    meta = run.metadata
    gpu = (meta.get("gpu") or {}).get("name")
    header = Text.assemble(("kernlint audit", "bold"),
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
        table.add_row(_t(v.workload.name), Text("regressed" if v.workload.regressed else "fixed"), Text(str(v.ranks)),
                      _t(expected), _t(actual or "-", "green" if v.ok else "bold red"), Text(str(n)),
                      Text(f"{v.seconds:.1f}"))
    parts: list = [header, table]
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
    if run.out_dir:
        parts.append(_t(f"Traces and run metadata: {printable(run.out_dir)}", "dim"))
    ok = sum(v.ok for v in run.verdicts)
    parts.append(Text(f"{ok}/{len(run.verdicts)} workloads as expected",
                      style="bold green" if run.all_as_expected else "bold red"))
    return Group(*parts)


def render_replay(result) -> Group:
    """`kernlint audit --replay`: the recorded fixture traces against their expected verdicts."""
    table = Table("rule", "case", "expected", "verdict", "findings", "detail", box=None, header_style="bold")
    for r in result.results:
        o = r.outcome
        findings = sorted_findings(o.findings) if o else []
        detail = "; ".join(r.problems) if r.problems else (
            findings[0].message if findings else (o.reason or "") if o else "")
        table.add_row(_t(r.case.rule), _t(r.case.spec.name), _t(r.case.spec.expect),
                      _t(o.status if o else "error", "green" if r.ok else "bold red"),
                      Text(str(len(o.findings)) if o else "-"), _t(detail))
    ok = sum(r.ok for r in result.results)
    return Group(table, Text(f"{ok}/{len(result.results)} verdicts as expected",
                             style="bold green" if result.all_as_expected else "bold red"))
