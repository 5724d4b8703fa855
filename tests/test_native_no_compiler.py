"""Where no C compiler works, pip still installs kernlint: the native reader (kernlint/trace/_kineto_chunk.c)
is optional, so its failed compile is a warning, and the installed kernlint reads every trace with the Python
path, with the findings the extension gives.

The compiler is `CC=false` (every compile fails, as on a machine without one); the wheel pip builds from the
source is installed into a fresh venv (its dependencies placed as in tests/wheel_build.py), and its findings
on recorded traces, one of them large enough that the checkout streams it, are the checkout's (with the
extension). Slow-ish (a build and a venv, about half a minute on 2 cores): marked `install`.
"""
from __future__ import annotations

import json
import shutil
import sys
import zipfile
from pathlib import Path

import pytest

from wheel_build import CLEAN, REGRESSED, REPO, _env, _ok, _pip_install, _place_dependencies, _run, _venv

pytestmark = pytest.mark.install

# Past the stream threshold (4 MB of JSON): the checkout streams it with the extension, the install reads it
# whole with the Python path.
LARGE = REPO / "fixtures" / "traces" / "gpu-decode" / "large-decode-clean-range.pt.trace.json.gz"


def _source_copy(where: Path) -> Path:
    """What the package is built from (as wheel_build._build_dist copies it), without any built extension."""
    where.mkdir()
    for name in ("pyproject.toml", "setup.py", "README.md"):
        shutil.copy2(REPO / name, where / name)
    for name in ("kernlint", "rules", "docs"):
        shutil.copytree(REPO / name, where / name, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", "*.so"))
    return where


@pytest.fixture(scope="module")
def no_compiler(tmp_path_factory) -> tuple[Path, Path, str]:
    """(the venv's bin/, the wheel, the build's log) of kernlint built and installed with CC=false."""
    base = tmp_path_factory.mktemp("no-compiler")
    src, out = _source_copy(base / "src"), base / "wheel"
    env = {**_env(), "CC": "false", "KERNLINT_SANITIZE": ""}
    built = _ok(_run([sys.executable, "-m", "pip", "wheel", "-v", "--no-deps", "--no-build-isolation",
                      "--no-cache-dir", "-w", out, src], cwd=base, env=env, timeout=300))
    wheel = next(out.glob("kernlint-*.whl"))
    bindir = _venv(base / "venv")
    _place_dependencies(bindir, wheel)
    _pip_install(bindir, str(wheel))
    return bindir, wheel, built.stdout + built.stderr


def test_the_failed_compile_is_a_warning_and_the_wheel_has_no_native_reader(no_compiler):
    _, wheel, log = no_compiler
    assert "_kineto_chunk" in log and "failed" in log.lower(), log[-3000:]
    names = zipfile.ZipFile(wheel).namelist()
    assert not [n for n in names if "_kineto_chunk" in n], names
    assert "kernlint/trace/native_chunk.py" in names


def test_the_install_without_it_gives_the_findings_of_the_extension(no_compiler, tmp_path):
    bindir = no_compiler[0]
    probe = _ok(_run([bindir / "python", "-c", "import kernlint, kernlint.trace.native_chunk as n; "
                      "print(n.native_module() is None, kernlint.__file__)"], cwd=tmp_path)).stdout.split()
    assert probe[0] == "True", "the installed kernlint found a native reader"
    assert str(bindir.parent) in probe[1], "kernlint was imported from somewhere else than the venv"
    traces = [REGRESSED, CLEAN, LARGE]
    args = ["check", *traces, "--format", "json", "--exit-zero", "--isolated", "-o"]
    _ok(_run([bindir / "kernlint", *args, tmp_path / "python-path.json"], cwd=tmp_path))
    _ok(_run([sys.executable, "-m", "kernlint", *args, tmp_path / "native.json"], cwd=tmp_path))
    python_path, with_native = (json.loads((tmp_path / f"{n}.json").read_text()) for n in ("python-path", "native"))
    assert python_path["findings"] == with_native["findings"]
    assert any(f["rule"] == "KL001" for f in python_path["findings"])
    assert _run([bindir / "kernlint", "check", REGRESSED, "--isolated"], cwd=tmp_path).returncode == 1
