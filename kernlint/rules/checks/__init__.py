"""Check kinds: one module each, registering itself on import (see base.py). The kinds are a
kernlint.registry.Registry: its default plugins (base.DEFAULT_PLUGINS, this package's kind modules), then every
module another package names in the entry-point group `kernlint.check_kinds` (`[project.entry-points.
"kernlint.check_kinds"] my-kind = "my_pkg.my_kind"`), which registers its kinds the same way. They are all
loaded here, on import: the rule schema (kernlint.rules.schema) is the union of every kind's spec."""
from __future__ import annotations

from kernlint.rules.checks.base import REGISTRY, CheckKind, CheckSpec

ENTRY_POINT_GROUP = REGISTRY.group
REGISTRY.names()   # load the built-in kinds and the plugins' now

__all__ = ["ENTRY_POINT_GROUP", "REGISTRY", "CheckKind", "CheckSpec"]
