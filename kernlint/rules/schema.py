"""The rule file schema. One rule a TOML file; unknown keys are errors (with file and line).

A pattern that starts with `@` names an entry of the names table (kernlint.trace.names.NAMED_PATTERNS),
e.g. `kernel = "@act-quant-1x128-kernel"`; the loader expands it.

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
type = "forbid-before-anchor"     # a registered check kind (kernlint.rules.checks); each kind takes only
device-categories = []            # its own keys: see docs/rule-language.md (`kernlint explain --schema`)
op-categories = []

[docs]
what-it-does = "..."
why-is-this-bad = "..."
example = "..."
use-instead = "..."
references = ["..."]
```
"""
from __future__ import annotations

from typing import Annotated, Literal, Union

import msgspec

from kernlint.rules.checks import REGISTRY
from kernlint.rules.fields import OptionalPattern, Patterns
from kernlint.rules.severity import SEVERITY_ORDER, Severity

__all__ = ["AnchorSpec", "ScopeSpec", "DocsSpec", "RuleSpec", "Rule", "SEVERITY_ORDER", "Severity",
           "CheckUnion"]


class _Strict(msgspec.Struct, forbid_unknown_fields=True, rename="kebab", frozen=True):
    pass


class AnchorSpec(_Strict):
    kernel: OptionalPattern = None
    op: OptionalPattern = None


class ScopeSpec(_Strict):
    annotations: Patterns = []
    modules: Patterns = []
    frames: Patterns = []
    ops: Patterns = []
    # Range or frame names that mark a whole step (ProfilerStep#N, execute_model, decode_step). With
    # `when-absent = "profiled-window"`, a trace with none of them (or, when `steps` is empty, with none of
    # the scopes above) is checked over each thread's whole profiled window minus set-up code
    # (`setup-annotations` / `setup-frames`): what runs between the model's calls is in the step too. There a
    # finding inside one of the scopes above keeps the rule's severity; one outside them gets
    # `window-severity`, since the trace does not say whether it ran in a step or in set-up.
    steps: Patterns = []
    when_absent: Literal["not-applicable", "profiled-window"] = "not-applicable"
    window_severity: Severity = "warning"
    setup_annotations: Patterns = []
    setup_frames: Patterns = []
    # Set on the copy of a rule that runs on the profiled window; never written in a rule file.
    window: bool = False

    @property
    def is_named(self) -> bool:
        return bool(self.annotations or self.modules or self.frames or self.ops)


class MinCostSpec(_Strict):
    """[min-cost]: below `us` µs, or below `share` of the step, in every step, a cause is negligible
    (kernlint.rules.negligible); what is left out takes the configured or default value."""

    share: Annotated[float, msgspec.Meta(ge=0, le=1)] | None = None
    us: Annotated[float, msgspec.Meta(ge=0)] | None = None


class DocsSpec(_Strict):
    what_it_does: str
    why_is_this_bad: str
    example: str
    use_instead: str
    references: list[str] = []


# The [check] table: one tagged struct per registered check kind, told apart by `type`.
# Built from the registry at import time, so it cannot be written as `A | B | ...`.
CheckUnion = Union[tuple(kind.spec for kind in REGISTRY.values())]  # type: ignore[valid-type]  # noqa: UP007


class RuleSpec(_Strict):
    id: str
    name: str
    severity: Severity
    summary: str
    check: CheckUnion
    docs: DocsSpec
    anchor: AnchorSpec | None = None
    scope: ScopeSpec = ScopeSpec()
    requires_device: bool = False
    tags: list[str] = []
    # Severity follows cost: the rule's min-cost, or "none" for a rule whose findings keep their severity
    # whatever they cost (the mission's structural rules); None: the configured or default min-cost.
    min_cost: MinCostSpec | Literal["none"] | None = None


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
    def kind(self):
        return REGISTRY.get(self.spec.check.type)

    @property
    def cross_rank(self) -> bool:
        return self.kind.cross_rank

    @property
    def needs_baseline(self) -> bool:
        return self.kind.needs_baseline
