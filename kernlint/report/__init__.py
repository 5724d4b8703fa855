"""Output formats: one module each (`<name>_format.py` in this package), found by name. A new format is
one module with `render(result) -> str | renderable` and, if it renders audits, `render_audit` and
`render_replay`, plus a one-line module docstring that `--help` shows. The CLI's `--format` choices come
from here, without importing the modules (so `--help` stays fast). Renderers return data; only the CLI
writes it anywhere."""
from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable

from kernlint.errors import ConfigError

_SUFFIX = "_format"


def format_names() -> list[str]:
    """Every output format, by module name: text, json, github, markdown, ..."""
    names = [m.name[: -len(_SUFFIX)] for m in pkgutil.iter_modules(__path__) if m.name.endswith(_SUFFIX)]
    return sorted(names, key=lambda n: (n != "text", n))


def _module(name: str):
    if name not in format_names():
        raise ConfigError(None, f"no output format {name!r} (known: {', '.join(format_names())})")
    return importlib.import_module(f"{__name__}.{name}{_SUFFIX}")


def _part(name: str, what: str, attribute: str) -> Callable[[object], object]:
    fn = getattr(_module(name), attribute, None)
    if fn is None:
        raise ConfigError(None, f"output format {name!r} does not render {what}; use one of: "
                          + ", ".join(n for n in format_names() if hasattr(_module(n), attribute)))
    return fn


def renderer(name: str) -> Callable[[object], object]:
    """The renderer of a check result (kernlint.report.model.CheckResult) in this format."""
    return _part(name, "check results", "render")


def audit_renderer(name: str) -> Callable[[object], object]:
    """The renderer of an audit run (kernlint.audit.AuditRun) in this format."""
    return _part(name, "audits", "render_audit")


def replay_renderer(name: str) -> Callable[[object], object]:
    """The renderer of a replay of recorded cases (kernlint.rules.cases.AuditResult) in this format."""
    return _part(name, "replays", "render_replay")
