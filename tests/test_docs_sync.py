"""The docs name what the code registers: every check kind, output format, parallel backend and entry-point
group, and the Python version pyproject.toml requires. A kind added without its docs fails here."""
from __future__ import annotations

import re
import tomllib

import pytest

from conftest import REPO
from kernlint.parallel import BACKENDS
from kernlint.registry import Registry
from kernlint.report import FORMATS
from kernlint.rules.checks import REGISTRY as KINDS
from kernlint.workloads.base import WORKLOADS

README = (REPO / "README.md").read_text()
ARCHITECTURE = (REPO / "docs" / "architecture.md").read_text()
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())


def _builtin(registry: Registry) -> list[str]:
    return [n for n in registry.names() if registry.is_builtin(n)]


@pytest.mark.parametrize("doc", ["README", "ARCHITECTURE"])
def test_every_registered_check_kind_is_named_in_the_docs(doc):
    text = {"README": README, "ARCHITECTURE": ARCHITECTURE}[doc]
    missing = [k for k in _builtin(KINDS) if f"`{k}`" not in text]
    assert not missing, f"{doc} does not name these check kinds: {missing}"
    count = re.search(r"Registered kinds \((\d+)\)", ARCHITECTURE)
    assert count and int(count.group(1)) == len(_builtin(KINDS))


def test_every_format_and_backend_is_named_in_the_architecture():
    for name in _builtin(FORMATS) + _builtin(BACKENDS):
        assert f"`{name}`" in ARCHITECTURE, name


def test_the_entry_point_groups_in_the_docs_are_the_registries_own():
    groups = {r.group for r in (KINDS, FORMATS, BACKENDS, WORKLOADS)}
    for group in groups:
        assert f"`{group}`" in ARCHITECTURE and f"`{group}`" in README, group
    documented = set(re.findall(r"`(kernlint\.[a-z_]+)`", ARCHITECTURE.split("## Extension points")[1]
                                .split("\n## ")[0]))
    assert {g for g in documented if g.count(".") == 1 and g.split(".")[1] in
            {"check_kinds", "formats", "parallel_backends", "workloads"}} == groups


def test_the_python_version_is_the_same_everywhere():
    required = PYPROJECT["project"]["requires-python"]
    minimum = re.fullmatch(r">=\s*3\.(\d+)", required)
    assert minimum, required
    minor = minimum.group(1)
    assert f"Python 3.{minor}+" in README
    assert PYPROJECT["tool"]["ruff"]["target-version"] == f"py3{minor}"


def test_the_version_has_one_source():
    assert PYPROJECT["project"]["dynamic"] == ["version"]
    assert PYPROJECT["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "kernlint._version.__version__"}
