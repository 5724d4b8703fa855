"""JUnit XML for CI test reports: a test suite per trace, a test case per rule verdict.

A failed rule is a `<failure type="SEVERITY">` whose text lists each of its causes (kernlint.rules.causes:
the findings of one source line and event kind, across layers and steps) once, as its worst finding
(message, scope, source line, cost), then its instances one line each (scope, step, trace, cost); a rule
that does not apply is `<skipped>`; a verdict that could not be reached on a damaged trace is an
`<error type="incomplete">`, never a pass; an input that could not be read is a test case with an
`<error type="unreadable">`. `kernlint audit` renders one test case per workload (or, with --replay, per
recorded case). Built with xml.etree; what a trace holds is shown with control characters visible
(kernlint.report.safe), so the XML is well-formed whatever the kernel, scope or file names are.
"""
from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import PurePath

from kernlint.report import RenderContext, Renderer
from kernlint.report.safe import cost_text, printable
from kernlint.rules.causes import describe_instances, group_causes, instance_step
from kernlint.rules.result import (
    STATUS_FAILED,
    STATUS_INCOMPLETE,
    STATUS_NOT_APPLICABLE,
    STATUS_PASSED,
    CheckResult,
    clean_finding,
    sorted_findings,
)

_DECLARATION = '<?xml version="1.0" encoding="UTF-8"?>\n'
# What XML 1.0 cannot hold and `printable` leaves: lone surrogates and the two non-characters U+FFFE/U+FFFF.
_NOT_XML = re.compile("[\ud800-\udfff\ufffe\uffff]")
_TRACE_SUFFIXES = (".pt.trace.json.gz", ".pt.trace.json", ".json.gz", ".json", ".gz")
_CLASS_UNSAFE = re.compile(r"[^A-Za-z0-9_-]+")


def _line(value: object) -> str:
    """One line of text that XML 1.0 can hold, control characters (newlines too) shown visibly."""
    return _NOT_XML.sub("\ufffd", printable(value))


def _lines(lines: list[str]) -> str:
    """Several lines, each made inert; the newlines between them stay."""
    return "\n".join(_line(line) for line in lines)


def _counted(element: ET.Element, cases: list[ET.Element]) -> ET.Element:
    """Set tests/failures/errors/skipped from the test cases' children."""
    kinds = [child.tag for case in cases for child in case if child.tag in ("failure", "error", "skipped")]
    element.set("tests", str(len(cases)))
    for tag, attribute in (("failure", "failures"), ("error", "errors"), ("skipped", "skipped")):
        element.set(attribute, str(kinds.count(tag)))
    return element


def _suite(parent: ET.Element, name: str, cases: list[ET.Element], properties: list[tuple[str, str]] = ()
           ) -> ET.Element:
    suite = _counted(ET.SubElement(parent, "testsuite", {"name": _line(name)}), cases)
    if properties:
        props = ET.SubElement(suite, "properties")
        for key, value in properties:
            ET.SubElement(props, "property", {"name": _line(key), "value": _line(value)})
    suite.extend(cases)
    return suite


def _case(classname: str, name: str, time: float | None = None) -> ET.Element:
    case = ET.Element("testcase", {"classname": _line(classname), "name": _line(name)})
    if time is not None:
        case.set("time", f"{time:.3f}")
    return case


def _classname(report) -> str:
    """`kernlint.<trace>`: the trace's file name without its suffixes, and its rank where it has one."""
    name = PurePath(str(report.trace)).name or str(report.trace)
    for suffix in _TRACE_SUFFIXES:
        if name.endswith(suffix) and len(name) > len(suffix):
            name = name[: -len(suffix)]
            break
    part = _CLASS_UNSAFE.sub("_", name).strip("_") or "trace"
    if report.rank is not None and not re.search(rf"rank[-_]?{report.rank}$", part):
        part += f"_rank{report.rank}"
    return f"kernlint.{part}"








def _finding_lines(f) -> list[str]:
    f = clean_finding(f)
    lines = [f"{f.severity}: {f.message}", f"  scope: {f.scope}"]
    if f.source:
        lines.append(f"  source: {f.source}" + (f" ({f.function})" if f.function else ""))
    else:
        lines.append("  source: not recorded (the trace has no Python stacks)")
    event = f"  event: {f.event} ({f.event_kind}, {f.event_category})"
    if f.launch_op:
        event += f" launched by {f.launch_op}"
    if f.top_op and f.top_op != f.launch_op:
        event += f" under {f.top_op}"
    lines.append(event)
    lines.append("  cost: " + (cost_text(f) or "not recorded"))
    lines.append(f"  trace: {f.trace}" + (f", rank {f.rank}" if f.rank is not None else ""))
    return lines


def _instance_line(f) -> str:
    f = clean_finding(f)
    where = [f"scope: {f.scope}"]
    step = instance_step(f)
    if step:
        where.append(step)
    where.append(f"trace: {f.trace}" + (f", rank {f.rank}" if f.rank is not None else ""))
    cost = cost_text(f)
    if cost:
        where.append(cost)
    return "  - " + "; ".join(where)


def _cause_lines(cause) -> list[str]:
    """A cause: its worst finding's lines, then (several instances) where they are and one line each."""
    lines = _finding_lines(cause.representative)
    if cause.count > 1:
        total = cost_text(cause)
        lines.append(f"  {describe_instances(cause)}" + (f"; cost in all: {total}" if total else ""))
        lines += [_instance_line(f) for f in cause.findings]
    return lines


def _outcome_case(report, outcome) -> ET.Element:
    case = _case(_classname(report), f"{outcome.rule} {outcome.name}")
    findings = sorted_findings(outcome.findings)
    causes = group_causes(findings)
    text = [line for cause in causes for line in _cause_lines(cause)]
    if outcome.note:
        text.append(f"note: {outcome.note}")
    if outcome.status == STATUS_FAILED:
        if findings:
            grouped = f" in {len(causes)} cause(s)" if len(causes) != len(findings) else ""
            message = f"{len(findings)} finding(s){grouped}: {clean_finding(causes[0].representative).message}" + \
                (" ..." if len(causes) > 1 else "")
        else:
            message = outcome.reason or "failed"
        ET.SubElement(case, "failure", {"message": _line(message), "type": _line(outcome.severity)}).text = \
            _lines(text)
    elif outcome.status == STATUS_NOT_APPLICABLE:
        ET.SubElement(case, "skipped", {"message": _line(outcome.reason or "not applicable")})
    elif outcome.status == STATUS_PASSED:
        if text:   # info-level findings below the rule's severity, or a note
            ET.SubElement(case, "system-out").text = _lines(text)
    else:   # incomplete, or a status this renderer does not know: never a pass
        error = ET.SubElement(case, "error", {
            "message": _line(outcome.reason or f"verdict {outcome.status}"),
            "type": STATUS_INCOMPLETE if outcome.status == STATUS_INCOMPLETE else _line(outcome.status)})
        damage = [f"damage: {d}" for d in getattr(report, "damage", None) or []]
        error.text = _lines(text + damage)
    return case


def _report_properties(report) -> list[tuple[str, str]]:
    props = [("events", str(report.events)), ("has_device_events", str(report.has_device_events).lower()),
             ("has_stacks", str(report.has_stacks).lower())]
    if report.rank is not None:
        props.append(("rank", str(report.rank)))
    if report.ranks is not None:
        props.append(("ranks", ", ".join(str(r) for r in report.ranks)))
    props += [("note", n) for n in report.notes]
    props += [("damage", d) for d in getattr(report, "damage", None) or []]
    return props


def _document(root: ET.Element) -> str:
    ET.indent(root)
    return _DECLARATION + ET.tostring(root, encoding="unicode") + "\n"


def render(result: CheckResult, ctx: RenderContext | None = None) -> str:
    root = ET.Element("testsuites", {"name": "kernlint"})
    suites = []
    for report in result.reports:
        cases = [_outcome_case(report, o) for o in report.outcomes]
        suites.append(cases)
        _suite(root, report.trace, cases, _report_properties(report))
    if result.unreadable:
        cases = []
        for path, reason in result.unreadable:
            case = _case("kernlint.unreadable", path)
            ET.SubElement(case, "error", {"message": _line(f"could not be read: {reason}"), "type": "unreadable"}
                          ).text = _line(f"{path} was not checked: {reason}")
            cases.append(case)
        suites.append(cases)
        _suite(root, "unreadable inputs", cases)
    _counted(root, [case for cases in suites for case in cases])
    return _document(root)


def render_audit(run, ctx: RenderContext | None = None) -> str:
    """One test case per workload: its problems (a verdict other than the expected one) are a failure."""
    root = ET.Element("testsuites", {"name": "kernlint audit"})
    cases = []
    for v in run.verdicts:
        name = v.workload.name + (" (regressed)" if v.workload.regressed else "")
        case = _case(f"kernlint.audit.{_CLASS_UNSAFE.sub('_', v.device)}", name, v.seconds)
        verdicts = [f"{o.rule}: {o.status}" + (f" ({o.reason})" if o.reason else "")
                    for o in (v.report.outcomes if v.report else [])]
        if v.problems:
            ET.SubElement(case, "failure", {"message": _line(v.problems[0]), "type": "unexpected-verdict"}).text = \
                _lines(v.problems + ["verdicts:"] + [f"  {line}" for line in verdicts])
        elif verdicts:
            ET.SubElement(case, "system-out").text = _lines(verdicts)
        cases.append(case)
    suite = _suite(root, f"kernlint audit on {run.device}", cases,
                   [(str(k), str(val)) for k, val in sorted((run.metadata or {}).items(), key=lambda kv: str(kv[0]))])
    suite.set("time", f"{run.seconds:.3f}")
    everything = list(cases)
    baseline = getattr(run, "baseline_report", None)   # the workloads against --baseline, where given
    if baseline is not None:
        baseline_cases = [_outcome_case(baseline, o) for o in baseline.outcomes]
        _suite(root, f"baseline: {baseline.trace}", baseline_cases, _report_properties(baseline))
        everything += baseline_cases
    _counted(root, everything)
    return _document(root)


def render_replay(result, ctx: RenderContext | None = None) -> str:
    """One test case per recorded case: a verdict other than the expected one is a failure."""
    root = ET.Element("testsuites", {"name": "kernlint replay"})
    cases = []
    for r in result.results:
        case = _case(f"kernlint.cases.{_CLASS_UNSAFE.sub('_', r.case.rule)}", r.case.spec.name)
        if r.problems:
            ET.SubElement(case, "failure", {"message": _line(r.problems[0]), "type": "unexpected-verdict"}).text = \
                _lines(r.problems)
        cases.append(case)
    _suite(root, "recorded cases", cases)
    _counted(root, cases)
    return _document(root)


# What this format renders (kernlint.report.builtin_formats declares it).
RENDERER = Renderer(check=render, audit=render_audit, replay=render_replay)
