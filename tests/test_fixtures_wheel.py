"""The kernlint-fixtures wheel (scripts/build_fixtures_wheel.py) beside kernlint's own: installed into fresh venvs
and run far from the checkout, `kernlint audit --replay` (no --fixtures, no torch) replays every recorded case
as the checkout does, and, with the capture extra beside the local CPU torch, `kernlint run` finds a regressed
workload that the fixtures' plugin registers.

About 40 s on the 2-core machine (the fixtures wheel builds in 3 s; the replay takes 15 s, the CPU run 15 s).
"""
from __future__ import annotations

import json
import zipfile

import pytest

from wheel_build import (
    REPO,
    TORCH_PIN,
    _install_as_pip_left_it,
    _ok,
    _pip_install,
    _place_dependencies,
    _run,
    _venv,
)

pytestmark = pytest.mark.install
pytest_plugins = ["wheel_build"]   # `dist` (kernlint's sdist and wheel) and `fixtures_wheel`, built once


def test_the_fixtures_wheel_replays_every_recorded_case_without_a_checkout(dist, fixtures_wheel, tmp_path):
    from kernlint.cases import load_cases

    names = set(zipfile.ZipFile(fixtures_wheel).namelist())
    assert "kernlint_fixtures/regressed/workloads.py" in names and "kernlint_fixtures/cases/KL001.toml" in names
    assert not any(n.startswith(("kernlint/", "kernlint_fixtures/programs/")) for n in names)

    bindir = _venv(tmp_path / "venv")
    _place_dependencies(bindir, dist["wheel"])
    _pip_install(bindir, str(dist["wheel"]), str(fixtures_wheel))
    assert _run([bindir / "python", "-c", "import torch"], cwd=tmp_path).returncode == 1   # the light install
    work = tmp_path / "elsewhere"
    work.mkdir()
    proc = _run([bindir / "kernlint", "audit", "--replay", "--format", "json"], cwd=work)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    replayed = json.loads(proc.stdout)
    recorded = {(c.rule, c.spec.name) for c in load_cases(REPO / "fixtures" / "cases") if c.spec.trace}
    assert {(c["rule"], c["case"]) for c in replayed["cases"]} == recorded and len(replayed["cases"]) == len(recorded)
    assert replayed["all_as_expected"] and all(c["verdict"] == c["expected"] for c in replayed["cases"])
    # Without torch, the regressed workloads are found but cannot run: the capture extra's one line.
    run = _run([bindir / "kernlint", "run", "fp8-block-linear-new-ones"], cwd=work)
    assert run.returncode == 2 and "kernlint[capture]" in run.stderr, run.stderr


def test_the_fixtures_wheel_gives_the_regressed_workloads_to_kernlint_run(dist, fixtures_wheel, tmp_path):
    bindir = _venv(tmp_path / "venv")
    if not _install_as_pip_left_it(bindir, TORCH_PIN):
        _pip_install(bindir, TORCH_PIN)
    _place_dependencies(bindir, dist["wheel"], extra="capture")
    _pip_install(bindir, f"kernlint[capture] @ {dist['wheel'].as_uri()}", str(fixtures_wheel))
    run = _run([bindir / "kernlint", "run", "fp8-block-linear-new-ones", "--device", "cpu", "--out", tmp_path / "runs",
                "--format", "json"], cwd=tmp_path, timeout=600)
    assert run.returncode == 1, run.stdout[-3000:] + run.stderr[-3000:]
    verdicts = {v["rule"]: v["status"] for t in json.loads(run.stdout)["traces"] for v in t["rules"]}
    assert verdicts["KL001"] == "failed", verdicts
    # `audit --include-regressed` takes them from the same plugin (the audit itself is test_run_and_audit's).
    probe = ("from kernlint.audit import audit_workloads as a; print(sorted({w.name for w in a('cpu', "
             "include_regressed=True) if w.regressed}))")
    regressed = _ok(_run([bindir / "python", "-c", probe], cwd=tmp_path)).stdout
    assert "'fp8-block-linear-new-ones'" in regressed and "'fp8-dummy-init-old'" in regressed, regressed
