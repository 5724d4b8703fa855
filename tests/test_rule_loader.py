"""Rule files: the schema, errors with file and line, and --select / --ignore."""
from __future__ import annotations

import textwrap

import pytest

from kernlint.errors import ConfigError, RuleFileError
from kernlint.rules.loader import load_rules, parse_rule_file, select_rules

GOOD = """\
id = "KL900"
name = "test-rule"
severity = "warning"
summary = "s"

[scope]
annotations = ["step"]

[check]
type = "max-count"
kinds = ["kernel"]
max = 3

[docs]
what-it-does = "a"
why-is-this-bad = "b"
example = "c"
use-instead = "d"
"""


def _write(tmp_path, text, name="KL900.toml"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def test_good_rule_parses(tmp_path):
    rule = parse_rule_file(_write(tmp_path, GOOD))
    assert (rule.id, rule.spec.check.type, rule.spec.check.max) == ("KL900", "max-count", 3)


@pytest.mark.parametrize("change, line, problem", [
    (("max = 3", "max = 3\nmaximum = 4"), 13, "unknown key `maximum` in [check]"),
    (('severity = "warning"', 'severity = "warning"\ncolour = "red"'), 4, "unknown key `colour`"),
    (('annotations = ["step"]', 'annotations = ["st(ep"]'), 7, "bad regular expression"),
    (('type = "max-count"', 'type = "max-cnt"'), 10, "schema error"),
    (('id = "KL900"', 'id = "X1"'), 1, "must be KL followed by three digits"),
    (('name = "test-rule"', 'name = "Test_Rule"'), 2, "kebab-case"),
    (('kinds = ["kernel"]', 'kinds = ["kernal"]'), 11, "unknown event kind"),
    (("max = 3", "max = = 3"), 12, "invalid TOML"),
])
def test_bad_rule_files_name_file_and_line(tmp_path, change, line, problem):
    path = _write(tmp_path, GOOD.replace(*change))
    with pytest.raises(RuleFileError) as info:
        parse_rule_file(path)
    message = str(info.value)
    assert message.startswith(f"{path}:{line}: "), message
    assert problem in message and "\n" not in message


def test_missing_docs_section_is_an_error(tmp_path):
    path = _write(tmp_path, GOOD.split("[docs]")[0])
    with pytest.raises(RuleFileError, match="docs"):
        parse_rule_file(path)


def test_check_needs_its_parts(tmp_path):
    path = _write(tmp_path, GOOD.replace('type = "max-count"', 'type = "forbid-before-anchor"'))
    with pytest.raises(RuleFileError, match="needs an \\[anchor\\]"):
        parse_rule_file(path)


def test_duplicate_ids_are_errors(tmp_path):
    _write(tmp_path, GOOD, "a.toml")
    _write(tmp_path, GOOD, "b.toml")
    with pytest.raises(RuleFileError, match="already defined"):
        load_rules([tmp_path], builtin=False)


def test_shipped_rules_load_and_have_docs():
    rules = load_rules()
    assert {"KL001", "KL002"} <= {r.id for r in rules}
    for r in rules:
        assert r.spec.docs.what_it_does.strip() and r.spec.docs.references


def test_select_and_ignore_take_ids_prefixes_names_and_all(tmp_path):
    _write(tmp_path, GOOD)
    rules = load_rules([tmp_path])
    ids = lambda sel, ign=(): [r.id for r in select_rules(rules, sel, ign)]  # noqa: E731
    shipped = [r.id for r in load_rules()]
    assert ids(["ALL"]) == shipped + ["KL900"]
    assert ids([]) == shipped + ["KL900"]
    assert ids(["KL00"]) == shipped
    assert ids(["KL00"], ["KL003", "KL004"]) == ["KL001", "KL002"]
    assert ids(["ALL"], ["KL9"]) == shipped
    assert ids(["fill-before-block-quant"]) == ["KL001"]
    with pytest.raises(ConfigError, match="matches no rule"):
        select_rules(rules, ["KL5"])
