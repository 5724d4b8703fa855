"""The capture extra installed from the built wheel beside the local CPU torch: `kernlint audit --device cpu`
runs there, and pip keeps the torch build the user installed first. (Apart from tests/test_wheel_install.py
so that this, the slowest install, runs on another worker.)"""
from __future__ import annotations

import re

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
    audit = _run([bindir / "kernlint", "audit", "--device", "cpu", "--out", tmp_path / "runs"], cwd=tmp_path,
                 timeout=600)
    assert audit.returncode == 0, audit.stdout[-3000:] + audit.stderr[-3000:]
    assert re.search(r"(\d+)/\1 workloads as expected", audit.stdout), audit.stdout[-2000:]
    assert list((tmp_path / "runs").rglob("*.pt.trace.json.gz"))
