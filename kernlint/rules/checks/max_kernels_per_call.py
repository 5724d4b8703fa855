"""max-kernels-per-call: each call of the named scope (an nn.Module such as an RMSNorm, a Python function)
launches at most `max` kernels; more is a chain of small kernels where one fused kernel would do.

A call is one instance of the rule's [scope] (outermost: a `_norm` frame inside an `RMSNorm` module is the
module's call). Counted (kernel level) are the kernels its thread launched while it ran, graph replays
aside; on a trace without device events (op level), its outermost working ops (an `aten::rms_norm` that runs
pow, mean and rsqrt inside itself on the CPU is one). One finding per call over the budget, at its first
launch, naming the launches by their ops; its cost is all of them (kernlint.rules.cost), the time a fused
kernel would mostly save: it does one pass over the tensor where the chain does one per kernel.
"""
from __future__ import annotations

import re

import numpy as np

from kernlint.rules.checks._cost_text import share_phrase
from kernlint.rules.checks.base import CheckKind, CheckSpec, make_finding, named_scopes, register
from kernlint.rules.cost import finding_cost
from kernlint.rules.result import decided, not_applicable
from kernlint.trace.names import without_module_prefix

_INSTANCE_NUMBER = re.compile(r"_\d+$")   # torch.profiler numbers module instances: `Qwen2RMSNorm_3`
_LISTED = 12   # launches named in a message


class MaxKernelsPerCall(CheckSpec, tag="max-kernels-per-call"):
    max: int
    advice: str = ""


def validate(rule):
    if rule.spec.check.max < 1:
        return "max-kernels-per-call: max must be 1 or more", ["check", "max"]
    return None


def _launches(index, scope, kernel_level: bool) -> np.ndarray:
    if kernel_level:
        rows = index.device_events_between(scope.thread, scope.ts, scope.end)
        return np.sort(rows[index.kind[rows] == "kernel"]) if len(rows) else rows
    ops = index.work_ops_between(scope.thread, scope.ts, scope.end)
    if not len(ops):
        return ops
    parent = index.parent_op[ops]
    safe = np.where(parent >= 0, parent, 0)
    outermost = (parent < 0) | (index.ts[safe] < scope.ts)
    return np.sort(ops[outermost])


def _label(index, row: int, scope) -> str:
    """A launch named by its outermost op inside the call (`to`, not the `copy_` it runs), else its short
    name."""
    op = int(index.op[row]) if index.kind[row] != "op" else row
    while op >= 0 and int(index.parent_op[op]) >= 0 and index.ts[index.parent_op[op]] >= scope.ts:
        op = int(index.parent_op[op])
    name = str(index.name[op]) if op >= 0 else str(index.short_name[row])
    return name.rpartition("::")[2]


def run(rule, table, index):
    scopes = named_scopes(index, rule)
    if not scopes:
        return not_applicable(rule, "no annotation, module, frame or op matches the rule's [scope]", absent=True)
    kernel_level = bool(table.has_device_events)
    what = "kernels" if kernel_level else "ops"
    c = rule.spec.check
    findings = []
    for scope in scopes:
        rows = _launches(index, scope, kernel_level)
        if len(rows) <= c.max:
            continue
        labels = [_label(index, int(r), scope) for r in rows[:_LISTED].tolist()]
        more = f", +{len(rows) - _LISTED}" if len(rows) > _LISTED else ""
        name = _INSTANCE_NUMBER.sub("", without_module_prefix(scope.name))
        cost = finding_cost(index, rows, scope=scope)
        message = (f"{name} runs as {len(rows)} {what} ({', '.join(labels)}{more}): {share_phrase(cost)}"
                   + (f"; {c.advice}" if c.advice else ""))
        findings.append(make_finding(rule, index, int(rows[0]), scope, message, None, event=name, cost=cost))
    return decided(rule, findings, "kernel" if kernel_level else "op", len(scopes))


register(CheckKind(
    type="max-kernels-per-call", spec=MaxKernelsPerCall, run=run, needs_scope=True, validate=validate,
    summary="Each call of the named scope (a norm module) launches at most `max` kernels (ops on CPU traces)."))
