"""max-count: at most `max` events that pass the filter in each instance of the named scope."""
from __future__ import annotations

from kernlint.rules.checks.base import CheckKind, CheckSpec, make_finding, named_scopes, register
from kernlint.rules.fields import DeviceCategories, EventKinds, OpCategories, Patterns
from kernlint.rules.filters import needs_a_filter, scope_rows
from kernlint.rules.result import decided, not_applicable
from kernlint.trace.rows import EventFilter


class MaxCount(CheckSpec, tag="max-count"):
    max: int
    kinds: EventKinds = []
    names: Patterns = []
    device_categories: DeviceCategories = []
    op_categories: OpCategories = []
    nested: bool = False


def run(rule, table, index):
    scopes = named_scopes(index, rule)
    if not scopes:
        return not_applicable(rule, "no annotation, module, frame or op matches the rule's [scope]", absent=True)
    flt = EventFilter.of(rule.spec.check)
    limit = rule.spec.check.max
    findings = []
    for scope in scopes:
        rows = scope_rows(index, scope, flt, rule.spec.check.nested)
        if len(rows) > limit:
            findings.append(make_finding(rule, index, rows[limit], scope,
                                         f"{len(rows)} matching events in {scope.label}, at most {limit} allowed",
                                         None))
    return decided(rule, findings, "kernel" if table.has_device_events else "op", len(scopes))


register(CheckKind(
    type="max-count", spec=MaxCount, run=run, needs_scope=True, validate=needs_a_filter,
    summary="At most `max` events that pass the filter in each instance of the named scope."))
