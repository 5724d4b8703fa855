"""Helpers the rule tests share: a rule file written from a body, a shipped rule, one rule's outcome."""
from __future__ import annotations

import textwrap

from kernlint.rules.engine import check_trace
from kernlint.rules.loader import load_rules, parse_rule_file
from kernlint.trace.load import load_trace

DOCS = """
[docs]
what-it-does = "a"
why-is-this-bad = "b"
example = "c"
use-instead = "d"
"""


def rule_text(body: str, rid: str = "KL901", name: str = "test-rule") -> str:
    return f'id = "{rid}"\nname = "{name}"\nseverity = "error"\nsummary = "s"\n' + textwrap.dedent(body) + DOCS


def rule(tmp_path, body: str, rid: str = "KL901"):
    """A rule parsed from `body` (the tables after the header), written as tmp_path/<rid>.toml."""
    path = tmp_path / f"{rid}.toml"
    path.write_text(rule_text(body, rid))
    return parse_rule_file(path)


def shipped(rule_id: str):
    """A rule as shipped in rules/."""
    (found,) = [r for r in load_rules() if r.id == rule_id]
    return found


def outcome(trace, r):
    return check_trace(load_trace(trace), [r]).outcomes[0]
