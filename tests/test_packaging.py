"""Packaging: the wheel ships every package and its data; dependencies are declared; torch is an extra."""
from __future__ import annotations

import ast
import functools
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def test_every_kernlint_package_is_listed_in_pyproject():
    listed = set(tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {".".join(p.parent.relative_to(REPO).parts) for p in (REPO / "kernlint").rglob("__init__.py")}
    assert found <= listed, f"not in [tool.setuptools] packages: {sorted(found - listed)}"


def test_the_report_templates_are_package_data():
    data = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    assert "templates/*" in data["kernlint.report"]
    assert {p.name for p in (REPO / "kernlint" / "report" / "templates").iterdir()} >= {
        "report.html.j2", "report.css", "report.js"}


# ---------------------------------------------------------------------------------------------------------
# Dependencies: every third-party import is declared; the trace-checking path imports no extra.

PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
# Imported but provided by something else, with the reason.
PROVIDED = {
    "triton": "comes with torch's CUDA builds (the reference kernels import it only on CUDA)",
    "pytest": "pytest_plugin.py is loaded by pytest itself",
}
# Modules the capture extra exists for: nothing that checks traces may import them at module level.
CAPTURE_ONLY = {"kernlint/reference", "kernlint/workloads", "kernlint/capture", "kernlint/audit.py",
                "kernlint/rank_worker.py"}


def _requirement_names(reqs) -> set[str]:
    from packaging.requirements import Requirement

    return {Requirement(r).name.lower().replace("_", "-") for r in reqs}


def _third_party_imports(path: Path, *, module_level_only: bool = False) -> set[str]:
    import sys

    tree = ast.parse(path.read_text())
    nodes = tree.body if module_level_only else ast.walk(tree)
    found = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            found |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return {m for m in found if m not in sys.stdlib_module_names and m != "kernlint" and m != "__future__"}


@functools.lru_cache(maxsize=1)
def _packages_distributions() -> dict[str, list[str]]:
    import importlib.metadata

    return importlib.metadata.packages_distributions()


def _distribution(module: str) -> str:
    dists = _packages_distributions().get(module)
    assert dists, f"no installed distribution provides the module {module!r}"
    return dists[0].lower().replace("_", "-")


def test_every_third_party_import_is_declared():
    core = _requirement_names(PROJECT["dependencies"])
    extras = {name: _requirement_names(reqs) for name, reqs in PROJECT["optional-dependencies"].items()}
    declared = core | set().union(*extras.values())
    missing = {}
    for file in (REPO / "kernlint").rglob("*.py"):
        for module in _third_party_imports(file) - PROVIDED.keys():
            if _distribution(module) not in declared:
                missing.setdefault(module, file.relative_to(REPO).as_posix())
    assert not missing, f"imported but not declared in pyproject.toml: {missing}"


def test_checking_traces_imports_only_core_dependencies():
    """The core install (no extras) runs check, report, rules, explain and baseline record: the modules on that
    path import only core dependencies at module level (a capture module imports torch lazily, after
    kernlint.extras.require_capture)."""
    core = _requirement_names(PROJECT["dependencies"])
    bad = {}
    for file in (REPO / "kernlint").rglob("*.py"):
        rel = file.relative_to(REPO).as_posix()
        if any(rel == c or rel.startswith(c + "/") for c in CAPTURE_ONLY) or rel == "kernlint/pytest_plugin.py":
            continue
        for module in _third_party_imports(file, module_level_only=True) - PROVIDED.keys():
            if _distribution(module) not in core:
                bad[rel] = module
    assert not bad, f"module-level imports of extras on the checking path: {bad}"


def test_torch_is_only_in_the_capture_extra_and_its_range_admits_the_current_release():
    from packaging.requirements import Requirement
    from packaging.version import Version

    assert "torch" not in _requirement_names(PROJECT["dependencies"])
    (torch_req,) = [Requirement(r) for r in PROJECT["optional-dependencies"]["capture"]
                    if Requirement(r).name == "torch"]
    spec = torch_req.specifier
    # Oldest supported, every minor since, and the current release (2.15 on 2026-12-01).
    for v in ("2.4.0", "2.8.0", "2.11.0", "2.13.0", "2.14.1", "2.15.0"):
        assert Version(v) in spec, f"torch {v} is outside {spec}"
    assert Version("2.3.1") not in spec
    installed = __import__("torch").__version__.split("+")[0]
    assert Version(installed) in spec
    # The bound lives in pyproject.toml alone: the README names the extra, not the range.
    readme = (REPO / "README.md").read_text()
    assert "kernlint[capture]" in readme and str(spec) not in readme


def test_python_versions_agree():
    import re
    import sys

    required = PROJECT["requires-python"]
    minimum = tuple(int(x) for x in re.fullmatch(r">=(\d+)\.(\d+)", required).groups())
    assert sys.version_info[:2] >= minimum, "the interpreter CI runs is older than requires-python"
    readme = (REPO / "README.md").read_text()
    assert f"Python {minimum[0]}.{minimum[1]}+" in readme
    assert not re.search(r"Python 3\.(\d+)\+", readme.replace(f"Python {minimum[0]}.{minimum[1]}+", ""))
    ruff = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["ruff"]["target-version"]
    assert ruff == f"py{minimum[0]}{minimum[1]}"
    actions = (REPO / "docs" / "examples" / "github-actions.yml").read_text()
    for v in re.findall(r'python-version: "(\d+)\.(\d+)"', actions):
        assert tuple(map(int, v)) >= minimum


def test_package_data_is_read_through_importlib_resources():
    """str() of a resource path breaks in wheels of namespace packages and in zip imports."""
    for file in (REPO / "kernlint").rglob("*.py"):
        text = file.read_text()
        assert "Path(str(importlib.resources" not in text and "Path(str(resources" not in text, file
    for package in ("rules", "docs"):
        assert (REPO / package / "__init__.py").is_file(), f"{package}/ must be a regular package"


def test_audit_replay_without_the_checkout_fixtures_says_where_to_get_them(tmp_path, monkeypatch):
    """An installed wheel has no fixtures/ beside the package: `audit --replay` says in one line what to do."""
    from kernlint import checkout
    from kernlint.errors import ConfigError

    monkeypatch.setattr(checkout, "CHECKOUT_FIXTURES", tmp_path / "site-packages" / "fixtures")
    monkeypatch.setattr(checkout, "FIXTURES_PACKAGE", "kernlint_fixtures_not_installed")
    with pytest.raises(ConfigError) as wheel:
        checkout.replay_fixtures(None)
    assert "\n" not in str(wheel.value) and "pip install kernlint-fixtures" in str(wheel.value)
    assert "--fixtures PATH/TO/kernlint/fixtures" in str(wheel.value)
    # The installed kernlint-fixtures package (a folder with cases/) is the default where no checkout is.
    package = tmp_path / "site-packages" / "kernlint_fixtures_installed"
    (package / "cases").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    monkeypatch.setattr(checkout, "FIXTURES_PACKAGE", package.name)
    monkeypatch.syspath_prepend(str(package.parent))
    assert checkout.fixtures_folder() == package and checkout.replay_fixtures(None) == package
    with pytest.raises(ConfigError) as elsewhere:   # --fixtures naming a folder without cases/
        checkout.replay_fixtures(tmp_path)
    assert str(elsewhere.value).startswith(str(tmp_path)) and "kernlint source checkout" in str(elsewhere.value)
    (tmp_path / "cases").mkdir()
    assert checkout.replay_fixtures(tmp_path) == tmp_path
