"""The wheel ships every package: a package missing from pyproject's list installs broken outside a checkout."""
from __future__ import annotations

import tomllib
from pathlib import Path

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
