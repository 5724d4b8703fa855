"""Program identity (issue 35, item 1): a folder of single-process traces is as many programs as it holds, named
the same when the same code is recorded again, so that `baseline record DIR` keeps every program and
`check DIR --baseline` meets each with its own. Each CLI test here failed on the main before it (the two-program
folder and the clean + regressed runs exited 0)."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from kernlint.baseline.identity import path_name, program_identity, stable_name
from kernlint.cli import main

PROGRAMS = Path(__file__).resolve().parents[1] / "fixtures" / "traces" / "gpu-programs"


def kernlint(*args, cwd: Path):
    import os

    old = os.getcwd()
    os.chdir(cwd)
    try:
        return CliRunner().invoke(main, [str(a) for a in args])
    finally:
        os.chdir(old)


@pytest.mark.parametrize(("name", "stable"), [
    ("layer.pt.trace.json.gz", "layer"),
    ("dummy_init.json", "dummy_init"),
    ("train.json", "train"),
    ("rank-0.json.gz", ""),                                          # the rank is the trace's own
    ("sampled_rank-1.json.gz", "sampled"),
    ("worker3_step_12.1796192115244.pt.trace.json", ""),              # counters and the time in ms
    ("vm_591.1796192115244.pt.trace.json.gz", ""),                    # tensorboard_trace_handler's <host>_<pid>
    ("a1b2c3d4e5f6_77.1796192115244.pt.trace.json", ""),              # a container's host name
    ("fixed_layer.1796192115244.pt.trace.json.gz", "fixed_layer"),   # a worker name of the user's
    ("20261202T061515.244820Z-1403ad", ""),                           # kernlint run's invocation folder
    ("tiny-decoder-p01.pt.trace.json.gz", "tiny-decoder"),            # process and run numbers
    ("fp8-block-linear-run2.pt.trace.json.gz", "fp8-block-linear"),
    ("decode_2026-12-02_10-11-12.json", "decode"),
    ("layer_3.pt.trace.json.gz", "layer_3"),                          # a short number is part of a name
])
def test_what_changes_at_every_recording_is_stripped_from_a_name(name, stable):
    assert stable_name(name) == stable


def test_a_host_the_run_metadata_names_is_stripped_with_its_pid():
    assert stable_name("gpu-node-a_123.pt.trace.json.gz", host="gpu-node-a") == ""
    assert stable_name("gpu-node-a_123.pt.trace.json.gz") == "gpu-node-a_123"


def test_a_path_is_named_below_the_folder_given_and_a_named_file_by_its_nearest_telling_name(tmp_path):
    root = tmp_path / "pr"
    trace = root / "fp8-block-linear" / "20261202T061515.244820Z-1403ad" / "vm_591.1796192115244.pt.trace.json.gz"
    assert path_name(trace, root) == "fp8-block-linear"
    assert path_name(trace) == "fp8-block-linear"          # given by itself: the nearest parent that says something
    assert path_name(root / "layer.pt.trace.json.gz", root) == "layer"
    assert path_name(root / "rank-3.json", root) == ""


def test_identity_takes_metadata_then_path_then_content_then_rank():
    assert program_identity(metadata="fp8-tp-mlp", path="x", content="c", rank=1, world=2) == "fp8-tp-mlp/rank 1"
    assert program_identity(metadata="fp8-dummy-init", path="x", content="c", rank=0, world=1) == "fp8-dummy-init"
    assert program_identity(metadata="", path="layer", content="c", rank=None, world=None) == "layer"
    assert program_identity(metadata="", path="", content="trace of module A", rank=None, world=None) == \
        "trace of module A"
    assert program_identity(metadata="", path="", content="", rank=3, world=None) == "rank 3"
    assert program_identity(metadata="", path="", content="", rank=None, world=None) == "trace"


def test_baseline_record_of_a_folder_of_two_programs_keeps_both(tmp_path):
    out = tmp_path / "b.json"
    result = kernlint("baseline", "record", PROGRAMS / "main", "-o", out, "--isolated", cwd=tmp_path)
    assert result.exit_code == 0, result.output
    assert "another sequence" not in result.output
    programs = json.loads(out.read_text())["programs"]
    assert sorted(programs) == ["dummy_init", "layer"]
    assert all(p["runs"] == 1 and not p.get("other_sequences") for p in programs.values())


def test_a_regression_in_one_program_of_a_folder_fails_the_gate(tmp_path):
    """main/ holds the fixed layer and the fixed dummy init; the PR's folder the fixed layer and the old dummy
    init: KL801 in the dummy-init program, none in the layer. Before: one program `trace`, the odd run
    'data-dependent dispatch', exit 0."""
    out = tmp_path / "b.json"
    assert kernlint("baseline", "record", PROGRAMS / "main", "-o", out, "--isolated", cwd=tmp_path).exit_code == 0
    result = kernlint("check", PROGRAMS / "pr-old-init", "--baseline", out, "--select", "KL8", "--format", "json",
                      "--isolated", cwd=tmp_path)
    assert result.exit_code == 1, result.output
    report = json.loads(result.output)
    added = [f for f in report["findings"] if f["rule"] == "KL801"]
    assert added and {f["details"]["program"] for f in added} == {"dummy_init"}
    assert not [f for f in report["findings"] if f["rule"] == "KL808"]
    (baseline_report,) = [t for t in report["traces"] if t["path"].startswith("baseline ")]
    assert "programs compared with the baseline: dummy_init, layer" in baseline_report["notes"]
    same = kernlint("check", PROGRAMS / "pr-same", "--baseline", out, "--select", "KL801,KL802,KL808",
                    "--isolated", cwd=tmp_path)
    assert same.exit_code == 0, same.output


def test_one_regressed_run_among_clean_runs_of_one_program_is_a_launch_added(tmp_path):
    """Two runs of one program (kernlint run's layout, no metadata), one with the new_ones placeholder: the run
    whose sequence differs is compared with the baseline on its own. Before: not timed, exit 0, no KL801."""
    out = tmp_path / "b.json"
    assert kernlint("baseline", "record", PROGRAMS / "main-runs", "-o", out, "--isolated", cwd=tmp_path).exit_code == 0
    result = kernlint("check", PROGRAMS / "pr-runs", "--baseline", out, "--select", "KL8", "--format", "json",
                      "--isolated", cwd=tmp_path)
    assert result.exit_code == 1, result.output
    added = [f for f in json.loads(result.output)["findings"] if f["rule"] == "KL801"]
    assert len(added) == 2 and all("FillFunctor" in f["event"] for f in added)
    assert all(f["details"]["variant_runs"] == 1 and f["ts"] is not None for f in added)


def test_variation_the_baseline_itself_shows_is_no_change(tmp_path):
    """A baseline recorded from the same clean + regressed runs keeps the regressed sequence as a variant: the
    same variation in the candidate is excused, a new one is not."""
    out = tmp_path / "b.json"
    assert kernlint("baseline", "record", PROGRAMS / "pr-runs", "-o", out, "--isolated", cwd=tmp_path).exit_code == 0
    result = kernlint("check", PROGRAMS / "pr-runs", "--baseline", out, "--select", "KL801,KL802,KL808",
                      "--isolated", cwd=tmp_path)
    assert result.exit_code == 0, result.output


def test_a_program_renamed_in_the_pr_is_unmatched_on_both_sides(tmp_path):
    out = tmp_path / "b.json"
    assert kernlint("baseline", "record", PROGRAMS / "main", "-o", out, "--isolated", cwd=tmp_path).exit_code == 0
    result = kernlint("check", PROGRAMS / "pr-renamed", "--baseline", out, "--format", "json", "--isolated",
                      cwd=tmp_path)
    assert result.exit_code == 1, result.output
    unmatched = {(f["details"]["side"], f["details"]["program"]) for f in json.loads(result.output)["findings"]
                 if f["rule"] == "KL808"}
    assert unmatched == {("baseline", "dummy_init"), ("candidate", "weights_init")}


def test_the_same_program_in_another_folder_layout_meets_itself(tmp_path):
    """Recorded again: other invocation folders, pids and times; the same program."""
    pr = tmp_path / "pr" / "fp8-layer" / "20261203T000000.000000Z-0f0f0f"
    pr.mkdir(parents=True)
    src = next((PROGRAMS / "main-runs").rglob("*.pt.trace.json.gz"))
    shutil.copy(src, pr / "otherhost_99999.1796300000000.pt.trace.json.gz")
    out = tmp_path / "b.json"
    assert kernlint("baseline", "record", PROGRAMS / "main-runs", "-o", out, "--isolated", cwd=tmp_path).exit_code == 0
    result = kernlint("check", tmp_path / "pr", "--baseline", out, "--select", "KL8", "--format", "json",
                      "--isolated", cwd=tmp_path)
    assert result.exit_code == 0, result.output
    (baseline_report,) = [t for t in json.loads(result.output)["traces"] if t["path"].startswith("baseline ")]
    assert "programs compared with the baseline: fp8-layer" in baseline_report["notes"]
