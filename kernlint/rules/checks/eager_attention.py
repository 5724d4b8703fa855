"""eager-attention: a softmax over attention scores, [B, H, S, S] or [B*H, S, S] (the last two dimensions
equal and at least `min-seq`), computed eagerly: materialized by a matmul, normalized by a softmax op and
multiplied into the values by another matmul, where one fused attention kernel (SDPA, FlashAttention) reads
q, k and v once and never writes the scores.

The scores' shape is the softmax's first argument's `Input Dims`. The chain is tied from the softmax along
the top-level ops its thread issued in the same nn.Module (the same Python frame where no module is
recorded), at most `window` ops each way: the matmul before it that makes an [.., S, S] product (q @ k^T:
its first operand [.., S, D], its second [.., D, S]) and the matmul after it that reads [.., S, S] scores
(probs @ v); the ops between them (scaling, mask, dropout, casts) are part of the chain. A matmul that does
not fit ends the search on its side. The cost is the chain's (kernlint.rules.cost: its device time on GPU
traces, host time without device events); one finding per softmax op instance. Not applicable on traces
without shapes, and on traces with neither a softmax nor a fused attention op.
"""
from __future__ import annotations

import numpy as np

from kernlint.rules.checks._cost_text import share_phrase
from kernlint.rules.checks.base import CheckKind, CheckSpec, make_finding, register
from kernlint.rules.cost import finding_cost
from kernlint.rules.evidence import scoped_evidence, use_of, uses_by_thread
from kernlint.rules.fields import Pattern
from kernlint.rules.result import RuleOutcome, decided, not_applicable
from kernlint.trace.patterns import compile_pattern
from kernlint.trace.rows import rows_matching


class EagerAttention(CheckSpec, tag="eager-attention"):
    softmax_ops: Pattern
    matmul_ops: Pattern
    fused_ops: Pattern
    min_seq: int = 128
    window: int = 8


def validate(rule):
    c = rule.spec.check
    if c.min_seq < 2:
        return "eager-attention: min-seq must be 2 or more", ["check", "min-seq"]
    if c.window < 1:
        return "eager-attention: window must be 1 or more", ["check", "window"]
    return None


def _shape(args, row: int, i: int) -> tuple | None:
    a = args.get(row)
    t = a.tensor(i) if a is not None else None
    return t[0] if t is not None else None


def _operands(args, index, row: int) -> tuple[tuple | None, tuple | None]:
    """The two matrix operands of a matmul op (baddbmm's are its 2nd and 3rd arguments)."""
    first = 1 if str(index.name[row]).endswith("baddbmm") else 0
    return _shape(args, row, first), _shape(args, row, first + 1)


def _makes_scores(a, b, s: int) -> bool:   # q [.., S, D] @ k^T [.., D, S]
    return a is not None and b is not None and len(a) >= 2 and len(b) >= 2 and a[-2] == s and b[-1] == s


def _reads_scores(a, b, s: int) -> bool:   # probs [.., S, S] @ v [.., S, D]
    return a is not None and b is not None and len(a) >= 2 and len(b) >= 2 and a[-2:] == (s, s) and b[-2] == s


def _same_unit(index, x: int, y: int) -> bool:
    if int(index.module[x]) >= 0 or int(index.module[y]) >= 0:
        return int(index.module[x]) == int(index.module[y])
    return int(index.user_frame[x]) == int(index.user_frame[y])


def _chain(index, args, uses: np.ndarray, top: int, s: int, matmul, window: int) -> tuple[list[int], list[str]]:
    """The top-level ops of the eager attention around the softmax's top-level op `top`, and its parts."""
    at = int(np.flatnonzero(uses == top)[0])
    lo = hi = at
    parts = ["softmax"]
    for i in range(at - 1, max(at - 1 - window, -1), -1):
        r = int(uses[i])
        if not _same_unit(index, r, top):
            break
        if matmul.search(str(index.name[r])):
            if _makes_scores(*_operands(args, index, r), s):
                lo = i
                parts.insert(0, "q @ k^T")
            break
    for i in range(at + 1, min(at + 1 + window, len(uses))):
        r = int(uses[i])
        if not _same_unit(index, r, top):
            break
        if matmul.search(str(index.name[r])):
            if _reads_scores(*_operands(args, index, r), s):
                hi = i
                parts.append("probs @ v")
            break
    rows = [int(r) for r in uses[lo:hi + 1] if index.does_work[r]]
    return rows or [top], parts


def run(rule, table, index):
    found = scoped_evidence(rule, table, index)
    if isinstance(found, RuleOutcome):
        return found
    scopes, args = found
    c = rule.spec.check
    softmax_re = compile_pattern(c.softmax_ops)
    softmaxes = [r for r in rows_matching(index, ("op",), c.softmax_ops).tolist()
                 if not (int(index.parent_op[r]) >= 0 and softmax_re.search(str(index.name[index.parent_op[r]])))]
    fused = rows_matching(index, ("op",), c.fused_ops)
    if not softmaxes and not len(fused):
        return not_applicable(rule, "no softmax and no fused attention op in the trace: no attention to judge")
    square = {}
    for r in softmaxes:
        shape = _shape(args, r, 0)
        if shape is not None and len(shape) >= 3 and shape[-1] == shape[-2] >= c.min_seq:
            square[r] = shape
    if not square and not len(fused):
        # Softmax over other shapes (a classifier's [B, V] logits) is no attention: nothing to judge here.
        return not_applicable(rule, f"no attention in the trace: {len(softmaxes)} softmax op(s), none over "
                                    f"[.., S, S] scores with S >= {c.min_seq}, and no fused attention op")
    rows = np.array(sorted(square), dtype=np.int64)
    matmul = compile_pattern(c.matmul_ops)
    by_thread = uses_by_thread(index, args) if len(rows) else {}
    findings = []
    for scope in scopes:
        for r in index.rows_in_scope(scope, rows, key="ts").tolist():
            shape = square[r]
            top = use_of(index, args, r)
            uses = by_thread.get(index.thread[r])
            chain, parts = (_chain(index, args, uses, top, shape[-1], matmul, c.window)
                            if uses is not None and (uses == top).any() else ([top], ["softmax"]))
            cost = finding_cost(index, chain, scope=scope)
            message = (f"softmax over {list(shape)} attention scores (eager attention, {' + '.join(parts)}: "
                       f"{share_phrase(cost)}); use F.scaled_dot_product_attention")
            findings.append(make_finding(rule, index, r, scope, message, None, cost=cost))
    note = f"{len(fused)} fused attention ops" if len(fused) else None
    return decided(rule, findings, "kernel" if table.has_device_events else "op", len(scopes), note)


register(CheckKind(
    type="eager-attention", spec=EagerAttention, run=run, needs_scope=True, validate=validate,
    summary="No softmax over [.., S, S] attention scores (S >= min-seq) between the matmuls of eager attention."))
