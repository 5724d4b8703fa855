"""GitHub Actions workflow commands: one `::error file=..,line=..::` annotation per finding."""
from __future__ import annotations

from kernlint.report import RenderContext
from kernlint.report.safe import printable
from kernlint.rules.result import CheckResult, clean_finding, sorted_findings, timing_warnings

_LEVEL = {"error": "error", "warning": "warning", "info": "notice"}


def _data(text: str) -> str:
    """A command's message: GitHub reads %, CR and LF as escapes."""
    return printable(text).replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _property(text: str) -> str:
    """A command's property value: also `:` and `,` are escaped."""
    return _data(text).replace(":", "%3A").replace(",", "%2C")


def _location(source: str | None) -> list[str]:
    """`file=..,line=..` from a finding's `path/file.py:123`, when the trace had stacks."""
    if not source or ":" not in source:
        return []
    file, _, line = source.rpartition(":")
    return [f"file={_property(file)}", f"line={line}"] if line.isdigit() else [f"file={_property(source)}"]


def render(result: CheckResult, ctx: RenderContext | None = None) -> str:
    lines = []
    for f in sorted_findings(result.findings):
        f = clean_finding(f)
        props = _location(f.source) + [f"title={_property(f'{f.rule} {f.name}')}"]
        where = f" [{f.scope}; {f.trace}" + (f", rank {f.rank}" if f.rank is not None else "") + "]"
        lines.append(f"::{_LEVEL.get(f.severity, 'warning')} {','.join(props)}::{_data(f.message + where)}")
    for rule in result.rules:
        if result.rule_status(rule.id) == "incomplete":
            lines.append(f"::warning title={_property(f'{rule.id} {rule.name}')}::"
                         + _data(f"{rule.id} could not be fully checked: the traces are damaged (see the report)"))
    for path, reason in result.unreadable:
        lines.append(f"::warning file={_property(path)}::{_data('could not be read: ' + reason)}")
    # A baseline comparison's timing warnings (unknown timings, another GPU).
    lines += [f"::warning title=kernlint baseline::{_data(w)}" for w in timing_warnings(result)]
    return "\n".join(lines) + ("\n" if lines else "")
