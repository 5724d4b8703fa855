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
            if f.rank is not None and report.rank is None:
                line.append(f" (rank {f.rank})")
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
        for note in report.notes:
            parts.append(Text(f"  note: {note}", style="dim"))
        if report.outside_window and report.ranks is None:
            outside = "; ".join(f"{n} {what}" for what, n in report.outside_window.items())
            parts.append(Text(f"  outside the window: {outside}", style="dim"))
        parts.append(Text(""))
    if result.skipped:
        parts.append(Text(f"Skipped {len(result.skipped)} file(s) that are not kineto traces or could not be "
                          "read:", style="yellow"))
        for path, why in result.skipped:
            parts.append(Text(f"  {path}: {why}", style="yellow"))
    if result.ignored_files:
        parts.append(Text(f"Ignored {result.ignored_files} file(s) without a .json / .json.gz suffix.", style="dim"))
    n = len(result.findings)
    summary = Text.assemble(
        ("Found ", ""), (f"{n} finding(s)", "bold red" if n else "bold green"),
        f" in {len(result.reports)} trace(s) with {len(result.rules)} rule(s).")
    parts.append(summary)
    for note in result.notes:
        parts.append(Text(note, style="dim"))
    return Group(*parts)


def render_audit(run) -> Group:
    """`kernlint audit`: one row per workload, its expected and actual verdicts, then the findings."""
    meta = run.metadata
    gpu = (meta.get("gpu") or {}).get("name")
    header = Text.assemble(("kernlint audit", "bold"), f"  device {run.device}" + (f" ({gpu})" if gpu else ""),
                           f", torch {meta.get('torch')}", f", {len(run.verdicts)} workload(s) in {run.seconds:.1f} s")
    table = Table("workload", "kind", "ranks", "expected", "verdict", "findings", "seconds", box=None,
                  header_style="bold", padding=(0, 1, 0, 2))
    for v in run.verdicts:
        outcomes = {o.rule: o for o in v.report.outcomes} if v.report else {}
        expected = ", ".join(f"{r} {s}" for r, s in v.workload.expect.items())
        actual = ", ".join(f"{r} {outcomes[r].status}" for r in v.workload.expect if r in outcomes)
        n = len(v.report.findings) if v.report else 0
        table.add_row(v.workload.name, "regressed" if v.workload.regressed else "fixed", str(v.ranks), expected,
                      Text(actual or "-", style="green" if v.ok else "bold red"), str(n), f"{v.seconds:.1f}")
    parts: list = [header, table]
    for v in run.verdicts:
        for problem in v.problems:
            parts.append(Text(f"  {v.workload.name}: {problem}", style="bold red"))
        for f in (v.report.findings if v.report else [])[:4]:
            rank = f" (rank {f.rank})" if f.rank is not None else ""
            parts.append(Text(f"  {v.workload.name}{rank}: {f.rule} {f.message}" +
                              (f" [{f.source}]" if f.source else ""), style="dim"))
        if v.report and len(v.report.findings) > 4:
            parts.append(Text(f"  {v.workload.name}: ... {len(v.report.findings) - 4} more", style="dim"))
    if run.out_dir:
        parts.append(Text(f"Traces and run metadata: {run.out_dir}", style="dim"))
    ok = sum(v.ok for v in run.verdicts)
    parts.append(Text(f"{ok}/{len(run.verdicts)} workloads as expected",
                      style="bold green" if run.all_as_expected else "bold red"))
    return Group(*parts)


def render_replay(result) -> Group:
    """`kernlint audit --replay`: the recorded fixture traces against their expected verdicts."""
    table = Table("rule", "case", "expected", "verdict", "findings", "detail", box=None, header_style="bold")
    for r in result.results:
        o = r.outcome
        detail = "; ".join(r.problems) if r.problems else (
            o.findings[0].message if o and o.findings else (o.reason or "") if o else "")
        table.add_row(r.case.rule, r.case.spec.name, r.case.spec.expect,
                      Text(o.status if o else "error", style="green" if r.ok else "bold red"),
                      str(len(o.findings)) if o else "-", detail)
    ok = sum(r.ok for r in result.results)
    return Group(table, Text(f"{ok}/{len(result.results)} verdicts as expected",
                             style="bold green" if result.all_as_expected else "bold red"))
