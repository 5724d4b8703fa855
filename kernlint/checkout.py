"""Folders of the source checkout that kernlint runs from, when it runs from one (an installed wheel has none).

Torch-free on purpose: `audit --replay` finds the recorded fixture traces here without the capture extra.
"""
from __future__ import annotations

from pathlib import Path

# fixtures/: the regressed workloads, the recorded traces and the rule cases beside them.
CHECKOUT_FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def replay_fixtures(fixtures: Path | None) -> Path:
    """The fixture folder `audit --replay` reads: `fixtures` (--fixtures), else the source checkout's. Raises
    ConfigError, one line saying where to get them, when it holds no cases/ folder: an installed wheel ships
    no fixtures (recorded traces, tens of MB), so a default that does not exist means a wheel."""
    from kernlint.errors import ConfigError

    folder = fixtures or CHECKOUT_FIXTURES
    if (folder / "cases").is_dir():
        return folder
    if fixtures is None and not CHECKOUT_FIXTURES.is_dir():
        raise ConfigError(None, "audit --replay replays the recorded traces of kernlint's source checkout, which "
                                "an installed kernlint does not ship: clone kernlint's repository and run it there, "
                                "or pass --fixtures PATH/TO/kernlint/fixtures")
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
