"""Build the `kernlint-fixtures` wheel: kernlint's rule cases, the recorded traces and baselines they name, and
the regressed workloads, as the package `kernlint_fixtures` (about 16 MB of traces: too much for kernlint's own
wheel). With it installed, `kernlint audit --replay`, `audit --include-regressed` and
`kernlint run fp8-block-linear-new-ones` work from installed wheels (kernlint.checkout.fixtures_folder).

    python scripts/build_fixtures_wheel.py --outdir dist      # or: make fixtures-wheel

The package keeps fixtures/' layout (cases/, the named files under traces/, external/, baselines/, and
regressed/*.py), so the cases' relative paths resolve against the installed package's folder. Built offline
with setuptools (pip wheel --no-build-isolation) from a staging folder; the checkout is not written to.
"""
from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "fixtures"
PACKAGE = "kernlint_fixtures"
# The case keys that name a file or folder relative to the fixtures folder.
_PATH_KEYS = ("trace", "baseline", "baseline-from", "capture")

_PYPROJECT = """\
[build-system]
requires = ["setuptools>=70.1"]
build-backend = "setuptools.build_meta"

[project]
name = "kernlint-fixtures"
version = "{version}"
description = "kernlint's recorded rule cases, their traces and the regressed workloads"
requires-python = ">=3.11"
license = {{ text = "Apache-2.0" }}
dependencies = ["kernlint=={version}"]   # the cases' verdicts are those of this kernlint's rules

[tool.setuptools]
packages = ["{package}"]
include-package-data = false

[tool.setuptools.package-data]
{package} = ["cases/*.toml", "regressed/*.py", "traces/**/*", "external/**/*", "baselines/**/*"]
"""


def named_paths(fixtures: Path = FIXTURES) -> list[str]:
    """The files and folders (relative to `fixtures`) that its cases name."""
    named = set()
    for file in sorted((fixtures / "cases").glob("KL*.toml")):
        for case in tomllib.loads(file.read_text(encoding="utf-8")).get("case", []):
            named.update(case[k] for k in _PATH_KEYS if case.get(k))
    missing = sorted(p for p in named if not (fixtures / p).exists())
    if missing:
        raise SystemExit(f"the cases name files that fixtures/ lacks: {', '.join(missing)}")
    return sorted(named)


def stage(where: Path, fixtures: Path = FIXTURES) -> Path:
    """The project folder of kernlint-fixtures, staged under `where`."""
    where.mkdir(parents=True, exist_ok=True)
    version = re.search(r'^__version__ = "([^"]+)"', (REPO / "kernlint" / "_version.py").read_text(), re.M).group(1)
    (where / "pyproject.toml").write_text(_PYPROJECT.format(version=version, package=PACKAGE))
    package = where / PACKAGE
    package.mkdir()
    (package / "__init__.py").write_text(
        '"""kernlint\'s fixtures (rule cases, recorded traces, regressed workloads): kernlint finds this package\'s\n'
        'folder (kernlint.checkout.fixtures_folder) and reads its files by path; importing it does nothing."""\n')
    for folder, pattern in (("cases", "KL*.toml"), ("regressed", "*.py")):
        (package / folder).mkdir()
        for file in sorted((fixtures / folder).glob(pattern)):
            shutil.copy2(file, package / folder / file.name)
    for rel in named_paths(fixtures):
        src, dst = fixtures / rel, package / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        if src.is_dir():
            shutil.copytree(src, dst, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(src, dst)
    return where


def build(outdir: Path) -> Path:
    """Build the wheel into `outdir` (offline: the running interpreter's setuptools); its path."""
    outdir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="kernlint-fixtures-") as tmp:
        project = stage(Path(tmp) / "project")
        subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "--no-index",
                        "--disable-pip-version-check", "-w", str(outdir), str(project)], check=True,
                       cwd=tmp)
    (wheel,) = sorted(outdir.glob("kernlint_fixtures-*.whl"), key=lambda p: p.stat().st_mtime)[-1:]
    return wheel


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--outdir", type=Path, default=REPO / "dist", help="where the wheel goes (default: dist/)")
    wheel = build(parser.parse_args().outdir)
    print(f"{wheel} ({wheel.stat().st_size / 1e6:.1f} MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
