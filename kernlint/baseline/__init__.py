"""Baselines: what a program launched, allocated, synced and how long its kernels took, recorded once and
compared with later runs.

Layer: imports kernlint.trace only; the rules layer turns a BaselineComparison into findings. Names are
imported on first use, so that importing the small parts (kernlint.baseline.model, for the config's
thresholds) loads nothing else; scipy is imported only where timing samples are compared.
"""
from __future__ import annotations

import importlib

_WHERE = {
    "Baseline": "model", "ProgramProfile": "model", "Thresholds": "model", "SCHEMA_VERSION": "model",
    "BaselineComparison": "compare", "compare": "compare",
    "profile_program": "profile", "profile_traces": "profile",
    "read_baseline": "store", "render_baseline": "store", "write_baseline": "store",
    "build_baseline": "recording", "compare_with_baseline": "recording", "trace_environment": "recording",
}
__all__ = sorted(_WHERE)


def __getattr__(name: str):
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)
