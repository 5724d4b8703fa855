"""What CI and editor users expect (issue 21): results point at the repository's files, rules have help
pages, one run writes several formats, a concise `path:line: ID message` format, `kernlint` alone is the
help, `check -` reads standard input, kernlint's own run metadata is not "skipped"."""
from __future__ import annotations

import gzip
import json
import re
import subprocess
import sys

from conftest import REPO
from fresh_cli import run_fresh
from kernlint.report import sarif_format

REGRESSED = "fixtures/traces/gpu/block_regressed.pt.trace.json.gz"
# The subject is KL001's fills in fixtures/regressed/fp8_linear_new_ones.py: the trace was recorded when the block's
# RMSNorm (fixtures/programs/_program_common.py) was a chain of kernels, which KL902 unfused-norm rightly flags, so
# the REGRESSED checks select KL001 alone.
ONLY_KL001 = ("--select", "KL001")


def _kernlint(*args, cwd=REPO, stdin=None):
    return run_fresh([*args, "--isolated"], cwd=cwd, stdin=stdin, timeout=300)


def test_sarif_results_point_at_files_of_the_repository_and_every_rule_has_a_help_page():
    done = _kernlint("check", REGRESSED, *ONLY_KL001, "--format", "sarif")
    assert done.returncode == 1, done.stderr
    run = json.loads(done.stdout)["runs"][0]
    locations = [r["locations"][0]["physicalLocation"]["artifactLocation"] for r in run["results"]]
    assert locations and all(loc["uriBaseId"] == "%SRCROOT%" for loc in locations)
    assert all((REPO / loc["uri"]).is_file() for loc in locations), locations
    assert {loc["uri"] for loc in locations} == {"fixtures/regressed/fp8_linear_new_ones.py"}
    rules = run["tool"]["driver"]["rules"]
    # helpUri and informationUri only where the installed metadata names the project's URL (pyproject's
    # [project.urls], none until kernlint is published: tests/test_sarif_project_url.py); the pages exist.
    home = sarif_format.project_url()
    assert rules and all(r.get("helpUri") == (f"{home}/blob/main/docs/rules/{r['id']}.md" if home else None)
                         for r in rules)
    assert all((REPO / "docs" / "rules" / f"{r['id']}.md").is_file() for r in rules)
    assert run["tool"]["driver"].get("informationUri") == home
    kl001 = [r for r in rules if r["id"] == "KL001"][0]
    assert "<https://github.com/vllm-project/vllm/pull/43677>" in kl001["help"]["markdown"]


def test_github_annotations_name_the_repository_file():
    done = _kernlint("check", REGRESSED, *ONLY_KL001, "--format", "github")
    files = re.findall(r"file=([^,]+),line=(\d+)", done.stdout)
    assert files and {f for f, _ in files} == {"fixtures/regressed/fp8_linear_new_ones.py"}
    assert all((REPO / f).is_file() for f, _ in files)


def test_one_run_writes_text_sarif_and_junit_and_concise_starts_with_the_location(tmp_path):
    done = _kernlint("check", REGRESSED, *ONLY_KL001, "--format", "concise",
                     "--sarif-output", str(tmp_path / "k.sarif"), "--junit-output", str(tmp_path / "k.xml"),
                     "--text-output", str(tmp_path / "k.txt"))
    assert done.returncode == 1, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("fixtures/regressed/fp8_linear_new_ones.py:18: KL001 [error] ")
    assert lines[-1] == "Found 2 finding(s) in 1 trace(s)."
    assert json.loads((tmp_path / "k.sarif").read_text())["runs"][0]["results"]
    assert "<testsuites" in (tmp_path / "k.xml").read_text()
    assert "KL001 fill-before-block-quant" in (tmp_path / "k.txt").read_text()


def test_a_trace_recorded_elsewhere_maps_through_path_map(tmp_path):
    data = json.loads(gzip.open(REPO / REGRESSED).read())
    for e in data["traceEvents"]:
        if e.get("cat") == "python_function" and "regressed/" in e.get("name", ""):
            e["name"] = e["name"].replace("regressed/", "/workspace/other/regressed/")
    moved = tmp_path / "moved.pt.trace.json"
    moved.write_text(json.dumps(data))
    plain = _kernlint("check", str(moved), "--format", "concise")
    assert plain.stdout.startswith("fixtures/regressed/fp8_linear_new_ones.py:18:")   # by suffix; the statement line
    mapped = _kernlint("check", str(moved), "--format", "concise", "--path-map", "/workspace/other/=fixtures/")
    assert mapped.stdout.startswith("fixtures/regressed/fp8_linear_new_ones.py:18:")
    bad = _kernlint("check", str(moved), "--path-map", "nothing")
    assert bad.returncode == 2 and "--path-map 'nothing': expected FROM=TO" in bad.stderr


def test_path_map_and_source_root_from_the_config_pick_between_files_a_suffix_cannot(tmp_path):
    data = json.loads(gzip.open(REPO / REGRESSED).read())
    for e in data["traceEvents"]:
        if e.get("cat") == "python_function" and "regressed/" in e.get("name", ""):
            e["name"] = e["name"].replace("regressed/", "/workspace/other/regressed/")
    (tmp_path / "moved.pt.trace.json").write_text(json.dumps(data))
    tree = tmp_path / "tree"
    for side in ("a", "b"):   # two files end with the recorded suffix: only a prefix map can choose
        (tree / side / "regressed").mkdir(parents=True)
        (tree / side / "regressed" / "fp8_linear_new_ones.py").write_text("\n" * 40)

    def concise(*extra):
        return run_fresh(["check", "moved.pt.trace.json", "--format", "concise", *extra], cwd=tmp_path, timeout=300)

    assert concise("--isolated", "--source-root", str(tree)).stdout.startswith(
        "/workspace/other/regressed/fp8_linear_new_ones.py:17:")   # ambiguous: left as recorded
    (tmp_path / "kernlint.toml").write_text('source-root = "tree"\n[path-map]\n"/workspace/other/" = "b/"\n')
    assert concise().stdout.startswith("b/regressed/fp8_linear_new_ones.py:17:")
    # the flag is tried before the table
    assert concise("--path-map", "/workspace/other/=a/").stdout.startswith(
        "a/regressed/fp8_linear_new_ones.py:17:")
    (tmp_path / "kernlint.toml").write_text('[path-map]\n"/workspace/other/" = 3\n')
    bad = concise()
    assert bad.returncode == 2 and "kernlint.toml:2" in bad.stderr and "[path-map]" in bad.stderr, bad.stderr


def test_the_rule_pages_are_current():
    done = subprocess.run([sys.executable, str(REPO / "scripts" / "rule_docs.py")], capture_output=True, text=True,
                          cwd=REPO, timeout=120)
    assert done.returncode == 0, done.stdout


def test_kernlint_alone_prints_the_help():
    done = subprocess.run([sys.executable, "-m", "kernlint.cli"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.startswith("Usage: kernlint") and "check" in done.stdout


def test_check_reads_a_trace_from_standard_input():
    done = _kernlint("check", "-", "--format", "concise", stdin=(REPO / REGRESSED).read_bytes())
    assert done.returncode == 1 and ": KL001 [error]" in done.stdout
    empty = _kernlint("check", "-", stdin=b"")
    assert empty.returncode == 2 and empty.stderr.strip() == (
        "kernlint: error: <stdin>: standard input is empty: no trace to check")


def test_run_metadata_beside_a_trace_is_not_listed_as_skipped(tmp_path):
    folder = REPO / "fixtures" / "traces" / "gpu-audit"
    assert list(folder.glob("*.run.json"))
    done = _kernlint("check", str(folder), "-v", "--format", "json")
    assert not [s for s in json.loads(done.stdout)["skipped"] if s["path"].endswith(".run.json")]


def test_the_exit_codes_are_one_enum_and_the_readme_documents_each():
    """Issue 39: exit codes lived in three modules and as literals; one IntEnum now, and the README table
    lists every member by its number."""
    import re

    from conftest import REPO
    from kernlint.errors import ExitCode, KernlintError
    from kernlint.rules import result

    readme = (REPO / "README.md").read_text()
    table = readme[readme.index("### Exit codes"):readme.index("### JSON output")]
    documented = {int(m) for m in re.findall(r"^\| (\d) \|", table, re.M)}
    assert documented == {int(c) for c in ExitCode}
    assert (result.EXIT_CLEAN, result.EXIT_FINDINGS, result.EXIT_INCOMPLETE) == (
        ExitCode.CLEAN, ExitCode.FINDINGS, ExitCode.INCOMPLETE)
    assert KernlintError(None, "x").exit_code is ExitCode.ERROR
