"""require-anchor: every instance of the named scope holds an anchor."""
from __future__ import annotations

from kernlint.rules.anchors import find_anchors
from kernlint.rules.checks.base import CheckKind, CheckSpec, named_scopes, register
from kernlint.rules.result import Finding, decided, not_applicable
from kernlint.trace.names import pattern_label
from kernlint.trace.rows import inside_any


class RequireAnchor(CheckSpec, tag="require-anchor"):
    pass


def run(rule, table, index):
    scopes = named_scopes(index, rule)
    if not scopes:
        return not_applicable(rule, "no annotation, module, frame or op matches the rule's [scope]", absent=True)
    level, anchors = find_anchors(rule, table, index)
    findings = []
    for scope in scopes:
        if inside_any(index, [scope], anchors.tolist()):
            continue
        pattern = rule.spec.anchor.kernel if level != "op" and table.has_device_events else rule.spec.anchor.op
        source = index.source[scope.row] if scope.row >= 0 else None
        findings.append(Finding(
            rule=rule.id, name=rule.name, severity=rule.severity,
            message=f"{scope.label} has no event matching {pattern_label(pattern)}", trace=table.path,
            scope=scope.label,
            event=scope.name, event_kind=scope.kind, event_category="", launch_op=None, top_op=None,
            source=source if isinstance(source, str) else None, anchor=None, ts=scope.ts, rank=table.meta.rank))
    return decided(rule, findings, level, len(scopes))


register(CheckKind(
    type="require-anchor", spec=RequireAnchor, run=run, needs_anchor=True, needs_scope=True,
    summary="Every instance of the named scope holds an anchor."))
