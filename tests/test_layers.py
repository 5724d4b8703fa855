"""docs/architecture.md's layer table: each module imports only from its own floor or the floors below."""
from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

import pytest

import kernlint

PKG = Path(__file__).resolve().parents[1] / "kernlint"
DOC = PKG.parent / "docs" / "architecture.md"

# Bottom to top. A name is a top-level module (`audit`) or package (`trace`) of kernlint.
FLOORS: list[set[str]] = [
    {"errors", "fileio", "extras", "checkout", "registry", "_version", "device", "_sigint_ignored"},   # ground
    {"reference"},
    {"workloads"},
    {"capture"},
    {"trace"},
    {"baseline"},
    {"rules"},
    {"parallel"},
    {"pipeline"},
    {"audit", "cases", "config", "rank_worker"},
    {"report"},
    {"api", "pytest_plugin"},
    {"cli"},
    {"__init__", "__main__"},   # the package (exports the API lazily) and `python -m kernlint`
]
# Within a floor, who may import whom (anything else on one floor is independent).
SAME_FLOOR = {("extras", "errors"), ("fileio", "errors"), ("registry", "errors"), ("device", "errors"),
              ("checkout", "errors"),
              ("pytest_plugin", "api")}
# `from kernlint import check` imports kernlint.api (the package exports the API lazily).
API_EXPORTS = set(kernlint.__all__) - {"__version__"}


def floor_of(module: str) -> int | None:
    """The floor of a dotted module name (kernlint.trace.load -> trace's floor)."""
    parts = module.split(".")
    name = parts[1] if len(parts) > 1 and parts[0] == "kernlint" else "__init__" if module == "kernlint" else None
    for i, floor in enumerate(FLOORS):
        if name in floor:
            return i
    return None


@functools.cache
def _tree(path: Path) -> ast.AST:
    """A module's tree, parsed once for the tests here that read it (imports, prints, the import graph)."""
    return ast.parse(path.read_text(encoding="utf-8"))


def _imports(path: Path) -> set[str]:
    tree = _tree(path)
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("kernlint."):
            found.add(node.module.split(".")[1])
        elif isinstance(node, ast.ImportFrom) and node.module == "kernlint":
            found |= {"api" if a.name in API_EXPORTS else a.name for a in node.names}
        elif isinstance(node, ast.Import):
            found |= {a.name.split(".")[1] for a in node.names if a.name.startswith("kernlint.")}
    return found


def _unit(path: Path) -> str:
    rel = path.relative_to(PKG)
    return rel.parts[0] if len(rel.parts) > 1 else rel.stem


def test_every_module_has_a_floor():
    units = {_unit(p) for p in PKG.rglob("*.py")}
    assert not units - set().union(*FLOORS), "add these to FLOORS (and docs/architecture.md's table)"
    assert not set().union(*FLOORS) - units - {"device"}, "FLOORS names modules that do not exist"


@pytest.mark.parametrize("path", sorted(PKG.rglob("*.py")), ids=lambda p: str(p.relative_to(PKG)))
def test_a_module_imports_only_its_floor_or_below(path):
    me = _unit(path)
    mine = floor_of(f"kernlint.{me}")
    for other in _imports(path) - {me}:
        theirs = floor_of(f"kernlint.{other}")
        assert theirs is not None, f"{path.relative_to(PKG.parent)} imports kernlint.{other}, which has no floor"
        assert theirs < mine or (theirs == mine and (me, other) in SAME_FLOOR), (
            f"{path.relative_to(PKG.parent)} imports kernlint.{other} (floor {theirs}) from floor {mine}")


def test_the_reference_kernels_import_nothing_of_kernlint():
    for file in (PKG / "reference").rglob("*.py"):
        assert not _imports(file) - {"reference"}, file


def test_the_architecture_doc_lists_the_floors_in_this_order():
    """docs/architecture.md's layer table has one row per floor, bottom first, naming each module of it."""
    table = DOC.read_text().split("## Layers", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in table.splitlines() if line.startswith("| ") and not line.startswith("| floor")
            and not line.startswith("|---")]
    assert len(rows) == len(FLOORS), rows
    for row, floor in zip(rows, FLOORS, strict=True):
        named = set(re.findall(r"`(?:kernlint/)?([a-z_]+?)(?:\.py|/)?`", row.split("|")[2]))
        assert floor - {"__main__", "__init__"} <= named, (row[:80], floor - named)


def test_from_kernlint_import_of_an_api_name_counts_as_importing_api(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text("from kernlint import check, __version__\nimport kernlint.trace.load\n")
    assert _imports(probe) == {"api", "__version__", "trace"}


def test_an_upward_import_is_caught(tmp_path):
    (tmp_path / "trace").mkdir()
    probe = tmp_path / "trace" / "probe.py"
    probe.write_text("from kernlint.rules.result import Finding\n")
    assert floor_of("kernlint.rules") > floor_of("kernlint.trace")
    assert "rules" in _imports(probe)


@pytest.mark.parametrize("layer", ["trace", "rules", "workloads", "capture", "baseline", "parallel"])
def test_analysis_layers_do_not_print(layer):
    for file in (PKG / layer).rglob("*.py"):
        calls = [n for n in ast.walk(_tree(file))
                 if isinstance(n, ast.Call) and getattr(n.func, "id", None) == "print"]
        assert not calls, f"{file} calls print()"


def test_no_import_circles():
    import sys

    sys.path.insert(0, str(PKG.parent / "scripts"))
    from import_graph import circles, import_graph

    assert circles(import_graph(PKG, parse=_tree)) == []
