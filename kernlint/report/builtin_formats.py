"""The built-in output formats: the formats registry's default plugin (kernlint.report.DEFAULT_PLUGINS),
loaded the way another package's plugin is, registering each format on import.

Each Format declares what it renders and holds a function that imports its renderers' module
(`kernlint.report.<name>_format`, whose RENDERER is a kernlint.report.Renderer) on first use: `--help`, the
refusal of a format that cannot render something and the other formats never import it.
"""
from __future__ import annotations

import importlib

from kernlint.report import Format, Renderer, register


def _builtin(name: str, summary: str, renders: frozenset[str], **options) -> Format:
    """A built-in format whose renderers are `kernlint.report.<name>_format`'s RENDERER, imported on first use
    (so `--help`, a refusal and the other formats never import that module)."""
    def load() -> Renderer:
        return importlib.import_module(f"kernlint.report.{name}_format").RENDERER

    return Format(name, summary, load, renders, **options)


ALL = frozenset({"check", "audit", "replay", "statistics"})
CHECK = frozenset({"check"})

# In this order: `--format`'s help lists text first, then the others by name; a refusal names the formats that
# can render what was asked in this order.
BUILTIN_FORMATS: tuple[Format, ...] = (
    _builtin("text", "the terminal: findings grouped by problem, a summary line", ALL),
    _builtin("json", "a stable schema, schema_version 1, for scripts", ALL),
    _builtin("concise", "one path:line: ID message line per cause, for editors and problem matchers", CHECK),
    _builtin("github", "GitHub Actions annotations on the launching file:line", CHECK),
    _builtin("gitlab", "GitLab Code Quality JSON (a merge request's code quality widget)", CHECK),
    _builtin("markdown", "a CI job summary: verdict per rule, then the findings", CHECK),
    _builtin("sarif", "SARIF 2.1.0 for code scanning and IDE viewers", CHECK),
    _builtin("junit", "JUnit XML: a test case per rule verdict", frozenset({"check", "audit", "replay"})),
    _builtin("html", "one self-contained file with timelines, to attach to a PR",
             frozenset({"check", "audit"}), needs_tables=True),
)

for _format in BUILTIN_FORMATS:
    register(_format)
