"""Severities and their order (shared by the rule schema and the exit policy)."""
from __future__ import annotations

from typing import Literal

Severity = Literal["error", "warning", "info"]
SEVERITY_ORDER = {"info": 0, "warning": 1, "error": 2}
