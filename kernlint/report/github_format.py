"""GitHub Actions workflow commands: one `::error file=..,line=..::` annotation per file:line (GitHub shows ten
annotations a step, and 64 findings of one line are one thing to fix): each rule's causes there merged
(kernlint.rules.causes.by_line), the rules that agree on the line named in its title (KL001 on a fill and the
baseline's KL801 on the same fill are one problem), the worst rule's worst instance's message followed by
where the instances are, then one line per other rule. A cause without a source line is one annotation of
its own."""
from __future__ import annotations

from kernlint.report import RenderContext, Renderer
from kernlint.report.safe import printable
from kernlint.rules.causes import by_line, causes_of, describe_instances
from kernlint.rules.result import CheckResult, clean_finding, timing_warnings
from kernlint.rules.severity import SEVERITY_ORDER

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


def _where(cause, f) -> str:
    if cause.count > 1:
        return f" [{describe_instances(cause)}; the worst: {f.scope}; {f.trace}]"
    return f" [{f.scope}; {f.trace}" + (f", rank {f.rank}" if f.rank is not None else "") + "]"


def render(result: CheckResult, ctx: RenderContext | None = None) -> str:
    lines = []
    at_line: dict[str, list] = {}
    for cause in by_line(causes_of(result)):
        at_line.setdefault(cause.source or f"\0{len(at_line)}", []).append(cause)
    for causes in at_line.values():
        causes.sort(key=lambda c: -SEVERITY_ORDER.get(c.representative.severity, 0))
        first = clean_finding(causes[0].representative)
        title = " + ".join(f"{c.rule} {c.representative.name}" for c in causes)
        props = _location(first.source) + [f"title={_property(title)}"]
        parts = [first.message + _where(causes[0], first)]
        for other in causes[1:]:
            f = clean_finding(other.representative)
            parts.append(f"{f.rule} {f.name} at the same line: {f.message}{_where(other, f)}")
        # One line of the annotation per rule (%0A: a newline in a workflow command's message).
        lines.append(f"::{_LEVEL.get(first.severity, 'warning')} {','.join(props)}::"
                     + "%0A".join(_data(part) for part in parts))
    for rule in result.rules:
        if result.rule_status(rule.id) == "incomplete":
            lines.append(f"::warning title={_property(f'{rule.id} {rule.name}')}::"
                         + _data(f"{rule.id} could not be fully checked: the traces are damaged (see the report)"))
    for path, reason in result.unreadable:
        lines.append(f"::warning file={_property(path)}::{_data('could not be read: ' + reason)}")
    # A baseline comparison's timing warnings (unknown timings, another GPU).
    lines += [f"::warning title=kernlint baseline::{_data(w)}" for w in timing_warnings(result)]
    return "\n".join(lines) + ("\n" if lines else "")


# What this format renders (kernlint.report.builtin_formats declares it).
RENDERER = Renderer(check=render)
