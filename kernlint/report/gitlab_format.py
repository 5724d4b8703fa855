"""GitLab Code Quality report (`artifacts: reports: codequality`): a JSON array of issues, one per cause
(kernlint.rules.causes, as SARIF has them), each

    {"description", "check_name", "fingerprint", "severity", "location": {"path", "lines": {"begin"}}}

at the user Python line that launched it (`source`), or for a trace recorded without stacks at the trace file,
line 1. `check_name` is the rule id; `fingerprint` is the finding's fingerprint (kernlint.rules.fingerprint;
a cause of several instances: the smallest of theirs, as SARIF's partial fingerprint), so that GitLab
matches the same finding across pipelines.

Severity: GitLab has info, minor, major, critical and blocker. ruff reports every diagnostic as "major";
kernlint has three levels and keeps them apart: info -> info, warning -> major (ruff's level for a finding
that fails the check), error -> critical. blocker and minor are not used.

GitLab's format has no place for what could not be checked (unreadable traces, incomplete verdicts): the
exit code (4) and the other formats say it. Every string from a trace shows control characters visibly
(kernlint.report.safe).
"""
from __future__ import annotations

import json

from kernlint.report import RenderContext, Renderer
from kernlint.report.safe import printable
from kernlint.rules.causes import causes_of, describe_instances
from kernlint.rules.result import CheckResult, clean_finding
from kernlint.rules.sources import file_and_line

SEVERITY = {"info": "info", "warning": "major", "error": "critical"}


def _description(cause, f) -> str:
    where = f"{f.scope}; {f.trace}" + (f", rank {f.rank}" if f.rank is not None else "")
    if cause.count > 1:
        where = f"{describe_instances(cause)}; the worst: {where}"
    return printable(f"{f.rule} {f.name}: {f.message} [{where}]")


def _issue(cause) -> dict:
    f = clean_finding(cause.representative)
    at = file_and_line(f.source)
    path, line = at if at is not None else (f.trace, 1)
    return {"description": _description(cause, f), "check_name": printable(f.rule),
            "fingerprint": printable(min(clean_finding(x).fingerprint for x in cause.findings)),
            "severity": SEVERITY.get(f.severity, "major"),
            "location": {"path": printable(path), "lines": {"begin": int(line)}}}


def to_list(result: CheckResult) -> list[dict]:
    return [_issue(cause) for cause in causes_of(result)]


def render(result: CheckResult, ctx: RenderContext | None = None) -> str:
    return json.dumps(to_list(result), indent=2, ensure_ascii=False, allow_nan=False) + "\n"


# What this format renders (kernlint.report.builtin_formats declares it).
RENDERER = Renderer(check=render)
