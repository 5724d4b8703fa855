"""Data-flow edge cases of the R1/R2/R3 check kinds (dead-fill, redundant-materialization, contiguous-clone,
widening-cast, cast-round-trip) that rule cases cannot express: each test records a small CPU program with
`record` and checks one shipped rule's verdict and findings. The zoo before/after pairs themselves are rule
cases (fixtures/cases/KL1xx-KL3xx.toml)."""
from __future__ import annotations

import gzip
import json

import pytest
import torch

from kernlint.rules.engine import check_trace
from kernlint.rules.loader import load_rules
from kernlint.trace.load import load_trace

RULES = {r.id: r for r in load_rules()}


def verdict(path, rule_id):
    (outcome,) = check_trace(load_trace(path), [RULES[rule_id]]).outcomes
    return outcome


class Block(torch.nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *args):
        return self.fn(*args)


def in_module(fn, *args):
    block = Block(fn)

    def step():
        with torch.no_grad():
            return block(*args)
    return step


X = torch.randn(8, 64)


# --- R1 dead-fill ---------------------------------------------------------------------------------------
def _fill_then_copy(x):
    z = torch.zeros(8, 64)
    z.copy_(x)
    return z


def test_a_fill_overwritten_whole_is_flagged(record):
    out = verdict(record(in_module(_fill_then_copy, X)), "KL101")
    assert out.status == "failed" and len(out.findings) == 1
    assert out.findings[0].event == "aten::zeros -> aten::copy_"


def _fill_read_then_overwritten(x):
    z = torch.zeros(8, 64)
    y = z + x              # the zeros are read first
    z.copy_(x)
    return y, z


def test_a_fill_read_before_the_overwrite_is_not_flagged(record):
    assert verdict(record(in_module(_fill_read_then_overwritten, X)), "KL101").status == "passed"


def _fill_accumulated(x):
    acc = torch.zeros(8, 64)
    acc.add_(x)            # in-place accumulate reads the zeros
    return acc


def test_an_accumulator_fill_is_not_flagged(record):
    assert verdict(record(in_module(_fill_accumulated, X)), "KL101").status == "passed"


def _partial_overwrite(x):
    z = torch.zeros(8, 64)
    z[:4] = x[:4]          # half the buffer keeps its zeros
    return z


def test_a_partial_overwrite_is_not_flagged(record):
    assert verdict(record(in_module(_partial_overwrite, X)), "KL101").status == "passed"


def _column_overwrite(x):
    z = torch.zeros(8, 64)
    z[:, :32].copy_(x[:, :32])   # a strided view of the buffer: same shape never reaches copy_
    return z


def test_a_strided_partial_overwrite_is_not_flagged(record):
    assert verdict(record(in_module(_column_overwrite, X)), "KL101").status == "passed"


def _fill_of_other_shape_then_copy(x):
    z = torch.zeros(8, 32)
    w = torch.empty(8, 64)
    w.copy_(x)             # a different buffer is overwritten
    return z.sum() + w


def test_a_write_to_another_buffer_is_not_taken_for_the_fill(record):
    assert verdict(record(in_module(_fill_of_other_shape_then_copy, X)), "KL101").status == "passed"


def _fill_never_used(x):
    torch.zeros(8, 64)
    return x * 2


def test_an_unused_fill_is_not_called_dead_overwritten(record):
    assert verdict(record(in_module(_fill_never_used, X)), "KL101").status == "passed"


def _fill_then_out(x):
    out = torch.full((8, 64), 1.0)
    torch.mul(x, x, out=out)
    return out


def test_an_out_argument_write_is_a_full_overwrite(record):
    out = verdict(record(in_module(_fill_then_out, X)), "KL101")
    assert out.status == "failed" and out.findings[0].event == "aten::full -> aten::mul"


def _strip(path, tmp_path, drop):
    with gzip.open(path, "rt") as fh:
        data = json.load(fh)
    for e in data["traceEvents"]:
        if drop == "memory" and e.get("name") == "[memory]":
            e["name"] = "dropped"
            e["cat"] = "dropped"
        if drop == "shapes":
            for key in ("Input Dims", "Input type", "Input Strides", "Concrete Inputs"):
                e.get("args", {}).pop(key, None)
    if drop == "memory":
        data["traceEvents"] = [e for e in data["traceEvents"] if e.get("cat") != "dropped"]
        data.pop("profile_memory", None)
    if drop == "shapes":
        data.pop("record_shapes", None)
    out = tmp_path / f"no_{drop}.json"
    out.write_text(json.dumps(data))
    return out


@pytest.mark.parametrize("drop, reason", [("memory", "no \\[memory\\] events"), ("shapes", "no input shapes")])
def test_without_the_evidence_the_rule_is_not_applicable(record, tmp_path, drop, reason):
    import re
    path = _strip(record(in_module(_fill_then_copy, X)), tmp_path, drop)
    out = verdict(path, "KL101")
    assert out.status == "not-applicable" and re.search(reason, out.reason)


# --- R2 ------------------------------------------------------------------------------------------------
def _repeat_then_matmul(x):
    r = x.unsqueeze(0).repeat(4, 1, 1)       # consumed by a GEMM: not an elementwise broadcast
    return torch.bmm(r, r.transpose(1, 2))


def test_a_repeat_consumed_by_a_gemm_is_not_flagged(record):
    assert verdict(record(in_module(_repeat_then_matmul, X)), "KL201").status == "passed"


def _contiguous_of_contiguous(x):
    return torch.nn.functional.silu(x.contiguous())   # no copy at all


def test_contiguous_of_a_contiguous_tensor_is_not_flagged(record):
    # contiguous() of a contiguous tensor copies nothing: no copy to judge, and no finding
    o = verdict(record(in_module(_contiguous_of_contiguous, X)), "KL201")
    assert o.status == "not-applicable" and not o.findings and o.reason.startswith("no copy matching")


def _clone_of_transposed(x):
    return x.t().clone() * 2      # a strided source: the clone changes layout


def test_a_clone_of_a_strided_tensor_is_not_a_contiguous_clone(record):
    assert verdict(record(in_module(_clone_of_transposed, X)), "KL202").status == "passed"


# --- R3 ------------------------------------------------------------------------------------------------
LOGITS = torch.randn(4, 32768).to(torch.bfloat16)


def _same_dtype_to(x):
    return x.to(torch.bfloat16).sum()      # same dtype: no _to_copy, no kernel


def test_to_the_same_dtype_is_never_flagged(record):
    path = record(in_module(_same_dtype_to, LOGITS))
    for rule_id in ("KL301", "KL302"):   # `.to()` to its own dtype runs no cast: nothing of the kind to judge
        o = verdict(path, rule_id)
        assert o.status == "not-applicable" and "nothing of the rule's kind" in o.reason, o


def _small_upcast(x):
    return x[:, :1024].float().sum()       # hidden-sized, not vocabulary-sized


def test_a_hidden_sized_upcast_is_not_a_logits_upcast(record):
    assert verdict(record(in_module(_small_upcast, LOGITS)), "KL301").status == "passed"


BIG_LOGITS = torch.randn(8, 32768).to(torch.bfloat16)   # 1 MiB once in float32: KL301's min-bytes


def load_model():
    return BIG_LOGITS.float()


def test_an_upcast_in_set_up_code_is_not_a_finding(record):
    # No step in the trace: the whole window is checked, set-up frames (load_model) excepted.
    outcome = verdict(record(load_model), "KL301")
    assert outcome.status == "not-applicable" and "set-up code" in outcome.reason


def test_an_upcast_in_a_trace_without_steps_is_a_warning(record):
    outcome = verdict(record(lambda: BIG_LOGITS.float()), "KL301")
    assert outcome.status == "failed"
    assert [f.severity for f in outcome.findings] == ["warning"]
    assert outcome.findings[0].scope.startswith("the profiled window")


def _downcast_then_use(x):
    h = x.to(torch.bfloat16)
    y = h * 2                              # the bf16 copy is used before any cast back
    return y.float()


def test_a_cast_used_before_casting_back_is_not_a_round_trip(record):
    assert verdict(record(in_module(_downcast_then_use, X)), "KL302").status == "passed"
