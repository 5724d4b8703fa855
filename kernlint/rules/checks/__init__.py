"""Check kinds: one module each, registered on import (see base.py). Importing this package imports every
module in it, so adding a kind is adding a module."""
from __future__ import annotations

import importlib
import pkgutil

from kernlint.rules.checks.base import REGISTRY, CheckKind, CheckSpec

for _module in sorted(m.name for m in pkgutil.iter_modules(__path__)):
    if _module != "base":
        importlib.import_module(f"{__name__}.{_module}")

__all__ = ["REGISTRY", "CheckKind", "CheckSpec"]
