"""The command-line conventions of ruff and other linters (issue 41, item 4): --output-format and -V, --color
with NO_COLOR / FORCE_COLOR, GitLab Code Quality output, --exclude and .gitignore-aware discovery,
--stdin-filename, --show-settings, family and tag selectors, and a `kernlint rules` table that never cuts an id
or a name at 80 columns."""
from __future__ import annotations

import io
import json
import shutil
import subprocess

import pytest
from click.testing import CliRunner
from rich.console import Console

from conftest import FIXTURES
from kernlint.cli import main
from kernlint.config import Config, configured_rules
from kernlint.rules.families import group_rules

REGRESSED = FIXTURES / "traces" / "gpu" / "placeholder_new_ones.pt.trace.json.gz"   # one KL001 finding
CLEAN = FIXTURES / "traces" / "gpu" / "placeholder_new_empty.pt.trace.json.gz"      # KL001 passes
ONLY_KL001 = ("--isolated", "--select", "KL001")
ESC = "\x1b["


def invoke(*args, env=None, input=None):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False, env=env, input=input)


# -- 1. --output-format, -V -------------------------------------------------------------------------------


def test_output_format_is_format_and_dash_v_is_version():
    by_alias = invoke("check", REGRESSED, *ONLY_KL001, "--output-format", "json")
    by_name = invoke("check", REGRESSED, *ONLY_KL001, "--format", "json")
    assert by_alias.exit_code == by_name.exit_code == 1
    assert json.loads(by_alias.output)["summary"] == json.loads(by_name.output)["summary"]
    assert json.loads(invoke("rules", "--isolated", "--output-format", "json").output)
    version = invoke("-V")
    assert version.exit_code == 0 and version.output == invoke("--version").output
    assert version.output.startswith("kernlint, version ")


# -- 2. --color, NO_COLOR, FORCE_COLOR ------------------------------------------------------------------------


@pytest.mark.parametrize(("args", "env", "coloured"), [
    ((), {"NO_COLOR": None, "FORCE_COLOR": None}, False),          # a pipe: plain
    (("--color", "always"), {"NO_COLOR": None, "FORCE_COLOR": None}, True),
    ((), {"FORCE_COLOR": "1", "NO_COLOR": None}, True),            # force-color.org
    ((), {"FORCE_COLOR": "1", "NO_COLOR": "1"}, False),           # no-color.org wins over it
    (("--color", "always"), {"NO_COLOR": "1", "FORCE_COLOR": None}, True),   # the flag over both
    (("--color", "never"), {"FORCE_COLOR": "1", "NO_COLOR": None}, False),
    ((), {"FORCE_COLOR": "", "NO_COLOR": None}, False),            # empty: not set
])
def test_color_into_a_pipe_when_asked(args, env, coloured):
    check = invoke("check", REGRESSED, *ONLY_KL001, *args, env=env)
    assert check.exit_code == 1
    assert (ESC in check.output) is coloured
    listing = invoke("rules", "--isolated", *args, env=env)
    assert (ESC in listing.output) is coloured
    # Before the command, as a global option, too.
    assert (ESC in invoke(*args, "rules", "--isolated", env=env).output) is coloured


def test_color_never_reaches_an_output_file(tmp_path):
    out = tmp_path / "report.txt"
    assert invoke("check", REGRESSED, *ONLY_KL001, "--color", "always", "-o", out).exit_code == 1
    assert ESC not in out.read_text() and "KL001" in out.read_text()


# -- 3. GitLab Code Quality -----------------------------------------------------------------------------------


def test_gitlab_code_quality_fields():
    done = invoke("check", REGRESSED, *ONLY_KL001, "--format", "gitlab")
    assert done.exit_code == 1
    issues = json.loads(done.output)
    assert isinstance(issues, list) and len(issues) == 1
    for issue in issues:
        assert set(issue) == {"description", "check_name", "fingerprint", "severity", "location"}
        assert issue["check_name"] == "KL001" and issue["description"].startswith("KL001 ")
        assert issue["severity"] in {"info", "minor", "major", "critical", "blocker"}
        assert issue["severity"] == "critical"            # KL001 is an error
        assert isinstance(issue["fingerprint"], str) and issue["fingerprint"]
        assert set(issue["location"]) == {"path", "lines"}
        assert issue["location"]["path"] == "fixtures/regressed/fp8_linear_new_ones.py"
        assert isinstance(issue["location"]["lines"]["begin"], int) and issue["location"]["lines"]["begin"] >= 1
    again = json.loads(invoke("check", REGRESSED, *ONLY_KL001, "--format", "gitlab").output)
    assert [i["fingerprint"] for i in again] == [i["fingerprint"] for i in issues]   # stable across runs
    assert json.loads(invoke("check", CLEAN, *ONLY_KL001, "--format", "gitlab").output) == []


def test_gitlab_severity_mapping():
    from kernlint.report.gitlab_format import SEVERITY

    assert SEVERITY == {"info": "info", "warning": "major", "error": "critical"}


# -- 4. --exclude and .gitignore ----------------------------------------------------------------------------


def _checkout(tmp_path):
    """A git checkout with a trace in kept/ and one in traces/ that .gitignore names."""
    (tmp_path / "kept").mkdir()
    (tmp_path / "traces").mkdir()
    shutil.copy(CLEAN, tmp_path / "kept" / CLEAN.name)
    shutil.copy(REGRESSED, tmp_path / "traces" / REGRESSED.name)
    (tmp_path / ".gitignore").write_text("traces/\n")
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    return tmp_path


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_check_dot_in_a_checkout_skips_what_git_ignores(tmp_path, monkeypatch):
    monkeypatch.chdir(_checkout(tmp_path))
    done = invoke("check", ".", *ONLY_KL001, "--format", "json")
    assert done.exit_code == 0, done.output                 # the regressed trace in traces/ is not checked
    traces = [t["path"] for t in json.loads(done.output)["traces"]]
    assert traces == [f"kept/{CLEAN.name}"]
    everything = invoke("check", ".", *ONLY_KL001, "--format", "json", "--no-respect-gitignore")
    assert everything.exit_code == 1
    assert len(json.loads(everything.output)["traces"]) == 2
    # A folder that git ignores, named: searched.
    assert invoke("check", "traces", *ONLY_KL001).exit_code == 1
    verbose = invoke("check", ".", *ONLY_KL001, "-v")
    assert ".gitignore applied to ." in verbose.output


def test_without_git_nothing_is_filtered_and_v_says_so(tmp_path, monkeypatch):
    monkeypatch.chdir(_checkout(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path / "no-bin"))      # no git on the PATH
    done = invoke("check", ".", *ONLY_KL001, "-v")
    assert done.exit_code == 1                               # traces/ checked too
    assert "git not found: .gitignore not applied" in done.output


def test_exclude_globs_and_the_config_key(tmp_path, monkeypatch):
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
    shutil.copy(CLEAN, tmp_path / "a" / CLEAN.name)
    shutil.copy(REGRESSED, tmp_path / "b" / REGRESSED.name)
    monkeypatch.chdir(tmp_path)
    assert invoke("check", ".", *ONLY_KL001).exit_code == 1
    for glob in ("b", "b/*", "*new_ones*"):
        assert invoke("check", ".", *ONLY_KL001, "--exclude", glob).exit_code == 0, glob
    # A file named on the command line is checked whatever the globs say.
    assert invoke("check", f"b/{REGRESSED.name}", *ONLY_KL001, "--exclude", "b").exit_code == 1
    (tmp_path / "kernlint.toml").write_text('exclude = ["b"]\nselect = ["KL001"]\n')
    assert invoke("check", ".").exit_code == 0
    assert invoke("check", ".", "--exclude", "nothing-here").exit_code == 1   # the flag replaces the key


# -- 5. --stdin-filename ---------------------------------------------------------------------------------------


def test_stdin_filename_names_the_trace():
    data = REGRESSED.read_bytes()
    done = invoke("check", "-", *ONLY_KL001, "--stdin-filename", "runs/step.pt.trace.json.gz", "--format", "json",
                  input=data)
    assert done.exit_code == 1
    report = json.loads(done.output)
    assert [t["path"] for t in report["traces"]] == ["runs/step.pt.trace.json.gz"]
    assert {f["trace"] for f in report["findings"]} == {"runs/step.pt.trace.json.gz"}
    assert "kernlint-stdin-" not in done.output
    text = invoke("check", "-", *ONLY_KL001, "--stdin-filename", "runs/step.pt.trace.json.gz", input=data)
    assert text.output.startswith("runs/step.pt.trace.json.gz ") and "kernlint-stdin-" not in text.output


# -- 6. --show-settings ---------------------------------------------------------------------------------------


def test_show_settings(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "kernlint.toml").write_text('fail-on = "error"\nselect = ["R1"]\n\n[thresholds]\nmin-runs = 7\n')
    done = invoke("check", "--show-settings", ".", "--path-map", "/workspace/=")
    assert done.exit_code == 0
    settings = dict(line.split(" = ", 1) for line in done.output.splitlines() if " = " in line
                    and not line.startswith("#"))
    assert settings["config-file"] == json.dumps(str(tmp_path / "kernlint.toml"))
    assert json.loads(settings["rules"]) == ["KL001", "KL101"]
    assert settings["fail-on"] == '"error"'
    assert settings["thresholds.min-runs"] == "7"
    assert json.loads(settings["path-map"]) == [["/workspace/", ""]]
    assert settings["suppressions-file"].startswith(json.dumps(str(tmp_path / "kernlint-suppressions.json")))
    assert "source-root" in settings


# -- 7. family and tag selectors; `kernlint rules` at 80 columns ---------------------------------------------


def _selected(*args):
    done = invoke("check", "--show-settings", ".", "--isolated", *args)
    assert done.exit_code == 0, done.output
    return json.loads(next(line for line in done.output.splitlines() if line.startswith("rules = "))[8:])


def test_family_and_tag_selectors():
    rules = configured_rules(Config(), [], builtin=True)
    for family, members in group_rules(rules):
        # The family's rules, and the rules tagged with its key (KL004, R4's cross-rank form, is "distributed").
        tagged = {r.id for r in rules if family.key in r.spec.tags}
        expected = sorted({r.id for r in members} | tagged)
        assert _selected("--select", family.key.lower()) == expected, family.key
    assert _selected("--select", "distributed") == ["KL003", "KL004"]
    fp8 = sorted(r.id for r in rules if "fp8" in r.spec.tags)
    assert _selected("--select", "fp8") == fp8
    # A family is less specific than an id: R1 without KL101.
    assert _selected("--select", "R1", "--ignore", "KL101") == ["KL001"]
    # ...and than an id prefix.
    assert "KL801" in _selected("--ignore", "baseline", "--extend-select", "KL80")
    assert "matches no rule" in invoke("check", ".", "--isolated", "--select", "R99").output


def test_rules_table_never_cuts_an_id_or_a_name_at_80_columns():
    from kernlint.cli.rules import rules_table

    rules = configured_rules(Config(), [], builtin=True)
    for family, members in group_rules(rules):
        buffer = io.StringIO()
        Console(file=buffer, width=80, color_system=None).print(rules_table(members, 80))
        lines = buffer.getvalue().splitlines()
        assert max(len(line) for line in lines) <= 80
        assert "…" not in buffer.getvalue()
        for r in members:
            assert any(r.id in line and r.name in line for line in lines), (family.key, r.id)


def test_rules_piped_with_columns_80_is_whole():
    done = invoke("rules", "--isolated", env={"COLUMNS": "80"})
    for r in configured_rules(Config(), [], builtin=True):
        assert any(r.id in line and r.name in line and r.spec.summary in line for line in done.output.splitlines())
