"""The rule file schema. One rule a TOML file; unknown keys are errors (with file and line).

```toml
id = "KL001"                      # KL + three digits
name = "fill-before-block-quant"  # kebab-case, names the flagged pattern
severity = "error"                # error | warning | info
summary = "one line"
requires-device = false           # true: not applicable to traces without GPU events

[anchor]                          # forbid-before-anchor, require-anchor
kernel = "scale_1x128"            # regex searched in kernel names (traces with GPU events)
op = "^scale_1x128$"              # regex searched in op and record_function names (any trace)

[scope]                           # named scopes (regexes searched in names); omit for the anchor's scope
annotations = []
modules = []
frames = []                       # Python frames, named `path/file.py(line): function`
ops = []

[check]
type = "forbid-before-anchor"     # | forbid-in-scope | forbid-temporary-alloc | max-count | require-anchor
                                  # | rank-divergence (across the ranks of one distributed run)
device-categories = []            # device events (kernels, memcpy, memset) by category; ["*"] = any
op-categories = []                # ops by category, at op level (traces without GPU events)
kinds = []                        # event kinds (forbid-in-scope, max-count)
names = []                        # regexes searched in event names (forbid-in-scope, max-count)
dtypes = []                       # forbid-temporary-alloc
min-bytes = 0                     # forbid-temporary-alloc
max = 0                           # max-count

[docs]
what-it-does = "..."
why-is-this-bad = "..."
example = "..."
use-instead = "..."
references = ["..."]
```
"""
from __future__ import annotations

from typing import Literal

import msgspec

CheckType = Literal["forbid-before-anchor", "forbid-in-scope", "forbid-temporary-alloc", "max-count",
                    "require-anchor", "rank-divergence"]
CROSS_RANK_CHECKS = frozenset({"rank-divergence"})
Severity = Literal["error", "warning", "info"]
SEVERITY_ORDER = {"info": 0, "warning": 1, "error": 2}


class _Strict(msgspec.Struct, forbid_unknown_fields=True, rename="kebab", frozen=True):
    pass


class AnchorSpec(_Strict):
    kernel: str | None = None
    op: str | None = None


class ScopeSpec(_Strict):
    annotations: list[str] = []
    modules: list[str] = []
    frames: list[str] = []
    ops: list[str] = []

    @property
    def is_named(self) -> bool:
        return bool(self.annotations or self.modules or self.frames or self.ops)


class CheckSpec(_Strict):
    type: CheckType
    device_categories: list[str] = []
    op_categories: list[str] = []
    kinds: list[str] = []
    names: list[str] = []
    dtypes: list[str] = []
    min_bytes: int = 0
    max: int = 0


class DocsSpec(_Strict):
    what_it_does: str
    why_is_this_bad: str
    example: str
    use_instead: str
    references: list[str] = []


class RuleSpec(_Strict):
    id: str
    name: str
    severity: Severity
    summary: str
    check: CheckSpec
    docs: DocsSpec
    anchor: AnchorSpec | None = None
    scope: ScopeSpec = ScopeSpec()
    requires_device: bool = False
    tags: list[str] = []


class Rule(msgspec.Struct, frozen=True):
    """A loaded rule: its spec and where it came from."""

    spec: RuleSpec
    path: str

    @property
    def id(self) -> str:
        return self.spec.id

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def severity(self) -> str:
        return self.spec.severity

    @property
    def cross_rank(self) -> bool:
        return self.spec.check.type in CROSS_RANK_CHECKS
