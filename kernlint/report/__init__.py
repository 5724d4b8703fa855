"""Output formats: one module each, chosen through the OutputFormat enum. Renderers return data
(a string, or rich renderables for the terminal); only the CLI writes it anywhere."""
from __future__ import annotations

from enum import Enum
from typing import Callable

from kernlint.report.model import CheckResult


class OutputFormat(str, Enum):
    TEXT = "text"
    JSON = "json"


def _module(fmt: OutputFormat):
    from kernlint.report import json_format, text_format

    return {OutputFormat.TEXT: text_format, OutputFormat.JSON: json_format}[fmt]


def renderer(fmt: OutputFormat) -> Callable[[CheckResult], object]:
    """The renderer of a check result in this format."""
    return _module(fmt).render


def audit_renderer(fmt: OutputFormat) -> Callable[[object], object]:
    """The renderer of an audit run (kernlint.audit.AuditRun) in this format."""
    return _module(fmt).render_audit


def replay_renderer(fmt: OutputFormat) -> Callable[[object], object]:
    """The renderer of a replay of recorded cases (kernlint.rules.cases.AuditResult) in this format."""
    return _module(fmt).render_replay
