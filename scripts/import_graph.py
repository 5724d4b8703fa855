"""kernlint's import graph: modules, import circles, and imports that go up the layer table.

    python scripts/import_graph.py [PACKAGE_DIR] [--floors]   # default: kernlint/ beside this script

`--floors` also prints the edges between floors (how many imports go from each floor to each floor below),
the modules most imported (fan-in) and those importing most (fan-out): what the closing notes compare before
and after a change of the architecture.

Reads every module with ast. An edge is an import of another kernlint module, at module level or inside a
function (both tie the modules together); imports under `if TYPE_CHECKING:` are left out (they never run).
A circle is a strongly connected group of two or more modules. Floors are tests/test_layers.py's FLOORS.
"""
from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))


def _module_name(path: Path, pkg: Path) -> str:
    parts = list(path.relative_to(pkg.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _type_checking_lines(nodes) -> set[int]:
    lines: set[int] = set()
    for node in nodes:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                lines.update(range(child.lineno, (child.end_lineno or child.lineno) + 1))
    return lines


def _parse(path: Path) -> ast.AST:
    return ast.parse(path.read_text(encoding="utf-8"))


def import_graph(pkg: Path, parse=_parse) -> dict[str, set[str]]:
    """`parse`: path -> its module's tree (tests/test_layers.py passes the trees it parsed already)."""
    modules = {_module_name(p, pkg): p for p in pkg.rglob("*.py")}
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for name, path in modules.items():
        # One walk of the tree: its `if` statements (for the TYPE_CHECKING blocks) and its imports.
        nodes = [n for n in ast.walk(parse(path))
                 if isinstance(n, (ast.If, ast.Import, ast.ImportFrom))]
        skip = _type_checking_lines(nodes)
        for node in nodes:
            if getattr(node, "lineno", None) in skip:
                continue
            targets: list[str] = []
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [f"{node.module}.{a.name}" for a in node.names] + [node.module]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            for target in targets:
                if target in modules and target != name:
                    graph[name].add(target)
                    break   # `from a.b import c`: the module c if it is one, else a.b
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of two or more modules (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


def floor_summary(graph: dict[str, set[str]], floor_of, names: list[str], top: int = 8) -> list[str]:
    """Lines: floor -> floor edge counts, then the `top` modules by fan-in and by fan-out."""
    lines = []
    counts: dict[tuple[int, int], int] = {}
    for a, targets in graph.items():
        for b in targets:
            fa, fb = floor_of(a), floor_of(b)
            if fa is not None and fb is not None and fa != fb:
                counts[fa, fb] = counts.get((fa, fb), 0) + 1
    for (fa, fb), n in sorted(counts.items(), key=lambda item: (-item[0][0], item[0][1])):
        lines.append(f"floor {names[fa]} -> {names[fb]}: {n}")
    fan_in: dict[str, int] = {}
    for targets in graph.values():
        for b in targets:
            fan_in[b] = fan_in.get(b, 0) + 1
    for title, ranked in (("fan-in", fan_in), ("fan-out", {a: len(t) for a, t in graph.items()})):
        best = sorted(ranked.items(), key=lambda item: (-item[1], item[0]))[:top]
        lines.append(f"{title}: " + ", ".join(f"{m} {n}" for m, n in best))
    return lines


def main() -> int:
    args = [a for a in sys.argv[1:] if a != "--floors"]
    pkg = Path(args[0]).resolve() if args else ROOT / "kernlint"
    graph = import_graph(pkg)
    from test_layers import FLOORS, floor_of

    upward = sorted((a, b) for a, targets in graph.items() for b in targets
                    if floor_of(a) is not None and floor_of(b) is not None and floor_of(b) > floor_of(a))
    found = circles(graph)
    print(f"modules {len(graph)}, import edges {sum(len(t) for t in graph.values())}, "
          f"circles {len(found)}, upward imports {len(upward)}")
    for group in found:
        print("circle:", " <-> ".join(group))
    for a, b in upward:
        print(f"upward: {a} -> {b}")
    if "--floors" in sys.argv[1:]:
        # each floor by its best-known member (the ground floor as "ground", the services floor as "services")
        known = {"errors": "ground", "audit": "services", "api": "api", "__init__": "package"}
        names = [next((known[m] for m in known if m in floor), sorted(floor)[0]) for floor in FLOORS]
        print("\n".join(floor_summary(graph, floor_of, names)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
