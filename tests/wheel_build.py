"""Building kernlint's wheel and installing it into fresh venvs: shared by the install tests, which sit in
two files so that the slow capture-extra install can run beside the light-install tests on another
pytest-xdist worker."""
from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
GPU = REPO / "fixtures" / "traces" / "gpu"
REGRESSED = GPU / "placeholder_new_ones.pt.trace.json.gz"      # KL001 fails: exit 1
CLEAN = GPU / "placeholder_new_empty.pt.trace.json.gz"         # no finding: exit 0
# Traces whose KL101 (dead-fill) verdicts depend on knowing out= arguments: the same findings with no torch.
DEAD_FILL = sorted((REPO / "fixtures" / "traces" / "gpu-zoo").glob("r1_*.pt.trace.json.gz"))
SHIPPED_RULE_IDS = sorted(p.stem for p in (REPO / "rules").glob("KL*.toml"))
# The torch build the Makefile installs (a CPU wheel that pip finds on this machine's disk).
TORCH_PIN = re.search(r"^TORCH_PIN \?= (\S+)$", (REPO / "Makefile").read_text(), re.M).group(1)

def _env() -> dict[str, str]:
    """The environment of a user's shell: nothing of this test session's Python leaks in."""
    # PYTHONDONTWRITEBYTECODE goes too: the venvs are installed with --no-compile, so the first import of
    # torch and pandas writes their bytecode and the other commands start from it, as in a user's venv.
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME", "PYTHONDONTWRITEBYTECODE")}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    env["NO_COLOR"] = "1"
    return env


def _run(args, cwd: Path, env: dict | None = None, timeout: int = 300) -> subprocess.CompletedProcess:
    return subprocess.run([str(a) for a in args], cwd=cwd, env=env or _env(), capture_output=True, text=True,
                          timeout=timeout)


def _ok(proc: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert proc.returncode == 0, f"{proc.args} exit {proc.returncode}\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}"
    return proc


def _venv(where: Path) -> Path:
    # Without a pip of its own (seeding one takes 4 s): this session's pip installs into it (`pip --python`).
    _ok(_run([sys.executable, "-m", "venv", "--without-pip", where], cwd=where.parent))
    return where / "bin"


def _pip(bindir: Path, *args: str, timeout: int = 300) -> subprocess.CompletedProcess:
    """pip acting on the venv of `bindir`, as that venv's own pip would."""
    return _ok(_run([sys.executable, "-m", "pip", "--python", bindir / "python", *args], cwd=bindir.parent,
                    timeout=timeout))


def _pip_install(bindir: Path, *requirements: str) -> None:
    # --no-compile: what is imported gets compiled when it is; the test's time goes to the install itself.
    _pip(bindir, "install", "-q", "--no-compile", *requirements, timeout=600)


@pytest.fixture(scope="module")
def dist(tmp_path_factory) -> dict[str, Path]:
    """The sdist and the wheel built from it (python -m build: the wheel is made from the unpacked sdist, so
    package data missing from the sdist would be missing from the wheel too)."""
    import shutil

    out = tmp_path_factory.mktemp("dist")
    # Built from a copy of what the package is made of: the build writes its egg-info beside the sources,
    # which must neither land in the checkout nor race another worker's build.
    src = tmp_path_factory.mktemp("src")
    for name in ("pyproject.toml", "setup.py", "README.md"):
        shutil.copy2(REPO / name, src / name)
    for name in ("kernlint", "rules", "docs"):   # (an in-place built extension stays out: the build makes its own)
        shutil.copytree(REPO / name, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", "*.so"))
    _ok(_run([sys.executable, "-m", "build", "--no-isolation", "--outdir", out, src], cwd=out, timeout=300))
    wheels, sdists = list(out.glob("kernlint-*.whl")), list(out.glob("kernlint-*.tar.gz"))
    assert len(wheels) == 1 and len(sdists) == 1, sorted(p.name for p in out.iterdir())
    return {"wheel": wheels[0], "sdist": sdists[0]}
