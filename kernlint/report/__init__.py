"""Output formats: a kernlint.registry.Registry of `Format` declarations.

A Format says what it is (name, a one-line summary for `--help`), which module holds its renderers (imported
on first use, so `--help` and the refusal of a format stay fast), what it can render (`check`, `audit`,
`replay`, `statistics`) and whether it draws from the checked traces' events (`needs_tables`: html's
timelines). The renderers are that module's `render(result, ctx)`, `render_audit(run, ctx)`,
`render_replay(result, ctx)`, `render_statistics(result, ctx)`, taking a RenderContext; they return data
(text or a rich renderable) and only the CLI writes it anywhere.

Everything is resolved before any work: the CLI asks `get_format(name).renderer("audit")` first, so a
format that cannot render what was asked is refused at once. Another package adds a format with an entry
point in the group `kernlint.formats` naming its Format (`mine = "my_pkg.my_format:FORMAT"`).
"""
from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass

from kernlint.errors import ConfigError
from kernlint.registry import Registry

ENTRY_POINT_GROUP = "kernlint.formats"
RENDERS = ("check", "audit", "replay", "statistics")
_FUNCTION = {"check": "render", "audit": "render_audit", "replay": "render_replay",
             "statistics": "render_statistics"}
_WHAT = {"check": "check results", "audit": "audits", "replay": "replays", "statistics": "--statistics"}


@dataclass(frozen=True)
class RenderContext:
    """How the user asked for the output. `verbosity`: -1 with -q, 0 by default, 1 with -v."""

    verbosity: int = 0


@dataclass(frozen=True)
class Format:
    name: str
    summary: str
    module: str                                   # its renderers, imported on first use
    renders: frozenset[str] = frozenset({"check"})
    needs_tables: bool = False                    # draws from the events: the check keeps them (html)

    def __post_init__(self) -> None:
        unknown = set(self.renders) - set(RENDERS)
        if unknown:
            raise ConfigError(None, f"output format {self.name!r} declares unknown renderers {sorted(unknown)} "
                                    f"(known: {', '.join(RENDERS)})")

    def renderer(self, what: str = "check") -> Callable[..., object]:
        """The function rendering `what`; ConfigError naming the formats that can, if this one cannot."""
        if what not in self.renders:
            able = [f.name for f in FORMATS.values() if what in f.renders]
            raise ConfigError(None, f"output format {self.name!r} does not render {_WHAT[what]}; use one of: "
                                    + ", ".join(able))
        try:
            module = importlib.import_module(self.module)
        except ImportError as exc:
            raise ConfigError(None, f"output format {self.name!r} ({self.module}) failed to load: {exc}") from exc
        function = getattr(module, _FUNCTION[what], None)
        if not callable(function):
            raise ConfigError(None, f"output format {self.name!r} declares {what} but {self.module} has no "
                                    f"{_FUNCTION[what]}()")
        return function


def _builtin(name: str, summary: str, *renders: str, needs_tables: bool = False) -> None:
    FORMATS.register(name, Format(name, summary, f"{__name__}.{name}_format", frozenset(renders), needs_tables))


def _declare_builtins() -> None:
    _builtin("text", "the terminal: findings grouped by problem, a summary line", "check", "audit", "replay",
             "statistics")
    _builtin("json", "a stable schema, schema_version 1, for scripts", "check", "audit", "replay", "statistics")
    _builtin("concise", "one path:line: ID message line per cause, for editors and problem matchers", "check")
    _builtin("github", "GitHub Actions annotations on the launching file:line", "check")
    _builtin("markdown", "a CI job summary: verdict per rule, then the findings", "check")
    _builtin("sarif", "SARIF 2.1.0 for code scanning and IDE viewers", "check")
    _builtin("junit", "JUnit XML: a test case per rule verdict", "check", "audit", "replay")
    _builtin("html", "one self-contained file with timelines, to attach to a PR", "check", "audit",
             needs_tables=True)


FORMATS: Registry[Format] = Registry("output format", ENTRY_POINT_GROUP, builtins=_declare_builtins,
                                     summary=lambda f: f.summary)


def format_names() -> list[str]:
    """Every output format, text first, then the others (the plugins' included) by name."""
    return sorted(FORMATS.names(), key=lambda n: (n != "text", n))


def get_format(name: str) -> Format:
    return FORMATS.get(name)


def renderer(name: str) -> Callable[..., object]:
    """The renderer of a check result (kernlint.rules.result.CheckResult) in this format."""
    return get_format(name).renderer("check")


def audit_renderer(name: str) -> Callable[..., object]:
    """The renderer of an audit run (kernlint.audit.AuditRun) in this format."""
    return get_format(name).renderer("audit")


def replay_renderer(name: str) -> Callable[..., object]:
    """The renderer of a replay of recorded cases (kernlint.cases.AuditResult) in this format."""
    return get_format(name).renderer("replay")
