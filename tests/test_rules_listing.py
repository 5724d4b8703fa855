"""`kernlint rules` groups the rules by family; `kernlint explain` names the family and the zoo cases."""
from __future__ import annotations

import json
import re

from click.testing import CliRunner

from kernlint.cli import main
from kernlint.rules.families import BY_KEY, FAMILIES, family_of, group_rules, id_span, zoo_cases
from kernlint.rules.loader import load_rules
from rule_helpers import rule

RULES = load_rules()
HEADER = re.compile(r"^(R\d \S.*|[a-z]+: .*) \((KL\dxx.*)\): ")


def run(*args):
    result = CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def test_every_shipped_rule_names_one_known_family():
    for r in RULES:
        tags = [t for t in r.spec.tags if t.startswith("family-")]
        assert len(tags) == 1, (r.id, r.spec.tags)
        assert tags[0][len("family-"):] in BY_KEY, (r.id, tags)
        assert family_of(r.spec.tags).key != "other", r.id


def test_every_zoo_case_a_rule_claims_is_a_failing_case_of_that_rule():
    """A rule's `zoo-N` tags are what `explain` says it covers: each must be backed by a case of the rule that
    reproduces zoo case N and that the rule fails."""
    from conftest import FIXTURES
    from kernlint.cases import load_cases

    failing: dict[str, set[int]] = {}
    for case in load_cases(FIXTURES / "cases"):
        if case.spec.expect == "failed" and case.zoo_case is not None:
            failing.setdefault(case.rule, set()).add(case.zoo_case)
    claimed = {r.id: set(zoo_cases(r.spec.tags)) for r in RULES}
    for rule_id, cases in claimed.items():
        assert cases <= failing.get(rule_id, set()), (rule_id, sorted(cases - failing.get(rule_id, set())))
    # The library covers at least 16 of zoo.md's 29 cases, and every family R1 to R7.
    covered = set().union(*claimed.values())
    assert len(covered) >= 16 and covered <= set(range(1, 30)), sorted(covered)
    families = {family_of(r.spec.tags).key for r in RULES if claimed[r.id]}
    assert {f"R{i}" for i in range(1, 8)} <= families, sorted(families)
    assert zoo_cases(["family-R6", "zoo-27", "zoo-13", "zoo-R6", "zoo-x"]) == [13, 27]


def test_text_listing_groups_in_family_order_and_lists_every_rule_once():
    out = run("rules")
    headers, seen, current = [], {}, None
    for line in out.splitlines():
        m = HEADER.match(line)
        if m:
            current = m.group(1)
            headers.append(current)
            continue
        ids = re.findall(r"^\s*(KL\d{3})\s", line)
        if ids:
            assert current is not None, line
            assert ids[0] not in seen, f"{ids[0]} listed twice"
            seen[ids[0]] = current
    assert set(seen) == {r.id for r in RULES}
    order = [f.label for f in FAMILIES]
    positions = [order.index(h) for h in headers]
    assert positions == sorted(positions) and len(set(positions)) == len(positions)
    for r in RULES:
        assert seen[r.id] == family_of(r.spec.tags).label, r.id


def test_header_shows_the_groups_ids():
    out = run("rules")
    for family, members in group_rules(RULES):
        assert f"{family.label} ({id_span([m.id for m in members])}): {family.line}" in out


def test_json_listing_has_family_and_zoo_cases():
    data = json.loads(run("rules", "--format", "json"))
    assert sorted(d["id"] for d in data) == sorted(r.id for r in RULES)
    by_id = {d["id"]: d for d in data}
    for r in RULES:
        assert by_id[r.id]["family"] == family_of(r.spec.tags).key
        assert by_id[r.id]["zoo_cases"] == zoo_cases(r.spec.tags)
    assert by_id["KL601"]["family"] == "R6" and 27 in by_id["KL601"]["zoo_cases"]
    assert by_id["KL701"]["family"] == "R7" and by_id["KL701"]["zoo_cases"] == [28]
    assert by_id["KL001"]["family"] == "R1" and by_id["KL801"]["family"] == "baseline"
    families = [d["family"] for d in data]
    order = [f.key for f in FAMILIES]
    assert [order.index(f) for f in families] == sorted(order.index(f) for f in families)


def test_explain_shows_family_and_zoo_cases():
    out = run("explain", "KL701")
    assert "Family: R7 launch budget per layer or per forward" in out
    assert "Zoo cases: 28\n" in out and "zoo.md" not in out   # the zoo's notes are not shipped: not cited
    out = run("explain", "invariant-recompute-every-call")
    assert "Family: R6 loop-invariant recompute" in out and "Zoo cases: 27\n" in out
    assert "Zoo cases: none" in run("explain", "KL801")


def test_a_rule_without_family_is_listed_under_other(tmp_path):
    extra = rule(tmp_path, """
        [scope]
        annotations = ["x"]
        [check]
        type = "forbid-in-scope"
        kinds = ["kernel"]
        """, rid="KL990")
    out = run("rules", "--rules", extra.path)
    assert "other: other rules (KL9xx, 1 rule)" in out
    assert json.loads(run("rules", "--rules", extra.path, "--format", "json"))[-1]["family"] == "other"


def test_id_span():
    assert id_span(["KL801", "KL802", "KL807"]) == "KL8xx, 3 rules"
    assert id_span(["KL001", "KL101"]) == "KL0xx, KL1xx, 2 rules"
    assert id_span(["KL601"]) == "KL6xx, 1 rule"
