"""Output formats: a kernlint.registry.Registry of `Format` declarations, each with its typed `Renderer`.

A Format says what it is (name, a one-line summary for `--help`), what it can render (`check`, `audit`,
`replay`, `statistics`), whether it draws from the checked traces' events (`needs_tables`: html's timelines),
and its `Renderer`: the object holding one function per thing it renders (`check(result, ctx)`,
`audit(run, ctx)`, `replay(result, ctx)`, `statistics(result, ctx)`, taking a RenderContext; they return data,
text or a rich renderable, and only the CLI writes it anywhere). A Format holds the Renderer itself, or a
function returning it that imports the renderers' module on first use (`--help` and the refusal of a format
stay fast, and html's jinja2 is imported only for html): the Renderer is then checked to render exactly what
the Format declared.

Everything is resolved before any work: the CLI asks `get_format(name).renderer("audit")` first, so a
format that cannot render what was asked is refused at once. The built-in formats are declared in
`kernlint.report.builtin_formats`, the registry's default plugin, loaded as another package's plugin is:
with an entry point in the group `kernlint.formats` naming its Format (`mine = "my_pkg.my_format:FORMAT"`,
`FORMAT = Format("mine", "...", Renderer(check=render))`).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from kernlint.errors import ConfigError
from kernlint.registry import Registry

ENTRY_POINT_GROUP = "kernlint.formats"
RENDERS = ("check", "audit", "replay", "statistics")
_WHAT = {"check": "check results", "audit": "audits", "replay": "replays", "statistics": "--statistics"}


@dataclass(frozen=True)
class RenderContext:
    """How the user asked for the output. `verbosity`: -1 with -q, 0 by default, 1 with -v. `embed_trace`: whether
    the HTML report holds the trace for its Perfetto button (kernlint.report.perfetto: auto, always, never)."""

    verbosity: int = 0
    embed_trace: str = "auto"


# (what, ctx) -> text or a rich renderable. What: a CheckResult (kernlint.rules.result) for check and
# statistics, an AuditRun (kernlint.audit) for audit, an AuditResult (kernlint.cases) for replay.
RenderFunction = Callable[..., object]


@dataclass(frozen=True)
class Renderer:
    """A format's renderers, one field per thing a format can render (RENDERS); None: not rendered."""

    check: RenderFunction
    audit: RenderFunction | None = None
    replay: RenderFunction | None = None
    statistics: RenderFunction | None = None

    def by_what(self) -> dict[str, RenderFunction | None]:
        return {"check": self.check, "audit": self.audit, "replay": self.replay, "statistics": self.statistics}

    @property
    def renders(self) -> frozenset[str]:
        return frozenset(what for what, function in self.by_what().items() if function is not None)

    def of(self, what: str) -> RenderFunction | None:
        return self.by_what().get(what)


@dataclass(frozen=True)
class Format:
    name: str
    summary: str
    # The Renderer, or a function returning it that imports its module on first use.
    renderers: Renderer | Callable[[], Renderer]
    # What it renders; None: what its Renderer renders (declare it when `renderers` is a function, so that a
    # format that cannot render something is refused without importing its module).
    renders: frozenset[str] | None = None
    needs_tables: bool = False                    # draws from the events: the check keeps them (html)

    def __post_init__(self) -> None:
        if self.renders is None:
            declared = (self.renderers.renders if isinstance(self.renderers, Renderer) else frozenset({"check"}))
            object.__setattr__(self, "renders", declared)
        unknown = set(self.renders) - set(RENDERS)
        if unknown:
            raise ConfigError(None, f"output format {self.name!r} declares unknown renderers {sorted(unknown)} "
                                    f"(known: {', '.join(RENDERS)})")

    def loaded(self) -> Renderer:
        """Its Renderer (its module imported on the first call); ConfigError when it cannot be loaded or does
        not render what the format declares."""
        found = self.renderers
        if not isinstance(found, Renderer):
            try:
                found = found()
            except ImportError as exc:
                raise ConfigError(None, f"output format {self.name!r} failed to load: {exc}") from exc
            if not isinstance(found, Renderer):
                raise ConfigError(None, f"output format {self.name!r}: its renderers are a {type(found).__name__}, "
                                        "not a kernlint.report.Renderer")
        if found.renders != self.renders:
            raise ConfigError(None, f"output format {self.name!r} declares {', '.join(sorted(self.renders))} but "
                                    f"its Renderer renders {', '.join(sorted(found.renders))}")
        return found

    def renderer(self, what: str = "check") -> RenderFunction:
        """The function rendering `what`; ConfigError naming the formats that can, if this one cannot."""
        if what not in self.renders:
            able = [f.name for f in FORMATS.values() if what in f.renders]
            raise ConfigError(None, f"output format {self.name!r} does not render {_WHAT[what]}; use one of: "
                                    + ", ".join(able))
        function = self.loaded().of(what)
        assert function is not None   # loaded() checked that it renders what the format declares
        return function


# The built-in formats: kernlint's own plugin of the registry, declaring each with a function that imports
# its renderers (kernlint.report.<name>_format) on first use.
DEFAULT_PLUGINS: tuple[str, ...] = ("kernlint.report.builtin_formats",)

FORMATS: Registry[Format] = Registry("output format", ENTRY_POINT_GROUP, default_plugins=DEFAULT_PLUGINS,
                                     summary=lambda f: f.summary)


def register(fmt: Format) -> Format:
    return FORMATS.register(fmt.name, fmt)


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
