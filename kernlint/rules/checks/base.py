"""What every check kind shares: the tagged spec base, the registry, and how a finding is made.

A check kind is one module in this package, listed in DEFAULT_PLUGINS, that defines a spec struct (a subclass
of CheckSpec with its own `tag`, holding only the keys that apply to it, each typed by what it holds:
kernlint.rules.fields) and calls `register(CheckKind(...))`. The rule schema
builds its `[check]` union from the registry, so a key that does not apply to a kind is an error with file
and line, and the engine dispatches through the registry, so no branch anywhere names a kind.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import msgspec

from kernlint.registry import Registry
from kernlint.rules.cost import DEVICE_TIME, per_run_cost
from kernlint.rules.cost import finding_cost as event_cost
from kernlint.rules.result import Finding, RuleOutcome
from kernlint.trace.graphs import graph_replays
from kernlint.trace.kinds import DEVICE_KINDS
from kernlint.trace.names import frame_parts
from kernlint.trace.patterns import compile_pattern
from kernlint.trace.scopes import WINDOW, Scope, ScopeIndex

if TYPE_CHECKING:
    from kernlint.rules.schema import Rule
    from kernlint.trace.table import EventTable


class CheckSpec(msgspec.Struct, tag_field="type", forbid_unknown_fields=True, rename="kebab", frozen=True):
    """Base of the `[check]` table of a rule file; each kind subclasses it with `tag="kind-name"`."""

    @property
    def type(self) -> str:
        return self.__struct_config__.tag


@dataclass(frozen=True)
class CheckKind:
    type: str
    spec: type[CheckSpec]
    summary: str
    # One trace: (rule, table, index) -> outcome. Cross-rank kinds use run_group instead.
    run: Callable[[Rule, EventTable, ScopeIndex], RuleOutcome] | None = None
    # The traces of one run -> outcome. run_group reads no table: its RunGroup's `tables` hold each rank's
    # rank_part (rule, table, index) -> a small picklable summary, made where the trace is loaded (a worker).
    run_group: Callable[[Rule, object], RuleOutcome] | None = None
    rank_part: Callable[[Rule, EventTable, ScopeIndex], object] | None = None
    # A candidate against a baseline (kernlint.baseline.BaselineComparison) -> outcome. Such rules run only
    # when a baseline is given.
    run_baseline: Callable[[Rule, object], RuleOutcome] | None = None
    # A baseline kind that judges which programs met (it runs even when none did, where the others cannot).
    judges_pairing: bool = False
    # A baseline kind: what its rule's findings say changed ("added", "removed", "slower", "faster",
    # "scratch"), from the rule's [check] (the report's baseline table; no list of rule ids elsewhere).
    baseline_change: Callable[[CheckSpec], str] | None = None
    needs_anchor: bool = False
    needs_scope: bool = False
    # Extra validation of a loaded rule: returns (problem, key path) or None.
    validate: Callable[[Rule], tuple[str, Sequence[str]] | None] | None = None

    @property
    def cross_rank(self) -> bool:
        return self.run_group is not None

    @property
    def needs_baseline(self) -> bool:
        return self.run_baseline is not None


# The built-in check kinds: kernlint's own plugins of the registry, one module each, loaded as an entry point's
# module is (each registers its kind on import). A new kind is its module and its line here
# (tests/test_plugins.py checks that every kind module of this package is listed).
DEFAULT_PLUGINS: tuple[str, ...] = (
    "kernlint.rules.checks.baseline_device_time",
    "kernlint.rules.checks.baseline_programs",
    "kernlint.rules.checks.baseline_scratch",
    "kernlint.rules.checks.baseline_sequence",
    "kernlint.rules.checks.cast_round_trip",
    "kernlint.rules.checks.contiguous_clone",
    "kernlint.rules.checks.costly_kernels",
    "kernlint.rules.checks.dead_fill",
    "kernlint.rules.checks.eager_attention",
    "kernlint.rules.checks.forbid_after_anchor",
    "kernlint.rules.checks.forbid_before_anchor",
    "kernlint.rules.checks.forbid_in_scope",
    "kernlint.rules.checks.forbid_temporary_alloc",
    "kernlint.rules.checks.host_sync_in_scope",
    "kernlint.rules.checks.invariant_recompute",
    "kernlint.rules.checks.launches_between_gemms",
    "kernlint.rules.checks.max_count",
    "kernlint.rules.checks.max_kernels_per_call",
    "kernlint.rules.checks.random_scale_init",
    "kernlint.rules.checks.rank_divergence",
    "kernlint.rules.checks.redundant_materialization",
    "kernlint.rules.checks.require_anchor",
    "kernlint.rules.checks.widening_cast",
)

# The check kinds by type: the default plugins, then the modules other packages name in the entry-point group
# `kernlint.check_kinds`.
REGISTRY: Registry[CheckKind] = Registry("check kind", "kernlint.check_kinds", default_plugins=DEFAULT_PLUGINS,
                                         summary=lambda k: k.summary)


def register(kind: CheckKind) -> CheckKind:
    if kind.spec.__struct_config__.tag != kind.type:
        raise ValueError(f"check kind {kind.type}: its spec's tag is {kind.spec.__struct_config__.tag!r}")
    return REGISTRY.register(kind.type, kind)


def named_scopes(index: ScopeIndex, rule: Rule) -> list[Scope]:
    """The instances of the rule's [scope]; for a rule running on the profiled window (the trace names none
    of its scopes, and the rule says `when-absent = "profiled-window"`), each thread's window minus set-up."""
    s = rule.spec.scope
    if s.window:
        return index.profiled_windows(s.setup_annotations, s.setup_frames)
    return index.named_scopes(s.annotations, s.modules, s.frames, s.ops)


def make_finding(rule: Rule, index: ScopeIndex, row: int, scope: Scope, message: str,
                 anchor: str | None, event: str | None = None, severity: str | None = None,
                 context: str | None = None, cost=None) -> Finding:
    """A finding on `row` in `scope`; `cost` when the check already measured it (kernlint.rules.cost)."""
    op = int(index.op[row]) if index.kind[row] != "op" else row
    top = int(index.top_op[row])
    source = index.source[row]
    if scope.kind == WINDOW:
        # On the profiled window, an event inside one of the rule's scopes is reported there, at the rule's
        # severity; one outside them at the window severity.
        unit = _rule_unit_of(index, rule, row)
        if unit is not None:
            message, scope = message.replace(scope.label, unit.label), unit
        elif severity is None:
            severity = rule.spec.scope.window_severity
    return Finding(
        rule=rule.id, name=rule.name, severity=severity or rule.severity, message=message,
        trace=index.table.path, scope=scope.label, event=event or str(index.short_name[row]),
        event_kind=str(index.kind[row]), event_category=str(index.category[row]),
        launch_op=str(index.name[op]) if op >= 0 else None,
        top_op=str(index.name[top]) if top >= 0 else None,
        source=source if isinstance(source, str) else None, anchor=anchor, ts=float(index.launch_ts[row]),
        rank=index.table.meta.rank, function=function_of(index, int(index.user_frame[row])),
        details=event_details(index, row), context=context,
        group=index.problem_group(row), **_own_time_and_bytes(index, row, cost),
        cost=cost if cost is not None else event_cost(index, row, scope=scope),
    )


def event_details(index: ScopeIndex, row: int) -> dict | None:
    """Where in the run an event ran, for telling a cause's instances apart (kernlint.rules.causes): its
    graph replay (replay_details) and the profiler step (`ProfilerStep#N`) it was issued in."""
    details = replay_details(index, row)
    step = index.profiler_step(row) if row >= 0 else None
    if step is not None:
        details = {**(details or {}), "step": step}
    return details


def replay_details(index: ScopeIndex, row: int) -> dict | None:
    """For an event replayed from a CUDA graph: which replay ran it (1-based, in time order), the capture it is
    attributed to (its label) or none, and whether it was attributed at all (else: kernel order only)."""
    replay = int(index.replay[row]) if row >= 0 else -1
    if replay < 0:
        return None
    attributed = bool(index.launcher[row] != replay)
    label = graph_replays(index.table).labels.get(replay) if attributed else None
    return {"graph_replay": index.replay_number(replay), "capture": label, "attributed": attributed}


def _rule_unit_of(index: ScopeIndex, rule: Rule, row: int) -> Scope | None:
    """The instance of the rule's own [scope] (a forward, a module) that the event ran in, if any."""
    s = rule.spec.scope
    key = ("rule-scopes", tuple(s.annotations), tuple(s.modules), tuple(s.frames), tuple(s.ops))
    cache = index.__dict__.setdefault("_scope_cache", {})
    units = cache.get(key)
    if units is None:
        units = cache[key] = index.named_scopes(s.annotations, s.modules, s.frames, s.ops)
    thread, at = index.thread[row], float(index.launch_ts[row])
    return next((u for u in units if u.thread == thread and u.ts <= at < u.end), None)


def _own_time_and_bytes(index: ScopeIndex, row: int, cost) -> dict:
    """device_time_and_bytes, with the device time of a cost the check measured over several rows."""
    own = device_time_and_bytes(index, row)
    if cost is not None and cost.basis == DEVICE_TIME and cost.us is not None:
        own["device_us"] = float(cost.us)
    return own


def device_time_and_bytes(index: ScopeIndex, row: int) -> dict:
    """What the event at `row` costs: a device event its own duration; an op or range the device time of
    everything launched on its thread while it ran, and the bytes allocated then; an allocation its bytes."""
    dur, nbytes = index.columns["dur"], index.columns["bytes"]
    kind = index.kind[row]
    if kind in DEVICE_KINDS:
        return {"device_us": float(dur[row]), "bytes": None}
    if kind in ("alloc", "free"):
        return {"device_us": None, "bytes": abs(int(nbytes[row]))}
    start, stop = float(index.ts[row]), float(index.end[row])
    thread = index.thread[row]
    launched = index.device_events_between(thread, start, stop)
    device_us = float(dur[launched].sum()) if index.table.has_device_events else None
    allocs = index.allocs_between(thread, start, stop)
    allocated = int(nbytes[allocs].clip(min=0).sum()) if len(allocs) else None
    return {"device_us": device_us, "bytes": allocated}


def function_of(index: ScopeIndex, frame_row: int) -> str | None:
    if frame_row < 0:
        return None
    return frame_parts(str(index.name[frame_row]))[2]


def baseline_finding(rule: Rule, comparison, program: str, message: str, *, trace: str, scope: str,
                     launch=None, device_us: float | None = None, bytes: int | None = None,
                     details: dict | None = None, improvement: bool = False, ts: float = float("nan"),
                     group: str | None = None) -> Finding:
    """A finding of a baseline comparison. `launch` (kernlint.baseline.model.Launch) names the event and
    the line that launched it; an improvement says how to refresh the baseline. `ts` and `group`: where the
    candidate issued the launch, so that another rule's finding on the same event shares its group."""
    from kernlint.baseline.identity import rank_of

    if improvement and comparison.refresh_command:
        message = f"{message}; refresh the baseline: {comparison.refresh_command}"
    rank = rank_of(program)
    return Finding(
        rule=rule.id, name=rule.name, severity=rule.severity, message=message, trace=trace, scope=scope or "",
        event=launch.name if launch is not None else scope or program, event_kind=launch.kind if launch else "",
        event_category=launch.category if launch else "", launch_op=(launch.op or None) if launch else None,
        top_op=None, source=(launch.source or None) if launch else None, anchor=None, ts=ts, rank=rank,
        device_us=device_us, bytes=bytes, details=details, group=group, cost=per_run_cost(device_us))


def under_frames(index, row: int, patterns: list[str], cache: dict[int, bool]) -> bool:
    """Whether a Python frame on the row's stack matches one of `patterns` (False without stacks)."""
    f, seen, verdict = int(index.frame_col[row]), [], False
    while f >= 0:
        known = cache.get(f)
        if known is not None:
            verdict = known
            break
        seen.append(f)
        if any(compile_pattern(p).search(str(index.name[f])) for p in patterns):
            verdict = True
            break
        f = int(index.frame_col[f])
    for x in seen:
        cache[x] = verdict
    return verdict
