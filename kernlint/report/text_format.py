"""The default terminal output: findings first, then a per-rule verdict table for each trace."""
from __future__ import annotations

from rich.console import Group
from rich.table import Table
from rich.text import Text

from kernlint.report.model import CheckResult

_SEVERITY_STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan"}
_STATUS_STYLE = {"failed": "bold red", "passed": "green", "not-applicable": "dim"}


def render(result: CheckResult) -> Group:
    parts: list = []
    for report in result.reports:
        where = report.trace + (f" (rank {report.rank})" if report.rank is not None else "")
        device = "GPU events" if report.has_device_events else "no GPU events: op-level checks only"
        parts.append(Text.assemble((where, "bold"), f"  {report.events} events, {device}"))
        for f in report.findings:
            line = Text("  ")
            line.append(f"{f.rule} {f.name}", style=_SEVERITY_STYLE[f.severity])
            line.append(f" [{f.severity}] ")
            line.append(f.message)
            parts.append(line)
            detail = Text("      ", style="dim")
            detail.append(f"scope: {f.scope} | event: {f.event} ({f.event_kind}, {f.event_category or '-'})")
            if f.launch_op:
                detail.append(f" | launched by {f.launch_op}")
                if f.top_op and f.top_op != f.launch_op:
                    detail.append(f" in {f.top_op}")
            where = f"{f.source} ({f.function})" if f.source and f.function else f.source
            detail.append(f" | source: {where or 'unknown (record with with_stack=True)'}")
            if f.anchor:
                detail.append(f" | anchor: {f.anchor}")
            parts.append(detail)
        table = Table(show_header=True, header_style="bold", box=None, padding=(0, 1, 0, 2))
        for column in ("rule", "name", "verdict", "level", "checked", "findings"):
            table.add_column(column, no_wrap=True)
        for o in report.outcomes:
            table.add_row(o.rule, o.name, Text(o.status, style=_STATUS_STYLE[o.status]), o.level or "-",
                          str(o.instances), str(len(o.findings)))
        parts.append(table)
        for o in report.outcomes:
            if o.reason:
                parts.append(Text(f"  {o.rule} not applicable: {o.reason}", style="dim"))
            if o.note:
                parts.append(Text(f"  {o.rule}: {o.note}", style="dim"))
        parts.append(Text(""))
    n = len(result.findings)
    summary = Text.assemble(
        ("Found ", ""), (f"{n} finding(s)", "bold red" if n else "bold green"),
        f" in {len(result.reports)} trace(s) with {len(result.rules)} rule(s).")
    parts.append(summary)
    for note in result.notes:
        parts.append(Text(note, style="dim"))
    return Group(*parts)
