"""The one generic rule test: every case of every shipped rule (fixtures/cases/KL*.toml).

GPU cases replay traces recorded on the H200 (fixtures/traces/gpu); CPU cases record the fixture program
on the CPU torch here and check the fresh trace.
"""
from __future__ import annotations

import pytest

from conftest import FIXTURES
from kernlint.cases import evaluate_case, load_cases, sorted_for_loading
from kernlint.rules.loader import load_rules

CASES = load_cases(FIXTURES / "cases")
RULES = load_rules()


def test_every_shipped_rule_has_failing_and_passing_cases():
    """A rule needs a case it fails and one it passes. Improvement rules (KL805-KL807) never fail: they need
    a case with findings and one without."""
    for rule in RULES:
        cases = [c.spec for c in CASES if c.rule == rule.id]
        if "improvement" in rule.spec.tags:
            assert [c for c in cases if c.expect == "passed" and c.findings], f"{rule.id}: no case with findings"
            assert [c for c in cases if c.expect == "passed" and c.findings == 0], f"{rule.id}: no case without"
            continue
        expects = {c.expect for c in cases}
        assert {"failed", "passed"} <= expects, f"{rule.id} needs both bad (failed) and good (passed) cases"


def test_every_case_names_a_shipped_rule():
    ids = {r.id for r in RULES}
    assert all(c.rule in ids for c in CASES)


# In trace order: each recorded trace is read once for every rule whose cases replay it.
@pytest.mark.parametrize("case", sorted_for_loading(CASES), ids=[c.id for c in sorted_for_loading(CASES)])
def test_rule_case(case, program_trace):
    if case.spec.trace:
        trace = case.trace_path(FIXTURES)
        assert trace.exists(), f"missing recorded trace {trace}"
    else:
        trace = program_trace(case.spec.program)
    result = evaluate_case(case, trace, RULES, FIXTURES)
    assert result.ok, f"{case.id}: " + "; ".join(result.problems)
