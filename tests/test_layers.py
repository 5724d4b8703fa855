"""docs/architecture.md's layer table: each package imports only downward."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

import kernlint

PKG = Path(__file__).resolve().parents[1] / "kernlint"
# The top of the stack, beside the CLI: nothing below may import them.
TOP = {"cli", "api", "pytest_plugin", "pipeline"}
FORBIDDEN = {
    "reference": {"workloads", "capture", "trace", "baseline", "rules", "parallel", "report", "errors", "fileio"}
    | TOP,
    "workloads": {"capture", "trace", "baseline", "rules", "parallel", "report"} | TOP,
    "capture": {"trace", "baseline", "rules", "parallel", "report"} | TOP,
    "trace": {"rules", "parallel", "report", "capture", "workloads", "baseline"} | TOP,
    "baseline": {"rules", "parallel", "report", "capture", "workloads"} | TOP,
    "rules": {"parallel", "report"} | TOP,
    "parallel": {"report"} | TOP,   # map/reduce of loading and checking: above rules, below the renderers
    "report": TOP,
}
# `from kernlint import check` imports kernlint.api (the package exports the API lazily).
API_EXPORTS = set(kernlint.__all__) - {"__version__"}


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("kernlint."):
            found.add(node.module.split(".")[1])
        elif isinstance(node, ast.ImportFrom) and node.module == "kernlint":
            found |= {"api" if a.name in API_EXPORTS else a.name for a in node.names}
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
    assert not _imports(PKG / "audit.py") & ({"report"} | TOP)
    assert not _imports(PKG / "rank_worker.py") & ({"report", "rules"} | TOP)


def test_api_and_pytest_plugin_sit_beside_the_cli_and_never_import_it():
    assert not _imports(PKG / "api.py") & {"cli", "pytest_plugin"}
    assert not _imports(PKG / "pytest_plugin.py") & {"cli"}
    assert "api" in _imports(PKG / "pytest_plugin.py")   # the plugin is a client of the API


def test_from_kernlint_import_of_an_api_name_counts_as_importing_api(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text("from kernlint import check, __version__\nimport kernlint.trace.load\n")
    assert _imports(probe) == {"api", "__version__", "trace"}


@pytest.mark.parametrize("layer", ["trace", "rules", "workloads", "capture"])
def test_analysis_layers_do_not_print(layer):
    for file in (PKG / layer).rglob("*.py"):
        calls = [n for n in ast.walk(ast.parse(file.read_text()))
                 if isinstance(n, ast.Call) and getattr(n.func, "id", None) == "print"]
        assert not calls, f"{file} calls print()"
