"""The command-line habits of ruff and pytest users: a clean check is one line, -q and -v, --statistics,
help on every option, rule ids in any case and with a team's own prefix, a selection that selects nothing
is an error, tables that a pipe gets whole, a Makefile that says what it is doing."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import textwrap
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from conftest import FIXTURES, REPO
from fresh_cli import run_fresh
from kernlint.cli import main

REGRESSED = FIXTURES / "traces" / "gpu" / "placeholder_new_ones.pt.trace.json.gz"   # one KL001 finding
CLEAN = FIXTURES / "traces" / "gpu" / "placeholder_new_empty.pt.trace.json.gz"      # KL001 passes
TABLE_HEADER = re.compile(r"^\s+rule\s+name\s+verdict\s+level", re.M)


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def cli(*args, cwd=None, env=None):
    """`python -m kernlint ARGS` with stdout a pipe, as `kernlint ... | cat` has it."""
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""), **(env or {})}
    return run_fresh(args, cwd=cwd, env=env, timeout=300)


def user_rule(path: Path, rule_id: str, name: str, summary: str = "s") -> Path:
    """A valid max-count rule file with this id and name."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(f"""\
        id = "{rule_id}"
        name = "{name}"
        severity = "warning"
        summary = "{summary}"

        [scope]
        annotations = ["^never-in-a-trace$"]

        [check]
        type = "max-count"
        kinds = ["kernel"]
        max = 3

        [docs]
        what-it-does = "a"
        why-is-this-bad = "b"
        example = "c"
        use-instead = "d"
        """))
    return path


@pytest.fixture(autouse=True)
def no_config(tmp_path, monkeypatch):
    """Every test here runs in an empty folder, so that no config file above it changes a default."""
    monkeypatch.chdir(tmp_path)


# -- help on every option --------------------------------------------------------------------------------


def _commands(group: click.Group, prefix: str = "kernlint"):
    yield prefix, group
    for name, command in group.commands.items():
        if isinstance(command, click.Group):
            yield from _commands(command, f"{prefix} {name}")
        else:
            yield f"{prefix} {name}", command


def test_every_command_and_option_has_help():
    missing = []
    for path, command in _commands(main):
        if not (command.help or command.short_help):
            missing.append(path)
        for param in command.params:
            if isinstance(param, click.Option) and not (param.help or "").strip():
                missing.append(f"{path} {param.opts[0]}")
    assert not missing, f"no help text: {missing}"
    assert len(list(_commands(main))) >= 6   # the walk saw the commands


# -- how much a check says ---------------------------------------------------------------------------------


def test_a_clean_check_is_one_line():
    result = invoke("check", CLEAN)
    assert result.exit_code == 0
    (line,) = result.stdout.splitlines()
    assert re.fullmatch(r"kernlint: 1 trace, \d+ rules: no findings \(\d+ passed, \d+ not applicable\)", line), line
    assert invoke("check", "--select", "KL001", CLEAN).stdout == "kernlint: 1 trace, 1 rule: all passed\n"


def test_quiet_says_nothing_for_a_clean_check_and_only_findings_otherwise():
    result = invoke("check", "-q", CLEAN)
    assert result.exit_code == 0 and result.stdout == ""
    result = invoke("check", "--quiet", REGRESSED)
    assert result.exit_code == 1
    assert "KL001 fill-before-block-quant [error]" in result.stdout
    assert "Found" not in result.stdout and not TABLE_HEADER.search(result.stdout)


def test_default_shows_findings_and_a_summary_and_verbose_adds_the_verdict_tables():
    result = invoke("check", REGRESSED)
    assert result.exit_code == 1
    assert "KL001 fill-before-block-quant [error]" in result.stdout
    assert result.stdout.rstrip().splitlines()[-1].startswith("Found 1 finding(s) in 1 trace(s)")
    assert not TABLE_HEADER.search(result.stdout) and "not applicable:" not in result.stdout
    verbose = invoke("check", "-v", REGRESSED)
    assert verbose.exit_code == 1 and TABLE_HEADER.search(verbose.stdout)
    assert re.search(r"^\s+KL001\s+fill-before-block-quant\s+failed", verbose.stdout, re.M)
    assert "KL002 not applicable:" in verbose.stdout
    clean = invoke("check", "-v", CLEAN).stdout
    assert TABLE_HEADER.search(clean) and clean.rstrip().splitlines()[-1].startswith("kernlint: 1 trace, ")


def test_quiet_and_verbose_together_are_a_usage_error():
    result = invoke("check", "-q", "-v", CLEAN)
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.splitlines() == ["kernlint: error: -q/--quiet and -v/--verbose cannot be combined"]




@pytest.mark.parametrize("flags", [[], ["-q"], ["--statistics"], ["-q", "--statistics"]])
def test_an_incomplete_verdict_is_never_silent(incomplete_kl001, flags):
    result = invoke("check", *flags, incomplete_kl001)   # the regressed trace, its fill's launch record lost
    assert result.exit_code == 4
    # 4 since issue 37: KL203 copy-after-fp8-quant also reads device events (KL001, KL203, KL501, KL701)
    assert (f"0 findings, but 4 rule verdict(s) incomplete: KL001 ({incomplete_kl001}), "
            f"KL203 ({incomplete_kl001}), KL501" in result.stdout)
    assert not re.search(r"^kernlint: .*(all passed|no findings)", result.stdout, re.M)
    if "--statistics" not in flags:
        assert "KL001 incomplete: could not fully check: 1 device event with no launch inside the window" \
            in result.stdout
        assert "damage: 1 device event with no launch inside the window" in result.stdout


def test_a_kernel_name_cannot_forge_the_clean_line(tmp_path):
    from test_cli_hygiene import _hostile_events

    trace = tmp_path / "forged.json"
    trace.write_text(json.dumps({"traceEvents": _hostile_events(["x\nkernlint: 1 trace, 4 rules: all passed"])}))
    result = invoke("check", trace)
    assert result.exit_code == 1
    assert not [line for line in result.stdout.splitlines() if line.startswith("kernlint:")], result.stdout
    assert "x\\nkernlint: 1 trace" in result.stdout


# -- --statistics ----------------------------------------------------------------------------------------


def _finding(rule, device_us=None, nbytes=None, event="k"):
    from kernlint.rules.result import Finding

    return Finding(rule=rule, name=f"{rule.lower()}-name", severity="error", message="m", trace="t.json",
                   scope="s", event=event, event_kind="kernel", event_category="fill", launch_op=None, top_op=None,
                   source=None, anchor=None, ts=1.0, device_us=device_us, bytes=nbytes)


def _result(findings):
    from kernlint.rules.loader import load_rules
    from kernlint.rules.result import CheckResult, RuleOutcome, TraceReport

    outcomes = [RuleOutcome(rule, f"{rule.lower()}-name", "error", "failed",
                            findings=[f for f in findings if f.rule == rule])
                for rule in sorted({f.rule for f in findings})]
    report = TraceReport(trace="t.json", events=10, has_device_events=True, has_stacks=True, rank=None,
                         outcomes=outcomes)
    return CheckResult(reports=[report], rules=load_rules(), exit_code=1)


def test_statistics_count_and_sum_per_rule_most_findings_first():
    from kernlint.report.text_format import rule_statistics

    findings = [_finding("KL001", 1.5, 100, "a"), _finding("KL001", None, 200, "b"),
                _finding("KL002", None, None),
                _finding("KL003", 2.0, None, "a"), _finding("KL003", 3.0, None, "b"), _finding("KL003", float("nan"),
                                                                                              None, "c")]
    stats = rule_statistics(_result(findings))
    assert [(s.rule, s.count, s.device_us, s.bytes) for s in stats] == [
        ("KL003", 3, 5.0, None), ("KL001", 2, 1.5, 300), ("KL002", 1, None, None)]


def test_statistics_through_the_cli():
    result = invoke("check", "--statistics", REGRESSED)
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    assert re.match(r"^causes\s+findings\s+rule\s+name\s+device time\s+bytes\s+cost$", lines[0]), lines
    assert re.match(r"^\s*1\s+1\s+KL001\s+fill-before-block-quant\s+0\.7 µs\s+-\s+0\.7 µs$", lines[1]), lines
    assert lines[-1].startswith("Found 1 finding(s)") and "scope:" not in result.stdout
    data = json.loads(invoke("check", "--statistics", "--format", "json", REGRESSED).stdout)
    assert data["statistics"] == [{"rule": "KL001", "name": "fill-before-block-quant", "count": 1,
                                   "device_us": pytest.approx(0.704), "bytes": None, "causes": 1,
                                   "cost_us": pytest.approx(0.704)}]
    assert data["findings"] == 1 and data["causes"] == 1
    assert data["exit_code"] == 1 and data["rules_incomplete"] == []
    result = invoke("check", "--statistics", "--format", "github", REGRESSED)
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.splitlines() == [
        "kernlint: error: output format 'github' does not render --statistics; use one of: text, json"]


def test_statistics_of_a_clean_check_is_the_one_line():
    assert invoke("check", "--statistics", "--select", "KL001", CLEAN).stdout == \
        "kernlint: 1 trace, 1 rule: all passed\n"


# -- rule ids: any case, a team's own prefix ---------------------------------------------------------------


def _checked(*args) -> list[str]:
    data = json.loads(invoke("check", "--format", "json", *args, CLEAN).stdout)
    return sorted({r["rule"] for t in data["traces"] for r in t["rules"]})


def test_rule_ids_and_names_are_case_insensitive():
    assert _checked("--select", "kl001") == ["KL001"]
    assert _checked("--select", "Fill-Before-Block-Quant") == ["KL001"]
    # the kl00 prefix also holds KL005 (scale-randomized-in-dummy-init, shipped in issue 37)
    assert _checked("--select", "kl00", "--ignore", "kl003,Kl004") == ["KL001", "KL002", "KL005"]
    assert _checked("--select", "all", "--ignore", "kl001,kl002") == [
        r for r in _checked("--select", "all") if r not in ("KL001", "KL002")]
    assert invoke("explain", "kl001").stdout.startswith("# KL001 fill-before-block-quant")
    assert invoke("explain", "FILL-BEFORE-BLOCK-QUANT").stdout.startswith("# KL001 ")


def test_a_user_rule_may_have_its_own_prefix_and_its_id_is_upper_cased(tmp_path):
    user_rule(tmp_path / "team" / "a.toml", "acme001", "team-rule")
    user_rule(tmp_path / "team" / "b.toml", "ACMEGPU2042", "other-team-rule")
    listed = {r["id"] for r in json.loads(invoke("rules", "--rules", tmp_path / "team", "--format", "json").stdout)}
    assert {"ACME001", "ACMEGPU2042", "KL001"} <= listed
    assert _checked("--rules", tmp_path / "team", "--select", "acme0") == ["ACME001"]
    assert _checked("--rules", tmp_path / "team", "--select", "all", "--ignore", "kl") == ["ACME001",
                                                                                          "ACMEGPU2042"]


def test_a_user_rule_may_not_reuse_a_loaded_id(tmp_path):
    path = user_rule(tmp_path / "team" / "mine.toml", "kl001", "my-own-fill-rule")
    result = invoke("check", "--rules", tmp_path / "team", CLEAN)
    assert result.exit_code == 2 and result.stdout == ""
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"kernlint: error: {path}:1: rule id KL001 is already defined in "), line
    assert "KL001.toml" in line


@pytest.mark.parametrize("args", [["--select", "KL77"], ["--ignore", "ALL"], ["--ignore", "kl0,KL8,KL9"],
                                  ["--extend-select", "nothing-by-that-name"]])
def test_a_selection_that_selects_nothing_is_an_error(args):
    from kernlint.rules.loader import load_rules

    if args == ["--ignore", "kl0,KL8,KL9"]:   # every shipped rule, whatever ids they have
        args = ["--ignore", ",".join(sorted({r.id[:3] for r in load_rules()}))]
    result = invoke("check", *args, CLEAN)
    assert result.exit_code == 2 and result.stdout == ""
    (line,) = result.stderr.splitlines()
    assert line.startswith("kernlint: error: ") and ("matches no rule" in line or "leaves no rule" in line)


# -- tables that a pipe gets whole ----------------------------------------------------------------------------

LONG_NAME = "-".join(["a-really-long-rule-name"] * 8) + "-end"
LONG_SUMMARY = "A summary that goes on " + "and on " * 30 + "to its end."


def test_the_rules_table_is_not_cut_in_a_pipe(tmp_path):
    user_rule(tmp_path / "long" / "r.toml", "LONG001", LONG_NAME, LONG_SUMMARY)
    proc = cli("rules", "--rules", tmp_path / "long", env={"COLUMNS": "40"})
    assert proc.returncode == 0, proc.stderr
    (row,) = [line for line in proc.stdout.splitlines() if "LONG001" in line]
    assert LONG_NAME in row and LONG_SUMMARY in row and "…" not in proc.stdout
    assert all(line == line.rstrip() for line in proc.stdout.splitlines())   # no padding after the last cell


def test_the_verdict_table_is_not_cut_in_a_pipe_or_a_file(tmp_path):
    user_rule(tmp_path / "long" / "r.toml", "LONG001", LONG_NAME)
    result = invoke("check", "-v", "--rules", tmp_path / "long", CLEAN)
    (row,) = [line for line in result.stdout.splitlines() if "LONG001" in line and "not-applicable" in line]
    assert LONG_NAME in row
    invoke("check", "-v", "--rules", tmp_path / "long", "-o", tmp_path / "report.txt", CLEAN)
    (row,) = [line for line in (tmp_path / "report.txt").read_text().splitlines()
              if "LONG001" in line and "not-applicable" in line]
    assert LONG_NAME in row


# -- the Makefile ------------------------------------------------------------------------------------------


@pytest.mark.skipif(shutil.which("make") is None, reason="no make")
def test_the_makefile_says_what_it_installs_and_has_lint(tmp_path):
    def dry_run(*targets):
        proc = subprocess.run(["make", "-n", "-B", "-f", str(REPO / "Makefile"), f"VENV={tmp_path / 'venv'}",
                               *targets], capture_output=True, text=True, cwd=REPO, timeout=60)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    install = dry_run("install")
    for stage in ("kernlint: creating", "installing kernlint with the capture extra"):
        assert stage in install, install
    assert '-e ".[capture]"' in install
    dev = dry_run("install-dev")
    for stage in ("kernlint: creating", "installing kernlint and its dependencies (editable, with the dev extras)"):
        assert stage in dev, dev
    assert '-e ".[dev]"' in dev
    assert "pip install -q" not in install and " -q " not in install
    assert re.search(r"-m ruff check kernlint tests bench scripts", dry_run("lint"))
