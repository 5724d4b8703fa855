"""KL901-KL903 (family R9): each finding's cost is the whole pattern's (the eager attention chain, all of a
norm's kernels, all of an op's layout transforms), and its message states that cost's share of the step.
The verdicts themselves are rule cases (fixtures/cases/KL901.toml ...)."""
from __future__ import annotations

import re

import pytest

import kernlint
from conftest import REPO
from kernlint.trace.load import load_trace

GPU = REPO / "fixtures" / "traces" / "gpu-costly"


def _findings(name: str, rule: str):
    report = kernlint.check(str(GPU / name), select=[rule])
    return [f for f in report.findings if f.rule == rule]


def _kernel_us(name: str, pattern: str) -> float:
    table = load_trace(GPU / name)
    c = table.columns
    rows = [i for i in range(len(c["name"])) if c["kind"][i] == "kernel" and re.search(pattern, str(c["name"][i]))]
    return float(sum(float(c["dur"][i]) for i in rows))


@pytest.mark.parametrize("name, rule", [("eager-attention.pt.trace.json.gz", "KL901"),
                                        ("rmsnorm-unfused.pt.trace.json.gz", "KL902"),
                                        ("conv-nchw.pt.trace.json.gz", "KL903")])
def test_the_message_states_the_cost_share(name, rule):
    findings = _findings(name, rule)
    assert findings
    for f in findings:
        assert f.cost is not None and f.cost.share is not None and f.cost.basis == "device time"
        assert f.cost.of.endswith("'s device time") and f"{f.cost.share:.1%} of {f.cost.of}" in f.message


def test_eager_attention_costs_the_chain_not_only_the_softmax():
    findings = _findings("eager-attention.pt.trace.json.gz", "KL901")
    softmax_us = _kernel_us("eager-attention.pt.trace.json.gz", r"softmax") / len(findings)
    for f in findings:
        assert "q @ k^T + softmax + probs @ v" in f.message and "[2, 8, 1024, 1024]" in f.message
        assert f.cost.us > 1.5 * softmax_us   # the two matmuls are in it


def test_unfused_norm_names_its_kernels_and_costs_all_of_them():
    findings = _findings("rmsnorm-unfused.pt.trace.json.gz", "KL902")
    assert all("Qwen2RMSNorm runs as 8 kernels (to, pow, mean, add, rsqrt, mul, to, mul)" in f.message
               for f in findings)
    assert len({f.scope for f in findings}) == 4 and all(f.cost.us == f.device_us > 0 for f in findings)


def test_layout_transforms_cost_their_kernels_exactly():
    findings = _findings("conv-nchw.pt.trace.json.gz", "KL903")
    total = sum(f.cost.us for f in findings)
    assert total == pytest.approx(_kernel_us("conv-nchw.pt.trace.json.gz", r"nchwToNhwc|nhwcToNchw"))
    assert all("around aten::cudnn_convolution" in f.message for f in findings)
