"""Check kinds: one module each, registered on import (see base.py). Importing this package imports every
module in it, so adding a kind is adding a module; then every module another package names in the entry-point
group `kernlint.check_kinds` (`[project.entry-points."kernlint.check_kinds"] my-kind = "my_pkg.my_kind"`),
which registers its kinds the same way."""
from __future__ import annotations

import importlib
import pkgutil
from importlib.metadata import entry_points

from kernlint.errors import ConfigError
from kernlint.rules.checks.base import REGISTRY, CheckKind, CheckSpec

ENTRY_POINT_GROUP = "kernlint.check_kinds"

for _module in sorted(m.name for m in pkgutil.iter_modules(__path__)):
    if _module != "base":
        importlib.import_module(f"{__name__}.{_module}")

for _entry in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
    try:
        _entry.load()
    except Exception as exc:   # another package's bug: one line naming it, not a traceback
        raise ConfigError(None, f"check-kind plugin {_entry.name!r} ({_entry.value}) failed to load: "
                                f"{type(exc).__name__}: {exc}") from exc

__all__ = ["ENTRY_POINT_GROUP", "REGISTRY", "CheckKind", "CheckSpec"]
