"""random-scale-init: no in-place random fill, inside the named scope (dummy weight init), of a tensor that is
an FP8 scale: of a scale dtype, and one element (a per-tensor scale, a calibration scalar) or a 2-D block grid
of an FP8 tensor initialized in the same scope instance (weights [N, K] -> scales [ceil(N/b), ceil(K/b)]).

Needs recorded shapes (record_shapes=True): a scale is told by its dtype and shape only."""
from __future__ import annotations

import msgspec
import numpy as np

from kernlint.rules.checks._cost_text import cost_phrase
from kernlint.rules.checks.base import CheckKind, CheckSpec, make_finding, named_scopes, register
from kernlint.rules.cost import finding_cost
from kernlint.rules.evidence import numel, op_args
from kernlint.rules.fields import Dtypes, Patterns
from kernlint.rules.result import decided, not_applicable
from kernlint.trace.patterns import compile_pattern

_FP8 = ("float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz")


class RandomScaleInit(CheckSpec, tag="random-scale-init"):
    ops: Patterns                        # the random fills (regexes or @names): their first argument is written
    scale_dtypes: Dtypes = msgspec.field(default_factory=lambda: ["float32", "float8_e8m0fnu"])
    fp8_dtypes: Dtypes = msgspec.field(default_factory=lambda: list(_FP8))
    block: int = 128                     # the side of a weight block that one scale covers


def _ceil_grid(shape: tuple, block: int) -> tuple:
    return tuple(-(-int(d) // block) for d in shape)


def _fp8_grids(index, args, ops: np.ndarray, fp8: set, block: int) -> dict[tuple, tuple]:
    """{block grid: the FP8 tensor's (dtype, shape)} of every 2-D FP8 tensor argument of these ops."""
    grids: dict[tuple, tuple] = {}
    for r in ops.tolist():
        found = args.get(r)
        if found is None:
            continue
        for i in range(len(found.types)):
            t = found.tensor(i)
            if t is not None and t[1] in fp8 and len(t[0]) == 2:
                grids.setdefault(_ceil_grid(t[0], block), (t[1], t[0]))
    return grids


def run(rule, table, index):
    scopes = named_scopes(index, rule)
    if not scopes:
        return not_applicable(rule, "no annotation, module, frame or op matches the rule's [scope]", absent=True)
    check = rule.spec.check
    args = op_args(table)
    if not args:
        return not_applicable(rule, "the trace has no input shapes (record with record_shapes=True): a scale "
                                    "is told from a weight by its dtype and shape", absent=True)
    patterns = [compile_pattern(p) for p in check.ops]
    ops = index.rows_of(("op",))
    random_ops = np.array([r for r in ops.tolist() if any(p.search(str(index.name[r])) for p in patterns)],
                          dtype=np.int64)
    scale_dtypes, fp8 = set(check.scale_dtypes), set(check.fp8_dtypes)
    findings = []
    for scope in scopes:
        mine = index.rows_in_scope(scope, ops, key="ts")
        randoms = index.rows_in_scope(scope, random_ops, key="ts") if len(random_ops) else random_ops
        grids = None
        for r in randoms.tolist():
            found = args.get(r)
            t = found.tensor(0) if found is not None else None
            if t is None or t[1] not in scale_dtypes:
                continue
            shape, dtype, _ = t
            dims = "x".join(str(d) for d in shape) or "scalar"
            if numel(shape) == 1:
                what = f"a one-element {dtype} [{dims}] scale (a per-tensor scale or calibration scalar)"
            elif len(shape) == 2:
                if grids is None:
                    grids = _fp8_grids(index, args, mine, fp8, check.block)
                weight = grids.get(tuple(shape))
                if weight is None:
                    continue
                wdims = "x".join(str(d) for d in weight[1])
                what = (f"a {dtype} [{dims}] block scale (the {check.block}x{check.block} block grid of the "
                        f"{weight[0]} [{wdims}] weight)")
            else:
                continue
            cost = cost_phrase(finding_cost(index, r, scope=scope))
            findings.append(make_finding(
                rule, index, r, scope, f"{index.short_name[r]} randomizes {what} in {scope.label}"
                + (f" ({cost})" if cost else "") + ": dequantized weights are garbage; fill scales with 1.0",
                None))
    return decided(rule, findings, "op", len(scopes))


register(CheckKind(
    type="random-scale-init", spec=RandomScaleInit, run=run, needs_scope=True,
    summary="No random fill, in the named scope, of a tensor that is an FP8 scale (one element, or the block "
            "grid of an FP8 weight initialized there)."))
