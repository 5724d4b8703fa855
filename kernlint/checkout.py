"""Where kernlint's fixtures are: the source checkout's fixtures/ when kernlint runs from one, else the installed
`kernlint-fixtures` distribution (its package `kernlint_fixtures`, built from the repository by
scripts/build_fixtures_wheel.py: an installed kernlint wheel has no fixtures/).

Torch-free on purpose: `audit --replay` finds the recorded fixture traces here without the capture extra.
"""
from __future__ import annotations

from pathlib import Path

# fixtures/: the regressed workloads, the recorded traces and the rule cases beside them.
CHECKOUT_FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
# The package of the kernlint-fixtures distribution: the same layout as fixtures/ (cases/, the traces and
# baselines the cases name, regressed/).
FIXTURES_PACKAGE = "kernlint_fixtures"
# How to get the fixtures, for the error lines of the commands that need them.
GET_FIXTURES = ("pip install kernlint-fixtures (a wheel built from kernlint's source checkout: "
                "make fixtures-wheel), or pass --fixtures PATH/TO/kernlint/fixtures")


def fixtures_folder() -> Path | None:
    """The fixture folder kernlint uses when none is named (--fixtures): the source checkout's fixtures/ when
    kernlint runs from a checkout, else the installed kernlint_fixtures package's folder (imported only here,
    and only when there is no checkout), else None."""
    if (CHECKOUT_FIXTURES / "cases").is_dir():
        return CHECKOUT_FIXTURES
    from importlib.resources import files

    try:
        folder = files(FIXTURES_PACKAGE)
    except ModuleNotFoundError:
        return None
    # A wheel installs unzipped: a real folder (a zip import of it would not be one, and is not used).
    return folder if isinstance(folder, Path) and (folder / "cases").is_dir() else None


def replay_fixtures(fixtures: Path | None) -> Path:
    """The fixture folder `audit --replay` reads: `fixtures` (--fixtures), else fixtures_folder(). Raises
    ConfigError, one line saying where to get them, when there is none or it holds no cases/ folder: an
    installed kernlint wheel ships no fixtures (recorded traces, tens of MB); kernlint-fixtures does."""
    from kernlint.errors import ConfigError

    folder = fixtures or fixtures_folder()
    if folder is None:
        raise ConfigError(None, f"audit --replay replays recorded traces that the kernlint wheel does not ship: "
                                f"{GET_FIXTURES}")
    if (folder / "cases").is_dir():
        return folder
    raise ConfigError(folder, "no cases/ folder here: pass --fixtures with the fixtures/ folder of a kernlint "
                              "source checkout")


def import_path(path: str | Path, name: str):
    """Import the Python file at `path` as module `name` (registered in sys.modules, so dataclasses and
    pickling inside it work): a user's workload file, a fixture program, a script. Raises what importing it
    raises; callers that import a user's file turn that into one line."""
    import importlib.util
    import sys

    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"{path}: not an importable Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module
