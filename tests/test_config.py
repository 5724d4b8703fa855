"""Config files (kernlint.toml, pyproject.toml [tool.kernlint]): how they are found, what they may hold, how
they rank against flags, and that their mistakes are one line with file and line."""
from __future__ import annotations

import json
import os
import re
import textwrap
from pathlib import Path

import click
import msgspec
import pytest
from click.testing import CliRunner

from conftest import FIXTURES, REPO
from fresh_cli import run_fresh
from kernlint.config import (
    KEYS,
    THRESHOLD_KEYS,
    Thresholds,
    find_config,
    key_lines,
    load_config,
    resolve_config,
)
from kernlint.errors import ConfigError

REGRESSED = FIXTURES / "traces" / "gpu" / "placeholder_new_ones.pt.trace.json.gz"   # one KL001 finding (error)
CLEAN = FIXTURES / "traces" / "gpu" / "placeholder_new_empty.pt.trace.json.gz"


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


def invoke(*args):
    from kernlint.cli import main

    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def cli(*args, cwd):
    """`python -m kernlint ARGS` in a fresh process: what a shell sees, stdout and stderr apart."""
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return run_fresh(args, cwd=cwd, env=env, timeout=300)


def rule_ids(result) -> list[str]:
    """The rules a JSON report checked."""
    data = json.loads(result.stdout)
    return sorted({r["rule"] for t in data["traces"] for r in t["rules"]})


# -- finding the file ------------------------------------------------------------------------------------


def test_kernlint_toml_wins_over_pyproject_in_one_folder(tmp_path, monkeypatch):
    write(tmp_path / "pyproject.toml", '[tool.kernlint]\nfail-on = "info"\n')
    write(tmp_path / "kernlint.toml", 'fail-on = "error"\n')
    monkeypatch.chdir(tmp_path)
    config = resolve_config()
    assert config.path.name == "kernlint.toml" and config.values["fail-on"] == "error"
    assert config.table is None


def test_a_pyproject_without_the_table_is_passed_over_on_the_way_up(tmp_path, monkeypatch):
    write(tmp_path / "pyproject.toml", '[tool.kernlint]\nfail-on = "info"\n')
    child = tmp_path / "pkg" / "sub"
    write(child.parent / "pyproject.toml", '[project]\nname = "pkg"\n[tool.ruff]\nline-length = 99\n')
    child.mkdir()
    monkeypatch.chdir(child)
    config = resolve_config()
    assert config.path == tmp_path / "pyproject.toml" and config.table == "[tool.kernlint]"
    assert config.values == {"fail-on": "info"}


def test_the_nearest_file_wins_and_files_above_are_not_merged(tmp_path, monkeypatch):
    write(tmp_path / "kernlint.toml", 'fail-on = "info"\nexit-zero = true\n')
    write(tmp_path / "a" / "pyproject.toml", '[tool.kernlint]\nfail-on = "error"\n')
    monkeypatch.chdir(tmp_path / "a")
    config = resolve_config()
    assert config.path == tmp_path / "a" / "pyproject.toml" and config.values == {"fail-on": "error"}


def test_a_malformed_pyproject_is_read_only_when_it_may_concern_kernlint(tmp_path, monkeypatch):
    write(tmp_path / "pyproject.toml", "[project\nname = \n")
    monkeypatch.chdir(tmp_path)
    assert find_config(tmp_path) != tmp_path / "pyproject.toml"   # passed over, no error
    write(tmp_path / "pyproject.toml", "[tool.kernlint\nfail-on = 1\n")
    with pytest.raises(ConfigError, match=r"^pyproject.toml:1: invalid TOML"):
        resolve_config()


def test_no_file_and_isolated_give_the_defaults(tmp_path, monkeypatch):
    write(tmp_path / "kernlint.toml", 'fail-on = "info"\n')
    monkeypatch.chdir(tmp_path)
    isolated = resolve_config(isolated=True)
    assert isolated.path is None and isolated.values == {} and isolated.thresholds == Thresholds()
    assert "--isolated" in isolated.how
    with pytest.raises(ConfigError, match="cannot be combined"):
        resolve_config(tmp_path / "kernlint.toml", isolated=True)
    with pytest.raises(ConfigError, match="no such config file"):
        resolve_config(tmp_path / "nope.toml")


def test_an_explicit_pyproject_needs_the_table(tmp_path):
    path = write(tmp_path / "pyproject.toml", '[project]\nname = "x"\n')
    with pytest.raises(ConfigError, match=r"no \[tool.kernlint\] table"):
        load_config(path)


# -- what the file may hold ------------------------------------------------------------------------------


def test_values_are_converted_and_paths_taken_from_the_files_folder(tmp_path, monkeypatch):
    path = write(tmp_path / "proj" / "kernlint.toml", """\
        rules = ["my_rules", "/abs/rules"]
        select = ["kl0", " KL9 "]
        max-trace-bytes = "1.5G"
        output = "out/report.json"
        baseline = "perf/base.json"
        no-builtin = true

        [severity]
        kl002 = "info"

        [thresholds]
        alpha = 0.05
        min-runs = 3
        """)
    monkeypatch.chdir(tmp_path)   # elsewhere: the paths must not follow the working directory
    config = load_config(path, formats=["text", "json"])
    base = tmp_path / "proj"
    assert config.values["rules"] == (base / "my_rules", Path("/abs/rules"))
    assert config.values["select"] == ("kl0", "KL9")
    assert config.values["max-trace-bytes"] == 3 << 29
    assert config.values["output"] == base / "out" / "report.json"
    assert config.values["baseline"] == base / "perf" / "base.json"
    assert config.values["no-builtin"] is True
    assert config.severity == {"kl002": "info"}
    assert config.thresholds == Thresholds(alpha=0.05, min_effect=0.01, noise_multiple=3.0, min_runs=3)
    assert isinstance(config.thresholds.min_runs, int) and isinstance(config.thresholds.alpha, float)
    assert config.display == str(Path("proj") / "kernlint.toml")
    assert config.warnings == ()


def test_threshold_defaults():
    assert Thresholds() == Thresholds(alpha=0.01, min_effect=0.01, noise_multiple=3.0, min_runs=5)


@pytest.mark.parametrize("text, line, problem", [
    ('fail-on = "fatal"', 1, "fail-on: expected one of info, warning, error, got a string 'fatal'"),
    ("exit-zero = 1", 1, "exit-zero: expected true or false, got an integer"),
    ('select = "KL001"', 1, "select: expected an array of strings"),
    ('ignore = ["KL001", 3]', 1, "ignore: expected an array of strings"),
    ('rules = [""]', 1, "rules: an empty string"),
    ("output = 3", 1, "output: expected a path"),
    ('max-trace-bytes = "12Q"', 1, "max-trace-bytes: '12Q' is not a size"),
    ("max-trace-bytes = 0", 1, "max-trace-bytes: 0: the size must be above zero"),
    ('format = "html"', 1, "format: expected one of text, json"),
    ('\n\n[severity]\nKL001 = "fatal"', 4, "[severity] KL001: expected one of info, warning, error"),
    ("severity = 3", 1, "severity: expected a table"),
    ("[thresholds]\nalpha = 1.0", 2, "[thresholds] alpha: expected a number between 0 and 1"),
    ("[thresholds]\nalpha = 0", 2, "[thresholds] alpha"),
    ("[thresholds]\nalpha = nan", 2, "[thresholds] alpha"),
    ('[thresholds]\nmin-effect = "1%"', 2, "[thresholds] min-effect: expected a fraction above 0"),
    ("[thresholds]\nmin-effect = 0.0", 2, "[thresholds] min-effect"),
    ("[thresholds]\nnoise-multiple = -1", 2, "[thresholds] noise-multiple: expected a number above 0"),
    ("[thresholds]\nmin-runs = 1", 2, "[thresholds] min-runs: expected an integer of at least 2"),
    ("[thresholds]\nmin-runs = 5.0", 2, "[thresholds] min-runs"),
    ("[thresholds]\nmin-runs = true", 2, "[thresholds] min-runs"),
    ("thresholds = { alpha = 2 }", 1, "[thresholds] alpha"),
    ("fail-on = ", 1, "invalid TOML"),
    ('select = ["a"]\nselect = ["b"]', 2, "invalid TOML"),
])
def test_type_and_value_errors_name_file_and_line(tmp_path, monkeypatch, text, line, problem):
    write(tmp_path / "kernlint.toml", text + "\n")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path / "kernlint.toml", formats=["text", "json"])
    message = info.value.one_line()
    assert message.startswith(f"kernlint.toml:{line}: "), message
    assert problem in message and "\n" not in message


def test_the_lines_of_keys_in_a_pyproject_table(tmp_path, monkeypatch):
    write(tmp_path / "pyproject.toml", """\
        [project]
        name = "x"
        description = \"\"\"
        fail-on = "not a key"
        \"\"\"

        [tool.ruff]
        select = ["E"]

        [tool.kernlint]
        select = ["KL001"]
        "fail-on" = "fatal"
        """)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path / "pyproject.toml")
    assert info.value.one_line().startswith("pyproject.toml:12: fail-on: "), info.value.one_line()


def test_key_lines_read_dotted_quoted_and_inline_keys():
    lines = key_lines(textwrap.dedent("""\
        [tool . "kernlint"]
        severity.KL001 = "info"
        thresholds = { alpha = 0.1 }
        'odd key' = 1
        [tool.kernlint.severity]   # a comment
        "KL002" = "error"
        """))
    assert lines[("tool", "kernlint")] == 1
    assert lines[("tool", "kernlint", "severity", "KL001")] == 2
    assert lines[("tool", "kernlint", "thresholds")] == 3
    assert lines[("tool", "kernlint", "odd key")] == 4
    assert lines[("tool", "kernlint", "severity")] == 5
    assert lines[("tool", "kernlint", "severity", "KL002")] == 6


def test_unknown_keys_are_warnings_with_line_and_the_close_match(tmp_path, monkeypatch):
    write(tmp_path / "pyproject.toml", """\
        [tool.kernlint]
        fail-on = "error"
        selct = ["KL001"]
        fail_on = "info"
        colour = "red"

        [tool.kernlint.thresholds]
        alhpa = 0.1
        """)
    monkeypatch.chdir(tmp_path)
    config = load_config(tmp_path / "pyproject.toml")
    assert config.values == {"fail-on": "error"}   # the unknown keys change nothing
    messages = [w.one_line() for w in config.warnings]
    assert messages[0].startswith("pyproject.toml:3: unknown key 'selct' in [tool.kernlint]; did you mean "
                                  "'select'? (known: rules, no-builtin, select,"), messages
    assert messages[1].startswith("pyproject.toml:4: unknown key 'fail_on' in [tool.kernlint]; did you mean "
                                  "'fail-on'?")
    assert messages[2].startswith("pyproject.toml:5: unknown key 'colour' in [tool.kernlint] (known:")
    assert messages[3].startswith("pyproject.toml:8: unknown key 'alhpa' in [tool.kernlint.thresholds]; did you "
                                  "mean 'alpha'?")
    assert len(messages) == 4


def test_a_tool_table_in_kernlint_toml_gets_a_hint(tmp_path, monkeypatch):
    write(tmp_path / "kernlint.toml", '[tool.kernlint]\nfail-on = "error"\n')
    monkeypatch.chdir(tmp_path)
    (warning,) = load_config(tmp_path / "kernlint.toml").warnings
    assert warning.line == 1 and "takes its keys at the top level" in warning.problem


def test_every_key_is_documented():
    doc = (REPO / "docs" / "configuration.md").read_text()
    for key in [*KEYS, *THRESHOLD_KEYS]:
        assert f"`{key}`" in doc, key
    for _, flag in KEYS.values():
        if flag:
            assert f"`{flag}" in doc, flag
    defaults = Thresholds()
    for f in msgspec.structs.fields(Thresholds):   # each threshold's row gives its real default
        value = str(getattr(defaults, f.name))
        assert re.search(rf"\| `{f.encode_name}` \|[^\n]*\| `{re.escape(value)}` \|", doc), f.encode_name


# -- how the file ranks against the flags (through the CLI) ---------------------------------------------


def test_cli_flag_beats_config_beats_default(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert invoke("check", REGRESSED).exit_code == 1                       # default: fail on warning
    write(tmp_path / "kernlint.toml", "exit-zero = true\n")
    assert invoke("check", REGRESSED).exit_code == 0                       # config
    assert invoke("check", "--no-exit-zero", REGRESSED).exit_code == 1     # flag
    assert invoke("check", "--isolated", REGRESSED).exit_code == 1         # no config
    write(tmp_path / "kernlint.toml", '[severity]\nkl001 = "info"\n')
    assert invoke("check", REGRESSED).exit_code == 0                       # an info finding
    assert invoke("check", "--fail-on", "info", REGRESSED).exit_code == 1
    write(tmp_path / "kernlint.toml", 'fail-on = "info"\n[severity]\nfill-before-block-quant = "info"\n')
    assert invoke("check", REGRESSED).exit_code == 1
    assert invoke("check", "--fail-on", "error", REGRESSED).exit_code == 0


def test_severity_override_reaches_findings_and_the_rule_list(tmp_path, monkeypatch):
    write(tmp_path / "kernlint.toml", '[severity]\nKL001 = "warning"\n')
    monkeypatch.chdir(tmp_path)
    data = json.loads(invoke("check", "--format", "json", REGRESSED).stdout)
    assert [f["severity"] for f in data["findings"]] == ["warning"]
    listed = {r["id"]: r["severity"] for r in json.loads(invoke("rules", "--format", "json").stdout)}
    assert listed["KL001"] == "warning"
    assert "(warning)" in invoke("explain", "KL001").stdout.splitlines()[0]


def test_a_severity_key_that_names_no_rule_is_an_error_with_its_line(tmp_path, monkeypatch):
    write(tmp_path / "kernlint.toml", 'fail-on = "error"\n\n[severity]\nKL077 = "info"\n')
    monkeypatch.chdir(tmp_path)
    result = invoke("check", CLEAN)
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.startswith("kernlint: error: kernlint.toml:4: [severity] KL077: no rule 'KL077'")


@pytest.mark.parametrize("config", [
    '[tool.kernlint.per-source-ignores]\n"vendor/*.py" = ["KL801"]\n',
    '[tool.kernlint.per-source-ignores]\n"vendor/*.py" = ["KL401", "sync-added"]\n',
    '[tool.kernlint]\nignore = ["KL801"]\n',
    '[tool.kernlint]\nextend-select = ["KL8"]\n',
    '[tool.kernlint]\nselect = ["KL0", "KL801"]\n\n[tool.kernlint.severity]\nKL801 = "error"\n',
])
def test_config_that_names_baseline_rules_is_valid_in_a_check_without_a_baseline(tmp_path, monkeypatch, config):
    """The pre-commit hook runs `kernlint check` without --baseline: a pyproject that mentions KL8xx (the
    rules that compare with a baseline) must not make every such check exit 2."""
    write(tmp_path / "pyproject.toml", config)
    monkeypatch.chdir(tmp_path)
    for trace, code in ((REGRESSED, 1), (CLEAN, 0)):
        result = invoke("check", trace)
        assert result.exit_code == code, result.output
        assert result.stderr == ""


def test_per_source_ignores_may_name_a_rule_the_command_line_leaves_out(tmp_path, monkeypatch):
    write(tmp_path / "kernlint.toml", '[per-source-ignores]\n"vendor/*.py" = ["KL002"]\n')
    monkeypatch.chdir(tmp_path)
    assert invoke("check", "--select", "KL001", REGRESSED).exit_code == 1
    # A rule no file loads is still an error, before any trace is read.
    write(tmp_path / "kernlint.toml", '[per-source-ignores]\n"vendor/*.py" = ["KL899"]\n')
    result = invoke("check", tmp_path / "missing.json")
    assert result.exit_code == 2
    assert "kernlint.toml:2: [per-source-ignores] vendor/*.py: no rule 'KL899'" in result.stderr


def test_format_and_output_come_from_the_config_and_flags_override(tmp_path, monkeypatch):
    write(tmp_path / "kernlint.toml", 'format = "json"\noutput = "reports/out.json"\n')
    (tmp_path / "reports").mkdir()
    sub = tmp_path / "deep" / "er"
    sub.mkdir(parents=True)
    monkeypatch.chdir(sub)
    result = invoke("check", REGRESSED)
    assert result.exit_code == 1 and result.stdout == ""
    assert json.loads((tmp_path / "reports" / "out.json").read_text())["summary"]["findings"] == 1
    result = invoke("check", "--format", "text", "-o", "here.txt", REGRESSED)
    assert "KL001 fill-before-block-quant" in (sub / "here.txt").read_text()


def test_rules_paths_and_no_builtin_from_the_config(tmp_path, monkeypatch):
    from test_cli_habits import user_rule

    user_rule(tmp_path / "team_rules" / "acme.toml", "ACME001", "team-rule")
    write(tmp_path / "kernlint.toml", 'rules = ["team_rules"]\nno-builtin = true\n')
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path / "sub")
    assert [r["id"] for r in json.loads(invoke("rules", "--format", "json").stdout)] == ["ACME001"]
    ids = [r["id"] for r in json.loads(invoke("rules", "--builtin", "--format", "json").stdout)]
    assert "ACME001" in ids and "KL001" in ids
    assert "# ACME001 team-rule" in invoke("explain", "acme001").stdout


def test_selection_layers_follow_ruff(tmp_path, monkeypatch):
    write(tmp_path / "kernlint.toml", 'select = ["KL001", "KL002"]\nignore = ["KL002"]\nextend-select = ["KL003"]\n')
    monkeypatch.chdir(tmp_path)
    assert rule_ids(invoke("check", "--format", "json", CLEAN)) == ["KL001", "KL003"]
    # --extend-select and --ignore change the config's selection; --select replaces it
    assert rule_ids(invoke("check", "--format", "json", "--extend-select", "kl004", CLEAN)) == [
        "KL001", "KL003", "KL004"]
    assert rule_ids(invoke("check", "--format", "json", "--ignore", "KL003", CLEAN)) == ["KL001"]
    assert rule_ids(invoke("check", "--format", "json", "--select", "KL002", CLEAN)) == ["KL002"]
    # within a layer the more specific selector wins
    write(tmp_path / "kernlint.toml", 'select = ["KL001"]\nignore = ["KL0"]\n')
    assert rule_ids(invoke("check", "--format", "json", CLEAN)) == ["KL001"]


@pytest.mark.parametrize("config, args, needle", [
    ('\nselect = ["KL077"]\n', [], "kernlint.toml:2: select: selector 'KL077' matches no rule"),
    ('ignore = ["kl0"]\nextend-select = ["nope"]\n', [], "kernlint.toml:2: extend-select: selector 'nope'"),
    ('ignore = ["ALL"]\n', [], "leaves no rule to check"),
    ('select = []\n', [], "leaves no rule to check"),
    ("", ["--ignore", "ALL"], "leaves no rule to check"),
    ("", ["--select", "KL001", "--ignore", "KL001"], "leaves no rule to check"),
])
def test_a_selection_that_matches_no_rule_is_an_error(tmp_path, monkeypatch, config, args, needle):
    write(tmp_path / "kernlint.toml", config)
    monkeypatch.chdir(tmp_path)
    result = invoke("check", *args, CLEAN)
    assert result.exit_code == 2 and result.stdout == "", result.output
    (line,) = result.stderr.splitlines()
    assert line.startswith("kernlint: error: ") and needle in line, line


def test_warnings_go_to_stderr_and_json_stays_valid(tmp_path):
    write(tmp_path / "pyproject.toml", '[tool.kernlint]\nformat = "json"\nselct = ["KL001"]\n')
    proc = cli("check", REGRESSED, cwd=tmp_path)
    assert proc.returncode == 1
    assert json.loads(proc.stdout)["summary"]["findings"] == 1
    assert proc.stderr.splitlines() == [
        "kernlint: warning: pyproject.toml:3: unknown key 'selct' in [tool.kernlint]; did you mean 'select'? "
        "(known: rules, no-builtin, select, extend-select, ignore, fail-on, allow-incomplete, max-trace-bytes, "
        "format, output, exit-zero, baseline, severity, thresholds, per-source-ignores, source-root, path-map, "
        "min-cost, exclude)"]   # min-cost: the [min-cost] table of issue 37; exclude: issue 41


@pytest.mark.parametrize("name, text, needle", [
    ("kernlint.toml", 'fail-on = "error"\nselect = [KL001]\n', "kernlint.toml:2: invalid TOML: "),
    ("pyproject.toml", '[tool.kernlint]\nmax-trace-bytes = "lots"\n', "pyproject.toml:2: max-trace-bytes: "),
])
def test_a_bad_config_is_one_line_exit_2_without_a_traceback(tmp_path, name, text, needle):
    write(tmp_path / name, text)
    proc = cli("check", CLEAN, cwd=tmp_path)
    assert proc.returncode == 2 and proc.stdout == ""
    (line,) = proc.stderr.splitlines()
    assert line.startswith("kernlint: error: ") and needle in line, line
    # --isolated reads no file; --help reads none either
    assert cli("check", "--isolated", CLEAN, cwd=tmp_path).returncode == 0
    assert cli("check", "--help", cwd=tmp_path).returncode == 0


def test_explicit_config_and_verbose_says_which(tmp_path, monkeypatch):
    write(tmp_path / "kernlint.toml", 'fail-on = "info"\n')
    write(tmp_path / "ci" / "strict.toml", 'exit-zero = true\n')
    monkeypatch.chdir(tmp_path)
    result = invoke("check", "-v", "--config", "ci/strict.toml", REGRESSED)
    assert result.exit_code == 0
    assert f"kernlint: config: {Path('ci') / 'strict.toml'} (given with --config); sets exit-zero" in result.stderr
    result = invoke("check", "-v", REGRESSED)
    assert "kernlint: config: kernlint.toml (found from the working directory upward); sets fail-on" in \
        result.stderr
    assert "config files ignored (--isolated)" in invoke("check", "-v", "--isolated", CLEAN).stderr
    result = invoke("check", "--config", "missing.toml", CLEAN)
    assert result.exit_code == 2 and "missing.toml: no such config file" in result.stderr
    result = invoke("check", "--config", "kernlint.toml", "--isolated", CLEAN)
    assert result.exit_code == 2 and "cannot be combined" in result.stderr


def test_an_option_added_later_picks_up_its_key(tmp_path, monkeypatch):
    """An option named after a key (`--baseline` was added after the config) gets the config's value, taken
    from the config's folder, and the flag still wins."""
    from kernlint.cli.options import ConfiguredCommand, check_options

    seen = {}

    @click.command(cls=ConfiguredCommand)
    @check_options
    def probe(**params):
        seen.update(params)

    write(tmp_path / "kernlint.toml", 'baseline = "perf/base.json"\n')
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path / "sub")
    assert CliRunner().invoke(probe, []).exit_code == 0
    assert seen["baseline"] == tmp_path / "perf" / "base.json"
    assert CliRunner().invoke(probe, ["--baseline", "mine.json"]).exit_code == 0
    assert seen["baseline"] == Path("mine.json")


def test_a_folder_named_kernlint_toml_is_an_error_not_passed_over(tmp_path):
    (tmp_path / "kernlint.toml").mkdir()
    trace = FIXTURES / "traces" / "gpu" / "placeholder_new_empty.pt.trace.json.gz"
    proc = cli("check", trace, cwd=tmp_path)
    assert proc.returncode == 2 and proc.stdout == "", proc.stdout
    assert proc.stderr.strip() == "kernlint: error: kernlint.toml: not a file: a config file must be a TOML file"


def test_a_folder_that_cannot_be_searched_is_one_config_error(tmp_path, monkeypatch):
    """Unreadable parents (as root, permissions do not apply: the refusal is simulated)."""
    locked = tmp_path / "locked"
    inner = locked / "work"
    inner.mkdir(parents=True)
    real_is_file = Path.is_file

    def is_file(self):
        if self.parent == locked:
            raise PermissionError(13, "Permission denied", str(self))
        return real_is_file(self)

    monkeypatch.setattr(Path, "is_file", is_file)
    with pytest.raises(ConfigError) as info:
        find_config(inner)
    assert info.value.path == str(locked)
    assert "cannot be searched for kernlint.toml (permission denied)" in str(info.value)
