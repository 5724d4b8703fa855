"""Folders of the source checkout that kernlint runs from, when it runs from one (an installed wheel has none).

Torch-free on purpose: `audit --replay` finds the recorded fixture traces here without the capture extra.
"""
from __future__ import annotations

from pathlib import Path

# fixtures/: the regressed workloads, the recorded traces and the rule cases beside them.
CHECKOUT_FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
