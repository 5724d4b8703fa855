"""`kernlint audit` output: each recorded workload, the verdict kernlint gives, and the one expected."""
from __future__ import annotations

import json

from rich.console import Group
from rich.table import Table
from rich.text import Text

from kernlint.rules.cases import AuditResult


def render(result: AuditResult) -> Group:
    table = Table("rule", "case", "expected", "verdict", "findings", "detail", box=None, header_style="bold")
    for r in result.results:
        o = r.outcome
        verdict = o.status if o else "error"
        style = "green" if r.ok else "bold red"
        detail = "; ".join(r.problems) if r.problems else (
            o.findings[0].message if o and o.findings else (o.reason or "") if o else "")
        table.add_row(r.case.rule, r.case.spec.name, r.case.spec.expect, Text(verdict, style=style),
                      str(len(o.findings)) if o else "-", detail)
    ok = sum(r.ok for r in result.results)
    summary = Text(f"{ok}/{len(result.results)} verdicts as expected",
                   style="bold green" if result.all_as_expected else "bold red")
    return Group(table, summary)


def render_json(result: AuditResult) -> str:
    return json.dumps({"all_as_expected": result.all_as_expected, "cases": [
        {"rule": r.case.rule, "case": r.case.spec.name, "expected": r.case.spec.expect,
         "verdict": r.outcome.status if r.outcome else None, "problems": r.problems,
         "findings": [f.message for f in r.outcome.findings] if r.outcome else []}
        for r in result.results]}, indent=2) + "\n"
