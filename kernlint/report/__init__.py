"""Output formats: one module each (`<name>_format.py` in this package, or a module another package names
in the entry-point group `kernlint.formats`), found by name. A format is one module with
`render(result) -> str | renderable` and, if it renders audits, `render_audit` and `render_replay`, plus a
one-line module docstring that `--help` shows. The CLI's `--format` choices come from here, without
importing the modules (so `--help` stays fast). Renderers return data; only the CLI writes it anywhere."""
from __future__ import annotations

import ast
import importlib
import importlib.util
import pkgutil
from collections.abc import Callable
from functools import cache
from importlib.metadata import entry_points
from pathlib import Path

from kernlint.errors import ConfigError

_SUFFIX = "_format"


ENTRY_POINT_GROUP = "kernlint.formats"


@cache
def _modules() -> dict[str, str]:
    """format name -> module: the built-in ones, then those other packages name in the entry-point group
    `kernlint.formats` (`[project.entry-points."kernlint.formats"] mine = "my_pkg.my_format"`). A plugin
    cannot replace a built-in format."""
    found = {m.name[: -len(_SUFFIX)]: f"{__name__}.{m.name}" for m in pkgutil.iter_modules(__path__)
             if m.name.endswith(_SUFFIX)}
    for entry in entry_points(group=ENTRY_POINT_GROUP):
        found.setdefault(entry.name, entry.value)
    return found


def format_names() -> list[str]:
    """Every output format: text, json, github, markdown, ..., and the plugins'."""
    return sorted(_modules(), key=lambda n: (n != "text", n))


def _module(name: str):
    if name not in _modules():
        raise ConfigError(None, f"no output format {name!r} (known: {', '.join(format_names())})")
    try:
        return importlib.import_module(_modules()[name])
    except ImportError as exc:
        raise ConfigError(None, f"output format {name!r} ({_modules()[name]}) failed to load: {exc}") from exc


@cache
def capabilities(name: str) -> frozenset[str]:
    """The renderers a format module defines at its top level (render, render_audit, render_replay,
    render_statistics), read from its source without importing it: a format that cannot render what was
    asked is refused before any work, and before the renderers' imports (pandas, jinja2) are paid for."""
    if name not in _modules():
        raise ConfigError(None, f"no output format {name!r} (known: {', '.join(format_names())})")
    try:
        spec = importlib.util.find_spec(_modules()[name])
    except (ImportError, ValueError):
        spec = None
    origin = spec.origin if spec is not None else None
    source = Path(origin).read_text(encoding="utf-8") if origin and origin.endswith(".py") and Path(
        origin).is_file() else None
    if source is None:   # no source file (a zip or compiled-only install): ask the module itself
        module = _module(name)
        return frozenset(a for a in _RENDERERS if callable(getattr(module, a, None)))
    tree = ast.parse(source)
    return frozenset(node.name for node in tree.body if isinstance(node, ast.FunctionDef) and node.name in _RENDERERS)


_RENDERERS = ("render", "render_audit", "render_replay", "render_statistics")


def _part(name: str, what: str, attribute: str) -> Callable[[object], object]:
    if attribute not in capabilities(name):
        raise ConfigError(None, f"output format {name!r} does not render {what}; use one of: "
                          + ", ".join(n for n in format_names() if attribute in capabilities(n)))
    return getattr(_module(name), attribute)


def renderer(name: str) -> Callable[[object], object]:
    """The renderer of a check result (kernlint.report.model.CheckResult) in this format."""
    return _part(name, "check results", "render")


def audit_renderer(name: str) -> Callable[[object], object]:
    """The renderer of an audit run (kernlint.audit.AuditRun) in this format."""
    return _part(name, "audits", "render_audit")


def replay_renderer(name: str) -> Callable[[object], object]:
    """The renderer of a replay of recorded cases (kernlint.rules.cases.AuditResult) in this format."""
    return _part(name, "replays", "render_replay")
