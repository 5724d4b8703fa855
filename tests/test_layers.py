"""DESIGN.md's layer table: each package imports only downward."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "kernlint"
FORBIDDEN = {
    "reference": {"workloads", "capture", "trace", "rules", "report", "cli", "errors", "fileio"},
    "workloads": {"trace", "rules", "report", "cli"},
    "capture": {"rules", "report", "cli"},
    "trace": {"rules", "report", "cli", "capture", "workloads"},
    "rules": {"report", "cli"},
    "report": {"cli"},
}


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("kernlint."):
            found.add(node.module.split(".")[1])
        elif isinstance(node, ast.Import):
            found |= {a.name.split(".")[1] for a in node.names if a.name.startswith("kernlint.")}
    return found


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_layer_imports_only_downward(layer):
    for file in (PKG / layer).rglob("*.py"):
        bad = _imports(file) & FORBIDDEN[layer]
        assert not bad, f"{file.relative_to(PKG.parent)} imports {sorted(bad)}"


def test_bottom_modules_import_nothing_of_kernlint():
    for name in ("errors.py", "fileio.py"):
        assert not _imports(PKG / name), name


def test_audit_service_and_rank_worker_sit_below_report_and_cli():
    assert not _imports(PKG / "audit.py") & {"report", "cli"}
    assert not _imports(PKG / "rank_worker.py") & {"report", "cli", "rules"}


@pytest.mark.parametrize("layer", ["trace", "rules", "workloads", "capture"])
def test_analysis_layers_do_not_print(layer):
    for file in (PKG / layer).rglob("*.py"):
        calls = [n for n in ast.walk(ast.parse(file.read_text()))
                 if isinstance(n, ast.Call) and getattr(n.func, "id", None) == "print"]
        assert not calls, f"{file} calls print()"
