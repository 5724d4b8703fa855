"""Markdown for a CI job summary ($GITHUB_STEP_SUMMARY): the verdict per rule, then the findings, one row per
cause (kernlint.rules.causes: the findings of one rule at one source line and event kind): its worst
instance, with `(N instances: scopes; steps; ranks; traces)` after the message."""
from __future__ import annotations

from kernlint.report import RenderContext, Renderer
from kernlint.report.breakdown import summary_line, top_texts
from kernlint.report.safe import cost_text, printable
from kernlint.rules.causes import causes_of, describe_instances
from kernlint.rules.result import CheckResult, clean_finding, timing_warnings

_ICON = {"failed": "failed", "passed": "passed", "incomplete": "incomplete", "not-applicable": "not applicable"}


def _cell(value: object) -> str:
    """Table-cell text: visible control characters, no table or markup breaking characters."""
    text = printable("" if value is None else value)
    for ch in "\\`*_[]<>|":
        text = text.replace(ch, "\\" + ch)
    return text


def render(result: CheckResult, ctx: RenderContext | None = None) -> str:
    findings = result.findings
    causes = causes_of(result)
    grouped = f" ({len(causes)} cause{'' if len(causes) == 1 else 's'})" if len(causes) != len(findings) else ""
    out = [f"## kernlint: {len(findings)} finding(s){grouped} in {result.traces_checked} trace(s)", ""]
    out += ["| rule | name | verdict |", "|---|---|---|"]
    for rule in result.rules:
        out.append(f"| {_cell(rule.id)} | {_cell(rule.name)} | {_ICON[result.rule_status(rule.id)]} |")
    if findings:
        out += ["", "| rule | severity | message | source | scope | cost | trace |", "|---|---|---|---|---|---|---|"]
        for cause in causes:
            f = clean_finding(cause.representative)
            cost = cost_text(f) or ""
            message = f.message
            if cause.count > 1:
                total = cost_text(cause)
                message += f" ({describe_instances(cause)}" + (f"; cost in all: {total}" if total else "") + ")"
            out.append(f"| {_cell(f.rule)} | {_cell(f.severity)} | {_cell(message)} | {_cell(f.source or '')} | "
                       f"{_cell(f.scope)} | {_cell(cost)} | "
                       f"{_cell(f.trace)}{' rank ' + str(f.rank) if f.rank is not None else ''} |")
    timed = [r for r in result.reports if getattr(r, "time", None)]
    if timed:   # where each trace's device time goes (kernlint.report.breakdown)
        out += ["", "### Where the time goes", ""]
        for r in timed:
            out.append(f"- {_cell(r.trace)}: {_cell(summary_line(r.time))}; top: "
                       + "; ".join(_cell(t) for t in top_texts(r.time, 3)))
    baseline_warnings = timing_warnings(result)
    if baseline_warnings:   # what a baseline comparison must show even when nothing failed (unknown timings)
        out += [""] + [f"- baseline: {_cell(w)}" for w in baseline_warnings]
    if result.unreadable:
        out += ["", f"{len(result.unreadable)} entr{'y' if len(result.unreadable) == 1 else 'ies'} could not be "
                "read: " + ", ".join(_cell(p) for p, _ in result.unreadable)]
    return "\n".join(out) + "\n"


# What this format renders (kernlint.report.builtin_formats declares it).
RENDERER = Renderer(check=render)
