"""forbid-temporary-alloc: no buffer of the listed dtypes allocated and freed inside the named scope."""
from __future__ import annotations

import numpy as np

from kernlint.rules.checks.base import CheckKind, CheckSpec, make_finding, named_scopes, register
from kernlint.rules.fields import Dtypes
from kernlint.rules.result import decided, not_applicable


class ForbidTemporaryAlloc(CheckSpec, tag="forbid-temporary-alloc"):
    dtypes: Dtypes
    min_bytes: int = 0


def run(rule, table, index):
    scopes = named_scopes(index, rule)
    if not scopes:
        return not_applicable(rule, "no annotation, module, frame or op matches the rule's [scope]", absent=True)
    check = rule.spec.check
    f = index.columns
    recorded = table.meta.profile_memory
    if recorded is False or (recorded is None and not len(index.rows_of(("alloc",)))):
        # Without memory events a temporary is invisible: say so rather than pass.
        return not_applicable(rule, "the trace has no [memory] events (record with profile_memory=True)",
                              absent=True)
    allocs = np.flatnonzero(index.is_kind("alloc") & (f["bytes"] >= max(check.min_bytes, 1)))
    wanted = set(check.dtypes)
    allocs = allocs[np.fromiter((d in wanted for d in f["dtype"][allocs].tolist()), dtype=bool, count=len(allocs))]
    paired = f["paired"]
    findings = []
    for scope in scopes:
        for r in index.rows_in_scope(scope, allocs, key="ts").tolist():
            free = paired[r]
            if free < 0 or not (index.ts[free] < scope.end):
                continue  # kept beyond the scope: that is the parameter itself, or a real output
            dtype, nbytes = f["dtype"][r], int(f["bytes"][r])
            findings.append(make_finding(rule, index, r, scope,
                                         f"temporary {dtype} buffer of {nbytes} bytes allocated and freed inside "
                                         f"{scope.label}", None, event=f"{dtype} temporary ({nbytes} B)"))
    return decided(rule, findings, None, len(scopes))


register(CheckKind(
    type="forbid-temporary-alloc", spec=ForbidTemporaryAlloc, run=run, needs_scope=True,
    summary="No buffer of the listed dtypes is allocated and freed inside the named scope."))
