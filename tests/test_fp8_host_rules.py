"""KL203, KL503, KL005: each finding says its measured cost and share in its message, and KL503's cost is the
host time of the pinned allocation (it launches nothing: 0 µs of device time would be wrong)."""
from __future__ import annotations

import re

import pytest

from conftest import FIXTURES
from kernlint.api import check

COSTLY = FIXTURES / "traces" / "gpu-costly"


@pytest.mark.parametrize("rule, trace", [
    ("KL203", "fp8-quant-then-transpose.pt.trace.json.gz"),
    ("KL503", "pin-memory-in-step.pt.trace.json.gz"),
    ("KL005", "dummy-init-random-scales.pt.trace.json.gz"),
])
def test_message_says_cost_and_share(rule, trace):
    result = check(COSTLY / trace, select=[rule])
    findings = [f for r in result.reports for f in r.findings if f.rule == rule]
    assert findings
    for f in findings:
        m = re.search(r"([\d.]+) µs [a-z ,]+?, ([\d.]+)% of the (step|scope)", f.message)
        assert m, f.message
        assert f.cost is not None and f.cost.us == pytest.approx(float(m.group(1)), abs=0.06)
        assert f.cost.share * 100 == pytest.approx(float(m.group(2)), abs=0.06)


def test_pinned_allocation_costs_its_host_time():
    result = check(COSTLY / "pin-memory-in-step.pt.trace.json.gz", select=["KL503"])
    findings = [f for r in result.reports for f in r.findings]
    assert [f.cost.basis for f in findings] == ["host time, no device work"] * 3
    assert max(f.cost.us for f in findings) > 1000   # the first step's pin_memory: 3 ms
