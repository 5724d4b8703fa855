"""The examples in docs/examples/ and the pre-commit hook in .pre-commit-hooks.yaml, run as written.

The GitHub Actions workflow's `run:` steps run in bash, in a temporary folder laid out like the checkout
the workflow expects (traces/ holding a fixture trace), with this virtual environment's bin/ first on PATH
and GITHUB_STEP_SUMMARY pointing at a file. The pre-commit hook's entry and args run with the file names
that pre-commit would pass.
"""
from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from kernlint.report import format_names

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "docs" / "examples"
WORKFLOW = EXAMPLES / "github-actions.yml"
HOOKS = REPO / ".pre-commit-hooks.yaml"
PRECOMMIT_CONFIG = EXAMPLES / "pre-commit-config.yaml"
GPU_TRACES = REPO / "fixtures" / "traces" / "gpu"
REGRESSED = GPU_TRACES / "placeholder_new_ones.pt.trace.json.gz"   # KL001: a fill before scale_1x128_kernel
CLEAN = GPU_TRACES / "placeholder_new_empty.pt.trace.json.gz"
# The kernlint under test: the command installed beside this interpreter (a venv), else the first on PATH
# (the device machine installs it into a folder of its own); the install step is not run, see below.
VENV_BIN = Path(shutil.which("kernlint", path=str(Path(sys.executable).parent)) or shutil.which("kernlint")
                or sys.executable).parent
# What runs a `run:` step with `shell: bash` on GitHub's runners.
GITHUB_BASH = ["bash", "--noprofile", "--norc", "-eo", "pipefail"]


def _environment(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}"
    env.update(extra)
    return env


# --- the GitHub Actions workflow --------------------------------------------------------------------------
def _workflow() -> dict:
    return yaml.safe_load(WORKFLOW.read_text())


def _steps() -> list[dict]:
    (job,) = _workflow()["jobs"].values()
    return job["steps"]


@dataclass
class StepRun:
    step: dict
    returncode: int | None      # None: not run (GitHub would have skipped it after a failure)
    stdout: str
    stderr: str


@dataclass
class WorkflowRun:
    workspace: Path
    summary: str
    steps: dict[str, StepRun]   # by step id, or name where a step has no id


def _key(step: dict) -> str:
    return step.get("id") or step.get("name") or step.get("uses", "")


def _runs_after_a_failure(step: dict) -> bool:
    condition = str(step.get("if", ""))
    return "always()" in condition or "failure()" in condition


def _run_workflow(workspace: Path, traces: list[Path] | dict[str, Path],
                  baseline_from: list[Path] | dict[str, Path] = (CLEAN,), config: str | None = None) -> WorkflowRun:
    """Lay out the checkout and run every `run:` step but the install step, in order, with GitHub's shell.
    The install step (id `install`) is skipped: it installs kernlint (the core package) from the network into the
    runner's Python; here kernlint is already installed in this virtual environment, whose bin/ comes first
    on PATH. After a failed step only steps whose `if:` runs after failures run, as on GitHub. The checkout
    holds kernlint-baseline.json, recorded from `baseline_from` (what main would have committed: the clean trace,
    or main's folder of traces laid out under the same names). `traces`: paths, or file names -> paths. `config`:
    the checkout's kernlint.toml, if any."""
    def lay_out(folder: Path, files) -> None:
        folder.mkdir(parents=True)
        for name, trace in (files.items() if isinstance(files, dict) else ((t.name, t) for t in files)):
            shutil.copy(trace, folder / name)

    lay_out(workspace / "traces", traces)
    if config is not None:
        (workspace / "kernlint.toml").write_text(config)
    main_traces = workspace.parent / "main-traces"
    lay_out(main_traces, baseline_from)
    subprocess.run([str(VENV_BIN / "kernlint"), "baseline", "record", str(main_traces), "-o",
                    str(workspace / "kernlint-baseline.json"), "--isolated", "-q"], check=True)
    summary = workspace.parent / "step_summary.md"
    summary.write_text("")
    env = _environment(GITHUB_STEP_SUMMARY=str(summary), GITHUB_WORKSPACE=str(workspace), CI="true",
                       GITHUB_ACTIONS="true")
    env.update({k: str(v) for k, v in (_workflow().get("env") or {}).items()})
    results: dict[str, StepRun] = {}
    failed = False
    for step in _steps():
        if "run" not in step or step.get("id") == "install":
            continue
        if failed and not _runs_after_a_failure(step):
            results[_key(step)] = StepRun(step, None, "", "")
            continue
        script = workspace.parent / "step.sh"
        script.write_text(step["run"])
        step_env = dict(env, **{k: str(v) for k, v in (step.get("env") or {}).items()})
        done = subprocess.run([*GITHUB_BASH, str(script)], cwd=workspace, env=step_env, capture_output=True,
                              text=True, timeout=120)
        results[_key(step)] = StepRun(step, done.returncode, done.stdout, done.stderr)
        failed = failed or done.returncode != 0
    return WorkflowRun(workspace, summary.read_text(), results)


LAYER_CLEAN = GPU_TRACES / "block_clean.pt.trace.json.gz"
LAYER_REGRESSED = GPU_TRACES / "block_regressed.pt.trace.json.gz"   # new_ones(1) in both linears: line 17
INIT_FIXED = GPU_TRACES / "dummy_init_fixed.pt.trace.json.gz"


@pytest.fixture(scope="module")
def workflow_runs(tmp_path_factory) -> dict[str, WorkflowRun]:
    runs = {name: _run_workflow(tmp_path_factory.mktemp(name) / "checkout", traces)
            for name, traces in (("regressed", [REGRESSED]), ("clean", [CLEAN]))}
    # A folder of two programs, as a CI job keeps one per commit: main's layer and dummy init, then the pull
    # request's, whose layer regressed (the new_ones placeholder) and whose dummy init did not.
    main_folder = {"layer.pt.trace.json.gz": LAYER_CLEAN, "dummy_init.pt.trace.json.gz": INIT_FIXED}
    pr_folder = {"layer.pt.trace.json.gz": LAYER_REGRESSED, "dummy_init.pt.trace.json.gz": INIT_FIXED}
    # The subject is the regression (KL001, and the baseline rules KL8xx). Both programs' recorded traces predate
    # fixes the new rules rightly flag on both sides (dummy_init_fixed randomizes weight_scale: KL005; the
    # layer's RMSNorm is a chain of kernels: KL902), so the checkout's config selects the subject's rules.
    runs["two-programs"] = _run_workflow(tmp_path_factory.mktemp("two-programs") / "checkout", pr_folder,
                                         baseline_from=main_folder, config='select = ["KL001", "KL8"]\n')
    return runs


def test_only_the_install_step_is_left_out_and_it_installs_kernlint():
    steps = _steps()
    install = [s for s in steps if s.get("id") == "install"]
    assert len(install) == 1 and "run" in install[0]
    assert re.search(r"pip install .*kernlint", install[0]["run"])
    # Checking traces needs the core package only: no torch, no CUDA wheels (tests/test_wheel_install.py runs
    # the same commands from the wheel installed without torch).
    assert not re.search(r"\btorch\b|\[capture\]", install[0]["run"])
    # _run_workflow runs every other `run:` step; none may hold a GitHub expression (`${{ }}`), which
    # bash would not expand.
    others = [s for s in steps if "run" in s and s.get("id") != "install"]
    assert {_key(s) for s in others} == {"check", "Annotate the pull request", "Write the job summary"}
    assert not any("${{" in s["run"] for s in others)
    assert shutil.which("kernlint", path=str(VENV_BIN)) is not None


def test_reporting_steps_run_after_the_gate_fails():
    steps = _steps()
    gate = next(i for i, s in enumerate(steps) if s.get("id") == "check")
    after = steps[gate + 1:]
    assert after and all(_runs_after_a_failure(s) for s in after)
    upload = next(s for s in after if s.get("uses", "").startswith("github/codeql-action/upload-sarif@"))
    sarif_file = upload["with"]["sarif_file"]
    assert f"-o {sarif_file}" in steps[gate]["run"] and f"hashFiles('{sarif_file}')" in upload["if"]


def test_annotations_name_the_file_and_line_of_the_finding(workflow_runs):
    regressed = workflow_runs["regressed"].steps["Annotate the pull request"]
    assert regressed.returncode == 0, regressed.stderr
    (annotation,) = regressed.stdout.splitlines()   # one line to fix: one annotation
    # the rule's finding and the baseline's new fill, on the same line: both named in its title
    assert annotation.startswith("::error file=regressed/fp8_linear_new_ones.py,line=17,title=KL001 "
                                 "fill-before-block-quant + KL801 launch-added::")
    clean = workflow_runs["clean"].steps["Annotate the pull request"]
    assert clean.returncode == 0 and clean.stdout == ""


def test_job_summary_is_appended_as_markdown(workflow_runs):
    regressed = workflow_runs["regressed"]
    assert regressed.steps["Write the job summary"].returncode == 0
    assert regressed.summary.startswith("## kernlint: 2 finding(s) in 1 trace(s)")
    assert "| KL001 | fill-before-block-quant | failed |" in regressed.summary
    clean = workflow_runs["clean"]
    assert clean.summary.startswith("## kernlint: 0 finding(s) in 1 trace(s)")
    assert "| KL001 | fill-before-block-quant | passed |" in clean.summary


@pytest.mark.skipif("sarif" not in format_names(),
                    reason="the gate step writes --format sarif, and this checkout has no SARIF output format")
def test_the_gate_step_fails_on_the_regressed_trace_and_writes_sarif(workflow_runs):
    regressed = workflow_runs["regressed"]
    gate = regressed.steps["check"]
    assert gate.returncode == 1, gate.stderr
    sarif = json.loads((regressed.workspace / "kernlint.sarif").read_text())
    assert sarif["version"] == "2.1.0"
    # The rule names the pattern; the baseline names the new launch at its place.
    assert sorted(r["ruleId"] for run in sarif["runs"] for r in run["results"]) == ["KL001", "KL801"]
    clean = workflow_runs["clean"]
    assert clean.steps["check"].returncode == 0, clean.steps["check"].stderr
    clean_sarif = json.loads((clean.workspace / "kernlint.sarif").read_text())
    assert [r for run in clean_sarif["runs"] for r in run["results"]] == []


# --- the pre-commit hook ----------------------------------------------------------------------------------
def _hook() -> dict:
    """The kernlint hook as pre-commit sees it in a project: the manifest's definition with the example
    config's overrides (args, files...) applied."""
    (manifest,) = [h for h in yaml.safe_load(HOOKS.read_text()) if h["id"] == "kernlint"]
    (config,) = [h for repo in yaml.safe_load(PRECOMMIT_CONFIG.read_text())["repos"] for h in repo["hooks"]
                 if h["id"] == "kernlint"]
    return {**manifest, **config}


def _precommit_argv(hook: dict, candidates: list[str]) -> list[str]:
    """What pre-commit runs: the entry split like a shell would, the args, then the matching file names."""
    files = re.compile(hook.get("files", ""))
    exclude = re.compile(hook.get("exclude", "^$"))
    names = [c for c in candidates if files.search(c) and not exclude.search(c)]
    return [*shlex.split(hook["entry"]), *hook.get("args", []), *(names if hook.get("pass_filenames", True) else [])]


def test_the_hook_is_a_python_hook_on_trace_files():
    hook = _hook()
    assert hook["language"] == "python" and hook["entry"] == "kernlint check"
    assert hook["pass_filenames"] is True and hook["require_serial"] is True
    files = re.compile(hook["files"])
    assert [n for n in ("a.pt.trace.json", "run/b.pt.trace.json.gz", "c.json", "d.pt.trace.json.gz.bak",
                        "model.py") if files.search(n)] == ["a.pt.trace.json", "run/b.pt.trace.json.gz"]


@pytest.mark.parametrize("traces, expected", [
    ({"perf/clean.pt.trace.json.gz": CLEAN}, 0),
    ({"perf/regressed.pt.trace.json.gz": REGRESSED}, 1),
    ({"perf/clean.pt.trace.json.gz": CLEAN, "perf/regressed.pt.trace.json.gz": REGRESSED}, 1),
], ids=["clean", "regressed", "both"])
def test_the_hook_runs_as_pre_commit_would(tmp_path, traces, expected):
    for name, source in traces.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(source, tmp_path / name)
    (tmp_path / "model.py").write_text("x = 1\n")
    (tmp_path / "perf" / "notes.json").write_text("{}")
    argv = _precommit_argv(_hook(), sorted([*traces, "model.py", "perf/notes.json"]))
    assert argv[-len(traces):] == sorted(traces)          # only the traces are passed
    done = subprocess.run(argv, cwd=tmp_path, env=_environment(), capture_output=True, text=True, timeout=120)
    assert done.returncode == expected, done.stdout + done.stderr
    assert ("KL001 fill-before-block-quant [error]" in done.stdout) == (expected == 1)


def test_a_folder_of_two_programs_with_a_regression_in_one_fails_with_one_annotation_at_its_line(workflow_runs):
    """docs/examples/github-actions.yml end to end on a folder of two programs (issue 35): the gate exits 1, and
    the pull request gets one annotation, at the regressed line; the unchanged program is compared and clean."""
    run = workflow_runs["two-programs"]
    assert run.steps["check"].returncode == 1, run.steps["check"].stderr
    annotate = run.steps["Annotate the pull request"]
    assert annotate.returncode == 0, annotate.stderr
    (annotation,) = annotate.stdout.splitlines()
    assert annotation.startswith("::error file=regressed/fp8_linear_new_ones.py,line=17,title=KL001")
    assert "KL801 launch-added" in annotation and "KL808" not in annotation
    assert run.summary.startswith("## kernlint: 4 finding(s)")   # 2 linears x (KL001, KL801): 2 causes
    if "sarif" in format_names():
        sarif = json.loads((run.workspace / "kernlint.sarif").read_text())
        results = [r for r_ in sarif["runs"] for r in r_["results"]]
        assert sorted(r["ruleId"] for r in results) == ["KL001", "KL801"]
        assert all(r["properties"]["instances"] == 2 for r in results)
