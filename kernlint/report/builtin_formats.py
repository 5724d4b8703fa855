"""The built-in output formats: the formats registry's default plugin (kernlint.report.DEFAULT_PLUGINS),
loaded the way another package's plugin is, registering each format on import.

Each Format declares what it renders and holds a function that imports its renderers' module
(`kernlint.report.<name>_format`, whose RENDERER is a kernlint.report.Renderer) on first use: `--help`, the
refusal of a format that cannot render something and the other formats never import it.
"""
from __future__ import annotations

from kernlint.report import Format, Renderer, register


def _text() -> Renderer:
    from kernlint.report.text_format import RENDERER
    return RENDERER


def _json() -> Renderer:
    from kernlint.report.json_format import RENDERER
    return RENDERER


def _concise() -> Renderer:
    from kernlint.report.concise_format import RENDERER
    return RENDERER


def _github() -> Renderer:
    from kernlint.report.github_format import RENDERER
    return RENDERER


def _gitlab() -> Renderer:
    from kernlint.report.gitlab_format import RENDERER
    return RENDERER


def _markdown() -> Renderer:
    from kernlint.report.markdown_format import RENDERER
    return RENDERER


def _sarif() -> Renderer:
    from kernlint.report.sarif_format import RENDERER
    return RENDERER


def _junit() -> Renderer:
    from kernlint.report.junit_format import RENDERER
    return RENDERER


def _html() -> Renderer:
    from kernlint.report.html_format import RENDERER
    return RENDERER


ALL = frozenset({"check", "audit", "replay", "statistics"})
CHECK = frozenset({"check"})

# In this order: `--format`'s help lists text first, then the others by name; a refusal names the formats that
# can render what was asked in this order.
BUILTIN_FORMATS: tuple[Format, ...] = (
    Format("text", "the terminal: findings grouped by problem, a summary line", _text, ALL),
    Format("json", "a stable schema, schema_version 1, for scripts", _json, ALL),
    Format("concise", "one path:line: ID message line per cause, for editors and problem matchers", _concise, CHECK),
    Format("github", "GitHub Actions annotations on the launching file:line", _github, CHECK),
    Format("gitlab", "GitLab Code Quality JSON (a merge request's code quality widget)", _gitlab, CHECK),
    Format("markdown", "a CI job summary: verdict per rule, then the findings", _markdown, CHECK),
    Format("sarif", "SARIF 2.1.0 for code scanning and IDE viewers", _sarif, CHECK),
    Format("junit", "JUnit XML: a test case per rule verdict", _junit, frozenset({"check", "audit", "replay"})),
    Format("html", "one self-contained file with timelines, to attach to a PR", _html,
           frozenset({"check", "audit"}), needs_tables=True),
)

for _format in BUILTIN_FORMATS:
    register(_format)
