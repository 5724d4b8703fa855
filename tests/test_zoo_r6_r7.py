"""The R6 (loop-invariant recompute) and R7 (launch budget) zoo workloads and check kinds, on the CPU."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from conftest import load_program
from kernlint.errors import RuleFileError
from rule_helpers import outcome, rule, shipped

ZOO = Path(__file__).resolve().parent.parent / "fixtures" / "zoo"
PROGRAMS = ["r6_27_rope_before", "r6_27_rope_after", "r7_28_moe_glue_before", "r7_28_moe_glue_after"]


@pytest.mark.parametrize("name", PROGRAMS)
def test_zoo_program_runs_and_documents_itself(name):
    module = load_program(f"zoo/{name}")
    doc = module.__doc__
    assert re.search(r"Zoo case \d+", doc) and ("BEFORE" in doc or "AFTER" in doc)
    assert "Expected verdicts" in doc and ('"cpu" and "cuda"' in doc)
    out1, out2 = module.build("cpu")(), module.build("cpu")()
    assert torch.equal(out1, out2)      # deterministic


@pytest.mark.parametrize("case", ["r6_27_rope", "r7_28_moe_glue"])
def test_before_and_after_compute_the_same(case):
    before = load_program(f"zoo/{case}_before").build("cpu")()
    after = load_program(f"zoo/{case}_after").build("cpu")()
    assert torch.allclose(before, after, rtol=1e-5, atol=1e-6)


# --- invariant-recompute -----------------------------------------------------------------------------------
def _rotary(seq):
    inv = 1.0 / (10000.0 ** (torch.arange(0, 32, 2, dtype=torch.float32) / 32))
    freqs = torch.outer(torch.arange(seq, dtype=torch.float32), inv)
    return freqs.cos(), freqs.sin()


class _Rope(nn.Module):
    def forward(self, seq):
        return _rotary(seq)


def test_same_chain_twice_is_flagged_once(record):
    rope = _Rope()
    trace = record(lambda: [rope(8) for _ in range(3)])
    o = outcome(trace, shipped("KL601"))
    assert o.status == "failed" and len(o.findings) == 1
    assert "computed 3 times" in o.findings[0].message and o.findings[0].event == "aten::arange"


def test_chain_with_other_sizes_is_not_a_recompute(record):
    rope = _Rope()
    trace = record(lambda: [rope(n) for n in (8, 9, 10)])   # a growing decode: each table is new
    assert outcome(trace, shipped("KL601")).status == "passed"


class _FromActivation(nn.Module):
    def forward(self, x):
        return (x * 2.0).pow(2).cos().sin()


def test_work_from_activations_is_not_a_chain(record):
    m = _FromActivation()
    x = torch.randn(8, 16)
    trace = record(lambda: [m(x) for _ in range(2)])     # same ops, same sizes, but no constant source
    o = outcome(trace, shipped("KL601"))
    assert o.status == "not-applicable" and not o.findings, [f.message for f in o.findings]
    assert o.reason.startswith("no chain of")


def test_one_call_is_not_applicable(record):
    rope = _Rope()
    trace = record(lambda: rope(8))
    assert outcome(trace, shipped("KL601")).status == "not-applicable"


def test_min_ops_is_honoured(tmp_path, record):
    rope = _Rope()
    trace = record(lambda: [rope(8) for _ in range(2)])
    strict = rule(tmp_path, """
        [check]
        type = "invariant-recompute"
        sources = "@invariant-source-op"
        ops = "@invariant-math-op"
        min-ops = 50
        """)
    o = outcome(trace, strict)   # the rope chain is too short for this rule: nothing to judge
    assert o.status == "not-applicable" and "no chain of 50 or more ops" in o.reason
    assert outcome(trace, shipped("KL601")).status == "failed"   # and long enough for the shipped one


def test_unknown_named_pattern_is_a_rule_file_error(tmp_path):
    with pytest.raises(RuleFileError, match="no pattern .@no-such-pattern. in the names table"):
        rule(tmp_path, """
            [check]
            type = "invariant-recompute"
            sources = "@no-such-pattern"
            ops = "@invariant-math-op"
            """)


# --- max-launches-between-gemms ----------------------------------------------------------------------------
class _Act(nn.Module):
    def forward(self, h):
        return (F.silu(h) * h + 1.0).clone().contiguous().neg()


class _Layer(nn.Module):
    def __init__(self, glue_in_child: bool):
        super().__init__()
        self.a, self.b, self.act = nn.Linear(16, 16), nn.Linear(16, 16), _Act()
        self.glue_in_child = glue_in_child

    def forward(self, x):
        h = self.a(x)
        h = self.act(h) if self.glue_in_child else (F.silu(h) * h + 1.0).clone().contiguous().neg()
        return self.b(h)


@pytest.mark.parametrize("in_child, status", [(False, "failed"), (True, "passed")])
def test_glue_of_child_modules_is_not_the_layers(record, in_child, status):
    layer = _Layer(in_child)
    x = torch.randn(4, 16)
    with torch.no_grad():
        trace = record(lambda: layer(x))
    o = outcome(trace, shipped("KL701"))
    assert o.status == status, [f.message for f in o.findings]
    if status == "failed":
        assert o.findings[0].scope == "module _Layer_0" and "5 elementwise/copy launches" in o.findings[0].message


def test_budget_comes_from_the_rule(tmp_path, record):
    layer = _Layer(False)
    x = torch.randn(4, 16)
    with torch.no_grad():
        trace = record(lambda: layer(x))
    loose = rule(tmp_path, """
        [check]
        type = "max-launches-between-gemms"
        max = 5
        """)
    assert outcome(trace, loose).status == "passed"


def test_no_gemm_pair_is_not_applicable(record):
    x = torch.randn(4, 16)
    trace = record(lambda: (x * 2).neg().exp())
    assert outcome(trace, shipped("KL701")).status == "not-applicable"
