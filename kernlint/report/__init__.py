"""Output formats: one module each, chosen through the OutputFormat enum. Renderers return data
(a string, or rich renderables for the terminal); only the CLI writes it anywhere."""
from __future__ import annotations

from enum import Enum
from typing import Callable

from kernlint.report.model import CheckResult


class OutputFormat(str, Enum):
    TEXT = "text"
    JSON = "json"


def renderer(fmt: OutputFormat) -> Callable[[CheckResult], object]:
    from kernlint.report import json_format, text_format

    return {OutputFormat.TEXT: text_format.render, OutputFormat.JSON: json_format.render}[fmt]
