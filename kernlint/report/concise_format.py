"""`--format concise`: one `path:line: ID message` line per cause (kernlint.rules.causes: the findings of one
rule at one line and event kind, `(N instances)` after the message of the worst), what editors, terminal
links and CI problem matchers read (the trace's path where the finding has no Python line), then one summary
line."""
from __future__ import annotations

from kernlint.report import RenderContext, Renderer
from kernlint.report.safe import printable
from kernlint.rules.causes import causes_of
from kernlint.rules.result import CheckResult, clean_finding


def location(f) -> str:
    """`file.py:LINE` of the launching Python line, else the trace's path (a finding of a trace recorded
    without stacks points at the trace)."""
    return f.source or f.trace


def render(result: CheckResult, ctx: RenderContext | None = None) -> str:
    lines = []
    causes = causes_of(result)
    for cause in causes:
        f = clean_finding(cause.representative)
        ranks = cause.ranks
        where = f" [rank{'s' if len(ranks) > 1 else ''} {', '.join(map(str, ranks))}]" if ranks else ""
        count = f" ({cause.count} instances)" if cause.count > 1 else ""
        lines.append(printable(f"{location(f)}: {f.rule} [{f.severity}] {f.message}{count}{where}"))
    for path, reason in result.unreadable:
        lines.append(printable(f"{path}: could not be read: {reason}"))
    incomplete = sorted({o.rule for _, o in result.incomplete})
    tail = f"; incomplete: {', '.join(incomplete)}" if incomplete else ""
    lines.append(f"Found {len(result.findings)} finding(s) in {result.traces_checked} trace(s){tail}.")
    return "\n".join(lines) + "\n"


# What this format renders (kernlint.report.builtin_formats declares it).
RENDERER = Renderer(check=render)
