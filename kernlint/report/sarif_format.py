"""SARIF 2.1.0 log (GitHub code scanning, IDE viewers): one result per cause, at the launching file:line.

One run. `tool.driver.rules` holds every selected rule with its documentation (What it does / Why is this
bad? / Example / Use instead / References). Each cause (kernlint.rules.causes: the findings of one rule at
one source line and event kind, across layers, steps and ranks) is one result at the user Python line that
launched it (`source`); for a trace recorded without stacks it points at the trace file instead, with no
region. The result is its worst instance's, and a cause of several instances says how many in its message
and in `properties.instances`, lists its scopes, steps, ranks and traces in the properties, and its instances
(up to MAX_RELATED) as `relatedLocations`, each with its scope and where in the run it ran. Its partial
fingerprint is the smallest of its instances' fingerprints, the same whichever instance is the worst.
`partialFingerprints["kernlintFingerprint/v2"]` is the finding's fingerprint of scheme 2
(kernlint.rules.fingerprint): rule, scope, event, ops and source file:line with what each recording numbers
(step numbers, pids, ranks, replays, addresses, absolute paths) left out, so that code scanning keeps one
alert for the same finding in the next recording (v1 held the names as recorded). What the check could
not do is in `invocations[0]`: `executionSuccessful` is false and `toolExecutionNotifications` names each
incomplete (trace, rule) verdict and each input that could not be read. Every string from a trace shows
control characters visibly (kernlint.report.safe); no number is NaN.
"""
from __future__ import annotations

import functools
import json
import re
from pathlib import Path
from urllib.parse import quote

from kernlint._version import __version__
from kernlint.report import RenderContext, Renderer
from kernlint.report.safe import cost_text, finite_number, json_safe, present, printable
from kernlint.rules.causes import causes_of, describe_instances, instance_step
from kernlint.rules.docs import RULE_PAGES, reference_line
from kernlint.rules.result import CheckResult, clean_finding, timing_warnings
from kernlint.rules.sources import file_and_line

SARIF_VERSION = "2.1.0"
SARIF_SCHEMA = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
# The key names the fingerprint scheme (kernlint.rules.fingerprint.FINGERPRINT_SCHEME).
FINGERPRINT_KEY = "kernlintFingerprint/v2"

_LEVEL = {"error": "error", "warning": "warning", "info": "note"}
MAX_RELATED = 100   # a cause's instances listed as relatedLocations
_SURROGATE = re.compile("[\ud800-\udfff]")
_WINDOWS_DRIVE = re.compile(r"^[A-Za-z]:/")
# Characters kept as they are in a relative path; ":" is not among them, as a relative reference whose
# first segment holds one would read as a URI scheme.
_PATH_SAFE = "/!$&'()*+,;=@"


def _line(value: object) -> str:
    """One line of inert text: control characters, newlines included, shown visibly; lone surrogates
    (which no UTF-8 reader accepts) replaced."""
    return _SURROGATE.sub("\ufffd", printable(value))


def _block(value: object) -> str:
    """Inert text that keeps its line breaks (rule documentation)."""
    text = "" if present(value) is None else str(value)
    return "\n".join(_line(part) for part in text.replace("\r\n", "\n").split("\n"))


def _uri(path: str) -> str:
    """A path as a URI reference: relative paths stay relative (POSIX separators, percent-encoded),
    absolute ones become file:// URIs."""
    posix = path.replace("\\", "/")
    if _WINDOWS_DRIVE.match(posix):
        return "file:///" + posix[:2] + _quoted(posix[2:])
    if posix.startswith("/"):
        return "file://" + _quoted(posix)
    while posix.startswith("./"):
        posix = posix[2:]
    return _quoted(posix)


def _quoted(path: str) -> str:
    # A file name that is not UTF-8 (its bytes kept by the file system encoding) is percent-encoded as bytes.
    return quote(path, safe=_PATH_SAFE, errors="surrogateescape")


def _fence(code: str) -> str:
    """A Markdown code block that the code cannot close early."""
    longest = max((len(m) for m in re.findall(r"`+", code)), default=0)
    ticks = "`" * max(3, longest + 1)
    return f"{ticks}python\n{code}\n{ticks}"


def _help(rule) -> dict:
    d = rule.spec.docs
    sections = [("What it does", d.what_it_does), ("Why is this bad?", d.why_is_this_bad),
                ("Example", d.example), ("Use instead", d.use_instead)]
    references = [_line(reference_line(r)) for r in d.references]
    text = [f"{_line(rule.id)} {_line(rule.name)} ({_line(rule.severity)})", "", _block(rule.spec.summary.strip())]
    markdown = [_block(rule.spec.summary.strip())]
    for heading, body in sections:
        body = _block(body.strip())
        text += ["", heading, body]
        markdown += ["", f"## {heading}", _fence(body) if heading in ("Example", "Use instead") else body]
    if references:
        text += ["", "References", *[f"- {r}" for r in references]]
        markdown += ["", "## References", *[f"- {r}" for r in references]]
    return {"text": "\n".join(text), "markdown": "\n".join(markdown)}


def _descriptor(rule) -> dict:
    tags = list(dict.fromkeys(_line(t) for t in rule.spec.tags))   # unique, in the rule file's order
    home = project_url()
    page = {"helpUri": f"{home.rstrip('/')}/blob/main/{RULE_PAGES}/{rule.id}.md"} if home and \
        rule.spec.docs.what_it_does and _is_builtin(rule) else {}
    return {
        "id": _line(rule.id),
        "name": _line(rule.name),
        **page,
        "shortDescription": {"text": _line(rule.spec.summary.strip())},
        "fullDescription": {"text": _block(rule.spec.docs.what_it_does.strip())},
        "help": _help(rule),
        "defaultConfiguration": {"level": _LEVEL.get(rule.severity, "warning")},
        "properties": {"tags": tags, "checkType": _line(rule.spec.check.type)},
    }


@functools.cache
def _shipped_rule_ids() -> frozenset[str]:
    from kernlint.rules.loader import builtin_rule_files

    return frozenset(Path(f.name).stem for f in builtin_rule_files())


def _is_builtin(rule) -> bool:
    """A shipped rule: its page is in the repository (a project's own rule files have none there)."""
    return rule.id in _shipped_rule_ids()


def _whole(value) -> int | None:
    number = finite_number(value)
    return None if number is None else int(number)




def _message(f, cause=None) -> str:
    where = [f"scope: {f.scope}", f"event: {f.event}"]
    cost = cost_text(f)
    if cost:
        where.append(f"cost: {cost}")
    where.append(f"trace: {f.trace}" + (f", rank {f.rank}" if f.rank is not None else ""))
    if cause is not None and cause.count > 1:
        total = cost_text(cause)
        instances = describe_instances(cause) + (f"; cost in all: {total}" if total else "")
        return _line(f"{f.message} [{instances}; the worst: {'; '.join(where)}]")
    return _line(f"{f.message} [{'; '.join(where)}]")


def _artifact_location(path: str) -> dict:
    """A relative path is relative to the checkout (%SRCROOT%), where code scanning finds the PR's files."""
    uri = _uri(path)
    return {"uri": uri} if "://" in uri else {"uri": uri, "uriBaseId": "%SRCROOT%"}


def _artifact(path: str) -> dict:
    return {"artifactLocation": _artifact_location(path)}


def _location(f) -> dict:
    at = file_and_line(f.source)
    if at is not None:
        physical = {"artifactLocation": _artifact_location(at[0]), "region": {"startLine": at[1]}}
    else:
        physical = _artifact(f.trace)
    logical = [{"name": _line(f.scope), "kind": "scope"}] if f.scope else []
    if f.function:
        logical.append({"name": _line(f.function), "kind": "function"})
    location = {"physicalLocation": physical}
    if logical:
        location["logicalLocations"] = logical
    return location


def _cost_properties(cost) -> dict:
    if cost is None:
        return {}
    return {"cost_us": finite_number(cost.us), "cost_share": finite_number(cost.share), "cost_basis": cost.basis,
            "cost_share_of": cost.of, "cost_category": getattr(cost, "category", None)}


def _properties(f) -> dict:
    values = {"traceFile": f.trace, "rank": f.rank, "event": f.event, "eventKind": f.event_kind,
              "eventCategory": f.event_category, "launchOp": f.launch_op, "topOp": f.top_op, "anchor": f.anchor,
              "source": f.source, "function": f.function, "deviceTimeUs": finite_number(f.device_us),
              "bytes": _whole(f.bytes), "timestampUs": finite_number(f.ts), "details": getattr(f, "details", None),
              # Why a right finding is info (a step edge, warm-up), and which findings share one event.
              "context": getattr(f, "context", None), "group": getattr(f, "group", None),
              # The measured cost (kernlint.rules.cost): µs on its basis, and its share of the step.
              **_cost_properties(getattr(f, "cost", None))}
    return {k: _safe_value(v) for k, v in values.items() if present(v) is not None and v != ""}


def _safe_value(value):
    """Property values: strings inert, containers walked, numbers as they are (json_safe does NaN)."""
    if isinstance(value, str):
        return _line(value)
    if isinstance(value, dict):
        return {_line(k): _safe_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_safe_value(v) for v in value]
    return value


def _result(f, rule_index: dict[str, int], cause=None) -> dict:
    f = clean_finding(f)
    result = {"ruleId": _line(f.rule)}
    if f.rule in rule_index:
        result["ruleIndex"] = rule_index[f.rule]
    result.update({
        "kind": "fail",
        "level": _LEVEL.get(f.severity, "warning"),
        "message": {"text": _message(f, cause)},
        "analysisTarget": {"uri": _uri(f.trace)},
        "locations": [_location(f)],
        "partialFingerprints": {FINGERPRINT_KEY: _line(f.fingerprint)},
        "properties": _properties(f),
    })
    return result


def _instance_location(n: int, f) -> dict:
    f = clean_finding(f)
    location = {"id": n, **_location(f)}
    where = [f.scope or "-"]
    step = instance_step(f)
    if step:
        where.append(step)
    where.append(f.trace + (f", rank {f.rank}" if f.rank is not None else ""))
    cost = cost_text(f)
    if cost:
        where.append(cost)
    location["message"] = {"text": _line(f"instance {n + 1}: " + "; ".join(where))}
    return location


def _cause_result(cause, rule_index: dict[str, int]) -> dict:
    """One result per cause: its worst instance's, with the others counted, described and listed."""
    result = _result(cause.representative, rule_index, cause)
    if cause.count == 1:
        return result
    result["partialFingerprints"] = {FINGERPRINT_KEY: _line(min(f.fingerprint for f in cause.findings))}
    result["relatedLocations"] = [_instance_location(n, f) for n, f in enumerate(cause.findings[:MAX_RELATED])]
    result["properties"].update(_safe_value({
        "instances": cause.count, "scopes": cause.scopes, "steps": cause.steps, "ranks": cause.ranks,
        "traces": cause.traces,
        **({"deviceTimeUsTotal": finite_number(cause.device_us)} if cause.device_us is not None else {}),
        **({"bytesTotal": cause.bytes} if cause.bytes is not None else {}),
        **({"cost_us_total": finite_number(cause.cost.us)} if cause.cost is not None else {})}))
    return result


def _notifications(result: CheckResult, rule_index: dict[str, int]) -> list[dict]:
    found = []
    for report, outcome in result.incomplete:
        what = f"{outcome.rule} {outcome.name} could not be fully checked on {report.trace}"
        if outcome.reason:
            what += f": {outcome.reason}"
        note = {"level": "error", "message": {"text": _line(what)}}
        rule = {"id": _line(outcome.rule)}
        if outcome.rule in rule_index:
            rule["index"] = rule_index[outcome.rule]
        note["associatedRule"] = rule
        if report.ranks is None:   # a group of ranks is a label, not a file
            note["locations"] = [{"physicalLocation": _artifact(report.trace)}]
        note["properties"] = {"trace": _line(report.trace),
                              "damage": [_line(d) for d in getattr(report, "damage", None) or []]}
        found.append(note)
    for path, reason in result.unreadable:
        found.append({"level": "error",
                      "message": {"text": _line(f"{path} could not be read, so it was not checked: {reason}")},
                      "locations": [{"physicalLocation": _artifact(path)}]})
    for note in result.notes:
        found.append({"level": "note", "message": {"text": _line(note)}})
    # A baseline comparison's timing warnings (unknown timings, another GPU).
    found += [{"level": "warning", "message": {"text": _line(w)}} for w in timing_warnings(result)]
    return found


def _suppressed_result(s, rule_index: dict[str, int]) -> dict:
    """A suppressed finding, as SARIF keeps one: the result with its suppression (inline comments are in
    source; the suppressions file and [per-source-ignores] are external)."""
    item = _result(s.finding, rule_index)
    suppression = {"kind": "inSource" if s.how == "inline" else "external", "status": "accepted"}
    if s.reason:
        suppression["justification"] = _line(s.reason)
    item["suppressions"] = [suppression]
    return item


def to_dict(result: CheckResult) -> dict:
    rule_index = {rule.id: i for i, rule in enumerate(result.rules)}
    invocation = {
        # A check that found problems ran fine; one that could not check everything did not.
        "executionSuccessful": not result.incomplete and not result.unreadable,
        "exitCode": result.exit_code,
    }
    notifications = _notifications(result, rule_index)
    if notifications:
        invocation["toolExecutionNotifications"] = notifications
    driver = {"name": "kernlint", "version": __version__, "semanticVersion": __version__}
    uri = project_url()
    if uri:
        driver["informationUri"] = uri
    driver["rules"] = [_descriptor(rule) for rule in result.rules]
    return json_safe({
        "$schema": SARIF_SCHEMA,
        "version": SARIF_VERSION,
        "runs": [{
            "tool": {"driver": driver},
            "invocations": [invocation],
            "results": [_cause_result(cause, rule_index) for cause in causes_of(result)]
            + [_suppressed_result(s, rule_index) for s in getattr(result, "suppressed", [])],
            # Where each trace's device time goes (kernlint.trace.time_breakdown), as JSON's `traces[].time`.
            "properties": {"timeBreakdown": [_safe_value({"trace": r.trace, **r.time}) for r in result.reports
                                             if getattr(r, "time", None)]},
        }],
    })


# The labels of pyproject's [project.urls] (the installed package's Project-URL metadata) read as the
# project's home, in this order: its https URL is SARIF's `informationUri` and the base of each shipped rule's
# `helpUri` (`<url>/blob/main/docs/rules/KLnnn.md`). No such URL (the default: whoever publishes kernlint
# fills [project.urls]): both are left out, never a placeholder.
PROJECT_URL_LABELS = ("Homepage", "Repository", "Source", "Documentation")


@functools.cache
def project_url() -> str | None:
    """The project's home page from the installed package's metadata (pyproject's [project.urls]), if any."""
    from importlib import metadata

    try:
        urls = metadata.metadata("kernlint").get_all("Project-URL") or []
    except metadata.PackageNotFoundError:
        return None
    found = {label.strip().lower(): url.strip() for label, _, url in (u.partition(",") for u in urls)}
    for label in PROJECT_URL_LABELS:
        url = found.get(label.lower(), "")
        if url.startswith("https://"):
            return url
    return None


def render(result: CheckResult, ctx: RenderContext | None = None) -> str:
    return json.dumps(to_dict(result), indent=2, allow_nan=False) + "\n"


# What this format renders (kernlint.report.builtin_formats declares it).
RENDERER = Renderer(check=render)
