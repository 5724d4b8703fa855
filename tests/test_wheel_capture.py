"""The capture extra installed from the built wheel beside the local CPU torch: `kernlint run` profiles the
built-in FP8 linear layer there and checks it with the shipped rules, and pip keeps the torch build the user
installed first. (The whole audit is tests/test_run_and_audit.py's, on the editable install. Apart from
tests/test_wheel_install.py so that this, the slowest install, runs on another worker.)"""
from __future__ import annotations

import json

import pytest

from wheel_build import TORCH_PIN, _ok, _pip_install, _run, _venv

pytestmark = pytest.mark.install
pytest_plugins = ["wheel_build"]   # the `dist` fixture: the sdist and the wheel built from it


def test_the_capture_extra_with_the_local_cpu_torch_audits(dist, tmp_path):
    bindir = _venv(tmp_path / "venv")
    _pip_install(bindir, TORCH_PIN)     # the user's own torch build first; the extra keeps it
    _pip_install(bindir, f"kernlint[capture] @ {dist['wheel'].as_uri()}")
    version = _ok(_run([bindir / "python", "-c", "import torch; print(torch.__version__)"], cwd=tmp_path)).stdout
    assert version.strip().startswith(TORCH_PIN.split("==")[1]), "pip replaced the torch build installed first"
    run = _run([bindir / "kernlint", "run", "fp8-block-linear", "--device", "cpu", "--out", tmp_path / "runs",
                "--format", "json"], cwd=tmp_path, timeout=600)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    verdicts = {v["rule"]: v["status"] for t in json.loads(run.stdout)["traces"] for v in t["rules"]}
    assert verdicts["KL001"] == "passed" and len(verdicts) >= 10, verdicts   # the shipped rules, from the wheel
    assert list((tmp_path / "runs").rglob("*.pt.trace.json.gz"))
