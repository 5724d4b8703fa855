"""costly-kernels: no kernel whose name matches `names` (work that only converts, such as cuDNN's layout
transforms) in the named scopes. One finding per launching top-level op (the kernels it launched summed),
whose message gives their device time's share of the step (kernlint.rules.cost), so that a reviewer sees
what the pattern costs, not only that it is there. Needs device events: not applicable on CPU traces.
"""
from __future__ import annotations

from kernlint.rules.checks._cost_text import share_phrase
from kernlint.rules.checks.base import CheckKind, CheckSpec, make_finding, named_scopes, register
from kernlint.rules.cost import finding_cost
from kernlint.rules.fields import Patterns
from kernlint.rules.result import decided, not_applicable
from kernlint.trace.rows import rows_matching


class CostlyKernels(CheckSpec, tag="costly-kernels"):
    names: Patterns
    # The ops the flagged kernels belong around (a convolution): with none of them and no flagged kernel in
    # the trace the rule has no subject, and is not applicable rather than a vacuous pass.
    subject_ops: Patterns = []
    advice: str = ""


def validate(rule):
    if not rule.spec.check.names:
        return "costly-kernels: names must hold at least one pattern", ["check", "names"]
    return None


def run(rule, table, index):
    if not table.has_device_events:
        return not_applicable(rule, "the trace has no device events: kernels cannot be judged")
    scopes = named_scopes(index, rule)
    if not scopes:
        return not_applicable(rule, "no annotation, module, frame or op matches the rule's [scope]", absent=True)
    c = rule.spec.check
    rows = rows_matching(index, ("kernel",), "|".join(f"(?:{p})" for p in c.names))
    if c.subject_ops and not len(rows) and not len(rows_matching(index, ("op",), "|".join(
            f"(?:{p})" for p in c.subject_ops))):
        return not_applicable(rule, "none of the ops these kernels surround in the trace (subject-ops): nothing "
                                    "to judge", absent=True)
    findings = []
    for scope in scopes:
        groups: dict[int, list[int]] = {}
        for r in index.rows_in_scope(scope, rows).tolist():
            top = int(index.top_op[r])
            groups.setdefault(top if top >= 0 else int(index.launcher[r]), []).append(r)
        for kernels in groups.values():
            first = kernels[0]
            op = int(index.op[first])
            around = f" around {index.name[op]}" if op >= 0 else ""
            names = ", ".join(dict.fromkeys(str(index.short_name[k]) for k in kernels))
            count = f"{len(kernels)} launches: " if len(kernels) > 1 else ""
            cost = finding_cost(index, kernels, scope=scope)
            message = (f"{names}{around} ({count}{share_phrase(cost)})" + (f"; {c.advice}" if c.advice else ""))
            findings.append(make_finding(rule, index, first, scope, message, None, cost=cost))
    return decided(rule, findings, "kernel", len(scopes))


register(CheckKind(
    type="costly-kernels", spec=CostlyKernels, run=run, needs_scope=True, validate=validate,
    summary="No kernel matching `names` in the named scopes; each launching op's share of device time named."))
