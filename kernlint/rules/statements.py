"""A finding's source line refined from its function's `def` line to the statement that issued the op.

The profiler's Python events carry a frame's first line (`path/file.py(129): apply_weights`, where 129 is the
function's `def`, or its first decorator), so a finding's source names the function, not the statement. Where
the file is in the source root, its function defined at that line is parsed (`ast`) and searched for calls of
the launching op's Python names (kernlint.trace.names.python_call_names: the op the user's code called, or
the op that launched the event where that one has no Python name: `aten::new_ones` -> `x.new_ones(...)` /
`torch.new_ones(...)`). When exactly
one statement calls one of them, that statement's line is the source; otherwise (no match, two statements, a
file that is not there or does not parse, a frame that is not a function) the `def` line stays. The finding
says which in `details["source_line"]` ("statement" or "function"); a refined one keeps its `def` line in
`details["def_line"]`, which its fingerprint uses, so a finding's fingerprint does not depend on whether its
file was found.

Files are read only under the root (symlinks resolved: a trace may name any path), only regular files under
MAX_SOURCE_BYTES, and each once (parsed trees are cached); the CLI reads only the files its source map
(kernlint.rules.sources) resolved into the checkout.
"""
from __future__ import annotations

import ast
import dataclasses
from collections.abc import Callable, Iterable
from pathlib import Path

from kernlint.fileio import read_regular
from kernlint.rules.sources import file_and_line
from kernlint.trace.names import python_call_names

MAX_SOURCE_BYTES = 2 * 1024 * 1024
SOURCE_LINE_STATEMENT = "statement"
SOURCE_LINE_FUNCTION = "function"

_FRAMES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)   # their bodies run in other frames


def _called_name(func: ast.expr) -> str | None:
    if isinstance(func, ast.Attribute):
        return func.attr
    if isinstance(func, ast.Name):
        return func.id
    return None


def _functions_at(tree: ast.AST, line: int) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    """The functions whose code starts at `line`: the `def`, or the first decorator (a frame's first line)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            if line in (first, node.lineno):
                found.append(node)
    return found


def calling_statements(function: ast.FunctionDef | ast.AsyncFunctionDef, names: Iterable[str]) -> set[int]:
    """The lines of the statements of `function`'s own body (not of functions, lambdas or classes defined in
    it) that call one of `names` (`x.name(...)`, `mod.name(...)`, `name(...)`). A call inside a compound
    statement's header (`if x.item():`) counts for that statement."""
    wanted = set(names)
    lines: set[int] = set()
    stack: list[tuple[ast.AST, int]] = [(s, s.lineno) for s in function.body if not isinstance(s, _FRAMES)]
    while stack:
        node, line = stack.pop()
        if isinstance(node, ast.Call) and _called_name(node.func) in wanted:
            lines.add(line)
        for child in ast.iter_child_nodes(node):
            if isinstance(child, _FRAMES):
                continue
            stack.append((child, child.lineno if isinstance(child, ast.stmt) else line))
    return lines


def statement_line(tree: ast.AST, def_line: int, ops: Iterable[str | None], function: str | None = None
                   ) -> int | None:
    """The line of the one statement of the function defined at `def_line` that calls the first op of `ops` that
    has Python names (the op the code called; the launching op only where that one has none, e.g. an autograd
    node); None when there is no such function, no such statement, or several."""
    candidates = _functions_at(tree, def_line)
    if function and len(candidates) > 1:
        candidates = [c for c in candidates if function.rpartition(".")[2] == c.name]
    if len(candidates) != 1:
        return None
    for op in ops:
        names = python_call_names(op)
        if names:
            lines = calling_statements(candidates[0], names)
            return lines.pop() if len(lines) == 1 else None
    return None


def read_source_file(root: Path, file: str, max_bytes: int = MAX_SOURCE_BYTES) -> bytes | None:
    """The bytes of a source file a trace names (`file`: relative to `root`, or absolute), or None unless it is
    a regular file of at most `max_bytes` inside `root` (a resolved path; links resolved too): a trace may name
    any path, /etc/passwd, a FIFO that blocks, /dev/zero, a 3 GB sparse file."""
    try:
        path = Path(file)
        real = (path if path.is_absolute() else root / path).resolve()
        real.relative_to(root)   # ValueError outside the root
        return read_regular(real, max_bytes, follow_links=False)   # resolved: a link swapped in is refused
    except (OSError, ValueError, RuntimeError):
        return None


class SourceStatements:
    """Statement lines of the Python files under `root`, each file read once and parsed once: one per check
    (kernlint.pipeline.SourceHandling.statements), shared by the inline-comment reader (`text_lines`, and the
    statement whose comment counts) and the refinement of each finding's line."""

    def __init__(self, root: Path, max_bytes: int = MAX_SOURCE_BYTES):
        self.root = Path(root)
        self.max_bytes = max_bytes
        self._data: dict[str, bytes | None] = {}
        self._text: dict[str, list[str] | None] = {}
        self._trees: dict[str, ast.AST | None] = {}
        self._lines: dict[tuple, int | None] = {}
        self._resolved_root: Path | None = None

    def data(self, file: str) -> bytes | None:
        """The file's bytes (a path relative to the root, or absolute inside it), read once; None when it is
        outside the root, not a regular file, too large or unreadable."""
        if file not in self._data:
            self._data[file] = self._read(file)
        return self._data[file]

    def text_lines(self, file: str) -> list[str] | None:
        """The file's lines (UTF-8, undecodable bytes replaced), or None as for `data`."""
        if file not in self._text:
            data = self.data(file)
            self._text[file] = None if data is None else data.decode("utf-8", errors="replace").splitlines()
        return self._text[file]

    def tree(self, file: str) -> ast.AST | None:
        """The parsed file; None as for `data`, or when it is not Python."""
        if file not in self._trees:
            self._trees[file] = self._parse(file)
        return self._trees[file]

    def _read(self, file: str) -> bytes | None:
        if self._resolved_root is None:
            try:
                self._resolved_root = self.root.resolve()
            except (OSError, RuntimeError):
                return None
        return read_source_file(self._resolved_root, file, self.max_bytes)

    def _parse(self, file: str) -> ast.AST | None:
        data = self.data(file)
        if data is None:
            return None
        try:
            return ast.parse(data, filename=file)
        except (ValueError, SyntaxError, RecursionError, MemoryError):
            return None

    def line_of(self, source: str | None, ops: Iterable[str | None], function: str | None = None) -> int | None:
        """The statement line for a finding at `source` (`file.py:DEF_LINE`) launched by `ops`, or None."""
        located = file_and_line(source)
        if located is None or function == "<module>":
            return None
        file, line = located
        ops = tuple(ops)
        key = (file, line, ops, function)
        if key not in self._lines:
            tree = self.tree(file)
            self._lines[key] = None if tree is None else statement_line(tree, line, ops, function)
        return self._lines[key]

    def refined(self, finding, only: Callable[[str], bool] | None = None):
        """The finding with its source at the statement line where one statement is found, and
        `details["source_line"]` saying which line it names. `only`: which files may be read (the pipeline's:
        those the source map resolved into the checkout)."""
        source = finding.source
        located = file_and_line(source)
        if located is None:
            return finding
        if isinstance(finding.details, dict) and "source_line" in finding.details:
            return finding   # refined already
        file, def_line = located
        line = None if only is not None and not only(file) else \
            self.line_of(source, (finding.top_op, finding.launch_op), finding.function)
        details = dict(finding.details) if isinstance(finding.details, dict) else {}
        if line is None or line == def_line:
            details["source_line"] = SOURCE_LINE_FUNCTION
            return dataclasses.replace(finding, details=details)
        details.update(source_line=SOURCE_LINE_STATEMENT, def_line=def_line)
        return dataclasses.replace(finding, source=f"{file}:{line}", details=details)


def with_statement_lines(result, statements: SourceStatements, only: Callable[[str], bool] | None = None):
    """The check result with every finding's source refined to its statement line (reports and suppressed
    findings alike); `only` as for SourceStatements.refined."""
    reports = []
    for report in result.reports:
        outcomes = [dataclasses.replace(o, findings=[statements.refined(f, only) for f in o.findings])
                    for o in report.outcomes]
        reports.append(dataclasses.replace(report, outcomes=outcomes))
    suppressed = [dataclasses.replace(s, finding=statements.refined(s.finding, only))
                  if dataclasses.is_dataclass(s) and hasattr(s, "finding") else s for s in result.suppressed]
    return dataclasses.replace(result, reports=reports, suppressed=suppressed)
