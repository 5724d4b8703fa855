"""Rule files: the schema, errors with file and line, and --select / --ignore."""
from __future__ import annotations

import textwrap

import pytest

from kernlint.errors import ConfigError, RuleFileError
from kernlint.rules.loader import load_rules, parse_rule_file, select_rules
from kernlint.trace.names import named_pattern

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
    (('id = "KL900"', 'id = "X1"'), 1, "then three digits (KL001, ACME001)"),
    (('id = "KL900"', 'id = "9KL001"'), 1, "starts with a letter"),
    (('id = "KL900"', 'id = "ABCDEFGHI001"'), 1, "1 to 8 letters and digits"),
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
    body = GOOD.replace('type = "max-count"\nkinds = ["kernel"]\nmax = 3', 'type = "forbid-before-anchor"')
    path = _write(tmp_path, body)
    with pytest.raises(RuleFileError, match="needs an \\[anchor\\]"):
        parse_rule_file(path)


def test_a_key_of_another_check_type_is_an_error_with_its_line(tmp_path):
    """Each check type takes only its own keys: `max` means nothing to forbid-in-scope, and before the
    tagged schema it was silently accepted (and a typo'd type silently ran another check)."""
    path = _write(tmp_path, GOOD.replace('type = "max-count"', 'type = "forbid-in-scope"'))
    with pytest.raises(RuleFileError, match=r"KL900.toml:12: unknown key `max` in \[check\] \(check type "
                                            r"forbid-in-scope takes: .*kinds"):
        parse_rule_file(path)


def test_an_unknown_check_type_lists_the_known_ones(tmp_path):
    path = _write(tmp_path, GOOD.replace('type = "max-count"', 'type = "max-counts"'))
    with pytest.raises(RuleFileError, match=r"known check types: .*forbid-before-anchor.*max-count"):
        parse_rule_file(path)


def test_required_keys_of_a_check_type(tmp_path):
    path = _write(tmp_path, GOOD.replace("max = 3\n", ""))
    with pytest.raises(RuleFileError, match="missing required field `max`"):
        parse_rule_file(path)


def test_named_patterns_expand_and_unknown_names_are_errors(tmp_path):
    from kernlint.trace.names import named_pattern

    body = GOOD.replace('annotations = ["step"]', 'annotations = ["@dummy-weight-init-range"]')
    rule = parse_rule_file(_write(tmp_path, body))
    assert rule.spec.scope.annotations == [named_pattern("dummy-weight-init-range")]
    bad = _write(tmp_path, GOOD.replace('annotations = ["step"]', 'annotations = ["@no-such-entry"]'), "b.toml")
    with pytest.raises(RuleFileError, match=r"b.toml:7: scope.annotations: no pattern '@no-such-entry'"):
        parse_rule_file(bad)


def test_every_check_kind_is_registered_and_documented():
    """The registry drives the schema, and docs/rule-language.md (`kernlint explain --schema`) documents
    every kind and every key of it."""
    import msgspec

    from kernlint.rules.checks import REGISTRY
    from kernlint.rules.loader import rule_language_reference

    doc = rule_language_reference()
    assert set(REGISTRY.names()) >= {"forbid-before-anchor", "forbid-in-scope", "forbid-temporary-alloc", "max-count",
                             "require-anchor", "rank-divergence"}
    for kind in REGISTRY.values():
        assert f"`{kind.type}`" in doc, kind.type
        for f in msgspec.structs.fields(kind.spec):
            assert f"`{f.encode_name}`" in doc, (kind.type, f.encode_name)


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
    assert ids(["ALL"]) == sorted(shipped + ["KL900"])   # by id: KL900 sorts before the shipped KL901
    assert ids([]) == sorted(shipped + ["KL900"])
    assert ids(["KL00"]) == [i for i in shipped if i.startswith("KL00")] == [
        "KL001", "KL002", "KL003", "KL004", "KL005"]
    assert ids(["KL8"]) == [f"KL80{i}" for i in range(1, 9)]      # the baseline rules
    assert ids(["KL00"], ["KL003", "KL004"]) == ["KL001", "KL002", "KL005"]
    assert ids(["ALL"], ["KL900"]) == shipped
    assert ids(["fill-before-block-quant"]) == ["KL001"]
    with pytest.raises(ConfigError, match="matches no rule"):
        select_rules(rules, ["KL99"])


def test_an_empty_rules_folder_is_an_error_naming_it(tmp_path):
    folder = tmp_path / "my_rules"
    folder.mkdir()
    (folder / "README.md").write_text("rules go here")
    with pytest.raises(RuleFileError) as info:
        load_rules([folder])
    assert str(info.value).startswith(f"{folder}: ") and "*.toml" in str(info.value)


@pytest.mark.parametrize("table, line", [("[foo]\nx = 1", 20), ("[checks]\nx = 1", 20), ("[[foo]]\nx = 1", 20),
                                         ("[foo.bar]\nx = 1", 20)])
def test_an_unknown_top_level_table_has_its_line(tmp_path, table, line):
    path = _write(tmp_path, GOOD + "\n" + table + "\n")
    with pytest.raises(RuleFileError) as info:
        parse_rule_file(path)
    assert str(info.value).startswith(f"{path}:{line}: unknown key `"), str(info.value)


@pytest.mark.parametrize("value", ["[" * 10_000 + "]" * 10_000, "{ a = " * 10_000 + "1" + " }" * 10_000])
def test_deep_nesting_is_a_rule_file_error_not_a_traceback(tmp_path, value):
    path = _write(tmp_path, GOOD.replace('summary = "s"', f'summary = "s"\ndeep = {value}'))
    with pytest.raises(RuleFileError) as info:
        parse_rule_file(path)
    assert str(info.value).startswith(f"{path}: ") and "nested too deeply" in str(info.value)


def test_exclude_frames_patterns_are_checked_and_expanded_at_load(tmp_path):
    """exclude-frames was in no pattern list: a bad regex was an internal error at check time and `@name`
    was never expanded (issue 19). Now it is a RuleFileError with its line, and @names expand."""
    text = GOOD.replace('type = "max-count"\nkinds = ["kernel"]\nmax = 3',
                        'type = "forbid-sync-in-scope"\nop-categories = ["sync"]\nexclude-frames = ["(a)\\\\1"]')
    with pytest.raises(RuleFileError) as err:
        parse_rule_file(_write(tmp_path, text))
    assert err.value.line == 12 and "exclude-frames" in err.value.problem   # the exclude-frames line
    text = text.replace('exclude-frames = ["(a)\\\\1"]', 'exclude-frames = ["@zero-copy-tensor-frame"]')
    rule = parse_rule_file(_write(tmp_path, text))
    assert rule.spec.check.exclude_frames == [named_pattern("zero-copy-tensor-frame")]


def test_a_scope_preset_expands_to_its_table_and_an_unknown_one_is_an_error(tmp_path):
    """`scope = "@hot-step"` is the names table's [scope] preset (the hot-scope block 7 rules share)."""
    from kernlint.trace.names import SCOPE_PRESETS

    text = GOOD.replace('[scope]\nannotations = ["step"]\n', "").replace('summary = "s"\n',
                                                                      'summary = "s"\nscope = "@hot-step"\n')
    scope = parse_rule_file(_write(tmp_path, text)).spec.scope
    assert scope.annotations == [named_pattern("hot-scope-range")]
    assert scope.when_absent == SCOPE_PRESETS["hot-step"]["when-absent"] == "profiled-window"
    with pytest.raises(RuleFileError) as err:
        parse_rule_file(_write(tmp_path, text.replace("@hot-step", "@hot"), name="KL901.toml"))
    assert str(err.value).startswith(f"{tmp_path / 'KL901.toml'}:5: scope: '@hot' names no scope preset")


# -- issue 39: fields checked by their declared type ----------------------------------------------------------------

# (shipped rule file, its line, the line with one wrong value, the key, what the error says): one field of each
# value-set type a check kind declares (kernlint.rules.fields).
_WRONG_VALUES = [
    ("KL203.toml", 'device-categories = ["copy"]', 'device-categories = ["copy", "coppy"]', "device-categories",
     "unknown device category 'coppy'"),
    ("KL004.toml", 'op-categories = ["sync", "sync_op"]', 'op-categories = ["sync", "synk"]', "op-categories",
     "unknown op category 'synk'"),
    ("KL203.toml", 'until-categories = ["gemm"]', 'until-categories = ["gem"]', "until-categories",
     "unknown category 'gem'"),
    ("KL201.toml", 'consumer-categories = ["elementwise", "reduce"]', 'consumer-categories = ["elementwise", "*"]',
     "consumer-categories", "unknown op category '*'"),
    ("KL501.toml", 'kinds = ["memcpy"]', 'kinds = ["memcopy"]', "kinds", "unknown event kind 'memcopy'"),
    ("KL301.toml", 'to-dtypes = ["float32", "float64"]', 'to-dtypes = ["float32", "fp64"]', "to-dtypes",
     "unknown dtype 'fp64'"),
    ("KL005.toml", 'scale-dtypes = ["float32", "float8_e8m0fnu"]', 'scale-dtypes = ["float"]', "scale-dtypes",
     "unknown dtype 'float'"),
]


@pytest.mark.parametrize("name, line, wrong, key, problem", _WRONG_VALUES, ids=[w[3] for w in _WRONG_VALUES])
def test_a_wrong_value_of_a_declared_field_type_is_one_line_naming_file_and_key(tmp_path, name, line, wrong, key,
                                                                             problem):
    from conftest import REPO

    text = (REPO / "rules" / name).read_text()
    assert line in text, name
    path = tmp_path / name
    path.write_text(text.replace(line, wrong))
    number = text.splitlines().index(next(t for t in text.splitlines() if t.startswith(line))) + 1
    with pytest.raises(RuleFileError) as info:
        parse_rule_file(path)
    message = str(info.value)
    assert message.startswith(f"{path}:{number}: check.{key}: {problem} (known: "), message
    assert "\n" not in message


def test_every_value_set_field_of_the_kinds_is_declared_by_its_type():
    """What the loader checks is what the kinds declare: every category, kind and dtype field of a built-in kind
    is typed by a value set, so none is checked by its name alone (the four names the loader once listed)."""
    import msgspec

    from kernlint.rules.checks import REGISTRY
    from kernlint.rules.fields import value_set_fields

    for kind in REGISTRY.values():
        typed = {attr for attr, _, _ in value_set_fields(kind.spec)}
        assert typed >= {f.name for f in msgspec.structs.fields(kind.spec)
                         if f.name.endswith(("categories", "kinds", "dtypes"))}, kind.type
