"""widening-cast: a cast (`aten::_to_copy`) from one of the listed dtypes to one of the listed wider ones,
of a large tensor, inside the named (hot) scopes (zoo family R3).

The cast's source dtype and shape are its first argument's `Input type` / `Input Dims`; the target dtype is
the ScalarType code `Concrete Inputs` holds. The output's bytes are its numel times the target's itemsize.
`.to()` to the dtype a tensor already has runs no `_to_copy`, so it is never counted. Not applicable on traces
without input shapes, and on traces with no cast between the listed dtypes at all (a pass would say nothing).
"""
from __future__ import annotations

import numpy as np

from kernlint.rules.checks.base import CheckKind, CheckSpec, make_finding, register
from kernlint.rules.evidence import ITEMSIZE, casts, numel, scoped_evidence
from kernlint.rules.fields import Dtypes
from kernlint.rules.result import RuleOutcome, decided, not_applicable


class WideningCast(CheckSpec, tag="widening-cast"):
    from_dtypes: Dtypes
    to_dtypes: Dtypes
    min_bytes: int = 0          # of the cast's output
    min_last_dim: int = 0       # of the cast tensor's last dimension (a vocabulary, not a hidden size)




def run(rule, table, index):
    found = scoped_evidence(rule, table, index)
    if isinstance(found, RuleOutcome):
        return found
    scopes, args = found
    c = rule.spec.check
    all_casts = casts(index, args)
    if not any(src in c.from_dtypes and to in c.to_dtypes for _, _, src, to in all_casts):
        return not_applicable(rule, f"no cast from {'/'.join(c.from_dtypes)} to {'/'.join(c.to_dtypes)} anywhere "
                                    "in the trace: nothing of the rule's kind to judge")
    wanted = [r for r, shape, src, to in all_casts
              if src in c.from_dtypes and to in c.to_dtypes
              and numel(shape) * ITEMSIZE.get(to, 4) >= c.min_bytes
              and (not c.min_last_dim or (shape and shape[-1] >= c.min_last_dim))]
    info = {r: (shape, src, to) for r, shape, src, to in all_casts}
    rows = np.array(wanted, dtype=np.int64)
    findings = []
    for scope in scopes:
        for r in index.rows_in_scope(scope, rows, key="ts").tolist():
            shape, src, to = info[r]
            nbytes = numel(shape) * ITEMSIZE.get(to, 4)
            findings.append(make_finding(
                rule, index, r, scope,
                f"{src} -> {to} cast of a tensor of shape {list(shape)} allocates {nbytes} B in {scope.label}",
                None, event=f"aten::_to_copy {src} -> {to} {list(shape)}"))
    return decided(rule, findings, "kernel" if table.has_device_events else "op", len(scopes))


register(CheckKind(
    type="widening-cast", spec=WideningCast, run=run, needs_scope=True,
    summary="No cast from the listed dtypes to the listed wider ones, of at least min-bytes, in the named scopes."))
