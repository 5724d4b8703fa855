"""Building kernlint's wheel and installing it into fresh venvs: shared by the install tests, which sit in
two files so that the slow capture-extra install can run beside the light-install tests on another
pytest-xdist worker."""
from __future__ import annotations

import os
import re
import shutil
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


def _site_packages(bindir: Path) -> Path:
    """The site-packages folder of the venv whose bin/ is `bindir` (made by _venv from this interpreter)."""
    return bindir.parent / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"


def _installed_closure(name: str, dists: dict | None = None) -> dict:
    """The installed distribution `name` and every distribution it requires (no extras), recursively, by
    canonical name (added to `dists`)."""
    import importlib.metadata as metadata

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    seen = {} if dists is None else dists
    todo = [name]
    while todo:
        key = canonicalize_name(todo.pop())
        if key in seen:
            continue
        seen[key] = metadata.distribution(key)
        for line in seen[key].requires or []:
            req = Requirement(line)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(req.name)
    return seen


def _place(bindir: Path, dists) -> None:
    """Put the installed distributions `dists` into the venv of `bindir` exactly as pip left them in this
    session's environment: the same files (hard links where the file system allows, byte code included),
    dist-info and all, so that pip in that venv sees them installed, as it would after unpacking their wheels
    there (a minute for torch on 2 cores, a quarter of one for numpy, pandas and scipy)."""
    target = _site_packages(bindir)
    for d in dists:
        # The top-level entries of site-packages that the distribution's RECORD names (its bin/ scripts,
        # `../../../bin/...`, point at this venv's interpreter: left out, as no test runs them).
        tops = {Path(str(f)).parts[0] for f in d.files or []} - {"..", "__pycache__"}
        for top in sorted(tops):
            src, dst = Path(d.locate_file(top)), target / top
            if dst.exists() or not src.exists():
                continue
            if src.is_dir():
                shutil.copytree(src, dst, copy_function=_link_or_copy, symlinks=True)
            else:
                _link_or_copy(src, dst)
                cached = src.parent / "__pycache__"
                for pyc in cached.glob(f"{src.stem}.*.pyc") if src.suffix == ".py" else ():
                    (target / "__pycache__").mkdir(exist_ok=True)
                    _link_or_copy(pyc, target / "__pycache__" / pyc.name)


def _install_as_pip_left_it(bindir: Path, requirement: str) -> bool:
    """Give the venv of `bindir` the distribution `requirement` (NAME==VERSION) and what it requires as pip
    installed them into this session's environment (_place). False where this environment's NAME is another
    version (a GPU image's own torch): the caller installs it with pip then."""
    import importlib.metadata as metadata

    name, version = requirement.split("==")
    try:
        dists = list(_installed_closure(name).values())
    except metadata.PackageNotFoundError:
        return False
    if dists[0].version.split("+")[0] != version:
        return False
    _place(bindir, dists)
    return True


def _place_dependencies(bindir: Path, wheel: Path, extra: str = "") -> None:
    """Give the venv of `bindir` what the wheel's metadata requires (with `extra`), each requirement that this
    session's environment satisfies placed as pip installed it here (_place), with what it requires in turn:
    pip then installs the wheel beside them, and installs itself any requirement that is not placed. Only what
    the wheel declares is placed, so an import the wheel does not declare still fails in the venv."""
    import importlib.metadata as metadata
    from email.parser import Parser
    from zipfile import ZipFile

    from packaging.requirements import Requirement

    with ZipFile(wheel) as whl:
        meta = Parser().parsestr(whl.read(next(n for n in whl.namelist() if n.endswith(".dist-info/METADATA")))
                                 .decode())
    dists: dict = {}
    for line in meta.get_all("Requires-Dist") or []:
        req = Requirement(line)
        if req.marker is not None and not req.marker.evaluate({"extra": extra}):
            continue
        try:
            installed = metadata.distribution(req.name)
        except metadata.PackageNotFoundError:
            continue
        if req.specifier.contains(installed.version, prereleases=True):
            _installed_closure(req.name, dists)
    _place(bindir, dists.values())


def _link_or_copy(src, dst) -> None:
    try:
        os.link(src, dst)
    except FileNotFoundError:
        # Byte code that another worker's import was writing (Python writes a temporary file, then renames
        # it): left out, the venv compiles what it imports. Anything else missing is an error.
        if Path(src).parent.name != "__pycache__":
            raise
    except OSError:
        shutil.copy2(src, dst)


def _shared_folder(tmp_path_factory) -> Path:
    """A folder that every pytest-xdist worker of this session sees (this session's own temporary root)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def _built_once(tmp_path_factory, name: str, build) -> Path:
    """The folder `name` of this session's shared temporary root, filled by `build(tmp_path_factory, folder)`
    once a session: the first worker that needs it builds it under a lock, the others wait for it and take the
    same files."""
    import fcntl

    shared = _shared_folder(tmp_path_factory)
    out = shared / name
    with open(shared / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if not (out / "built").exists():
                shutil.rmtree(out, ignore_errors=True)   # what a worker that failed half-way left
                build(tmp_path_factory, out)
                (out / "built").write_text("")
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    return out


@pytest.fixture(scope="session")
def dist(tmp_path_factory) -> dict[str, Path]:
    """The sdist and the wheel built from it (python -m build: the wheel is made from the unpacked sdist, so
    package data missing from the sdist would be missing from the wheel too). Built once a session."""
    out = _built_once(tmp_path_factory, "kernlint-dist", _build_dist)
    wheels, sdists = list(out.glob("kernlint-*.whl")), list(out.glob("kernlint-*.tar.gz"))
    assert len(wheels) == 1 and len(sdists) == 1, sorted(p.name for p in out.iterdir())
    return {"wheel": wheels[0], "sdist": sdists[0]}


@pytest.fixture(scope="session")
def fixtures_wheel(tmp_path_factory) -> Path:
    """The kernlint-fixtures wheel (scripts/build_fixtures_wheel.py: the cases, the traces and baselines they
    name, the regressed workloads), built once a session."""
    def build(_, out: Path) -> None:
        _ok(_run([sys.executable, REPO / "scripts" / "build_fixtures_wheel.py", "--outdir", out], cwd=REPO))

    (wheel,) = _built_once(tmp_path_factory, "kernlint-fixtures-dist", build).glob("kernlint_fixtures-*.whl")
    return wheel


def _build_dist(tmp_path_factory, out: Path) -> None:
    out.mkdir(parents=True)
    # Built from a copy of what the package is made of: the build writes its egg-info beside the sources,
    # which must neither land in the checkout nor race another worker's build.
    src = tmp_path_factory.mktemp("src")
    for name in ("pyproject.toml", "setup.py", "README.md"):
        shutil.copy2(REPO / name, src / name)
    for name in ("kernlint", "rules", "docs"):   # (an in-place built extension stays out: the build makes its own)
        shutil.copytree(REPO / name, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", "*.so"))
    _ok(_run([sys.executable, "-m", "build", "--no-isolation", "--outdir", out, src], cwd=out, timeout=300))
