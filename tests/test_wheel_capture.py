"""The capture extra installed from the built wheel beside the local CPU torch: `kernlint run` profiles the
built-in FP8 linear layer there and checks it with the shipped rules, and pip keeps the torch build the user
installed first. (The whole audit is tests/test_run_and_audit.py's, on the editable install. Apart from
tests/test_wheel_install.py so that this, the slowest install, runs on another worker.)"""
from __future__ import annotations

import json

import pytest

from wheel_build import TORCH_PIN, _install_as_pip_left_it, _ok, _pip_install, _place_dependencies, _run, _venv

pytestmark = pytest.mark.install
pytest_plugins = ["wheel_build"]   # the `dist` fixture: the sdist and the wheel built from it


def test_the_capture_extra_with_the_local_cpu_torch_audits(dist, tmp_path):
    bindir = _venv(tmp_path / "venv")
    # The user's own torch build first (the extra keeps it): the pinned CPU build as pip installed it into
    # this session's venv, its files linked into the fresh one (pip would unpack the same wheel for a minute).
    if not _install_as_pip_left_it(bindir, TORCH_PIN):
        _pip_install(bindir, TORCH_PIN)
    _place_dependencies(bindir, dist["wheel"], extra="capture")   # numpy, pandas, scipy...: as pip left them
    _pip_install(bindir, f"kernlint[capture] @ {dist['wheel'].as_uri()}")
    version = _ok(_run([bindir / "python", "-c", "import torch; print(torch.__version__)"], cwd=tmp_path)).stdout
    assert version.strip().startswith(TORCH_PIN.split("==")[1]), "pip replaced the torch build installed first"
    run = _run([bindir / "kernlint", "run", "fp8-block-linear", "--device", "cpu", "--out", tmp_path / "runs",
                "--format", "json"], cwd=tmp_path, timeout=600)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    verdicts = {v["rule"]: v["status"] for t in json.loads(run.stdout)["traces"] for v in t["rules"]}
    assert verdicts["KL001"] == "passed" and len(verdicts) >= 10, verdicts   # the shipped rules, from the wheel
    assert list((tmp_path / "runs").rglob("*.pt.trace.json.gz"))
