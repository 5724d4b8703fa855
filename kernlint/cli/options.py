"""Options: the config file as the defaults of a command's options (`ConfiguredCommand`), and the options
of the check commands as shared decorators that reach a command body as one `CheckOptions`."""
from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from kernlint.cli.app import NORMAL, QUIET, VERBOSE, ByteSize, color_option, warning_line
from kernlint.config import (
    SELECTION_KEYS,
    Config,
    configured_rules,
    param_name,
    resolve_config,
)

# -- configuration ---------------------------------------------------------------------------------------

_CONFIG_META = "kernlint.config"


def _resolve_config(explicit: str | None, isolated: bool) -> Config:
    from kernlint.report import format_names

    config = resolve_config(explicit, isolated=isolated, formats=format_names())
    for warning in config.warnings:
        warning_line(warning.one_line())
    return config


class ConfiguredCommand(click.Command):
    """A command whose option defaults come from the config file: command-line flag > config > default.

    The config (--config FILE, none with --isolated, else the one found from the working directory upward)
    is read before click processes the options, and becomes the command's `default_map`: every option whose
    parameter is named after a config key (`fail-on` -> fail_on; `rules` -> rule_paths, `format` -> fmt)
    takes the key's value as its default, options added later included. The rule selection keys are not
    defaults but a layer of their own (kernlint.rules.loader.RuleSelection). `config_keys` limits the keys
    that apply to this command (None: all)."""

    def __init__(self, *args, config_keys: frozenset[str] | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.config_keys = config_keys

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if not ctx.resilient_parsing:
            opts, _, _ = self.make_parser(ctx).parse_args(args=list(args))  # a look ahead: --config, --isolated
            help_option = self.get_help_option(ctx)
            if not (help_option is not None and opts.get(help_option.name)):   # --help reads no config
                config = _resolve_config(opts.get("config_file"), bool(opts.get("isolated")))
                ctx.meta[_CONFIG_META] = config
                names = {p.name for p in self.get_params(ctx)}
                defaults = {param_name(k): v for k, v in config.values.items()
                            if k not in SELECTION_KEYS and (self.config_keys is None or k in self.config_keys)
                            and param_name(k) in names}
                ctx.default_map = {**defaults, **(ctx.default_map or {})}
        return super().parse_args(ctx, args)


def current_config() -> Config:
    """The config of the running command (an empty one outside a configured command)."""
    ctx = click.get_current_context(silent=True)
    while ctx is not None:
        if _CONFIG_META in ctx.meta:
            return ctx.meta[_CONFIG_META]
        ctx = ctx.parent
    return Config()


def rules_of(config: Config, rule_paths, no_builtin: bool) -> list:
    """The loaded rules, with the config's [severity] applied (kernlint.config.configured_rules)."""
    return configured_rules(config, rule_paths, builtin=not no_builtin)


# -- the options of the check commands, as shared decorators -------------------------------------------------


def _options(*decorators: Callable) -> Callable:
    """Several option decorators as one, listed in --help in the order given."""
    def apply(f):
        for decorator in reversed(decorators):
            f = decorator(f)
        return f
    return apply


def format_option(f):
    from kernlint.report import FORMATS, format_names

    summaries = FORMATS.summaries()
    return click.option("--format", "--output-format", "fmt", type=click.Choice(format_names()), default="text",
                        show_default=True,
                        help="Output format: " + "; ".join(f"{n} ({summaries[n]})" for n in format_names()) + ".")(f)


debug_option = click.option("--debug", is_flag=True, help="Show tracebacks for errors.")
rules_option = click.option("--rules", "rule_paths", multiple=True, type=click.Path(path_type=Path),
                             help="Extra rule file or folder (repeatable).")
no_builtin_option = click.option("--no-builtin/--builtin", "no_builtin", default=False,
                                  help="Do not load the shipped rules (--builtin: do, whatever the config says).")
config_options = _options(
    click.option("--config", "config_file", type=click.Path(dir_okay=False, path_type=Path), metavar="FILE",
                 help="Read this config file (kernlint.toml, or a pyproject.toml's [tool.kernlint]) instead of "
                      "the one found from the working directory upward."),
    click.option("--isolated", is_flag=True, help="Ignore every config file: built-in defaults and flags only."),
)
selection_options = _options(
    rules_option,
    no_builtin_option,
    click.option("--select", multiple=True,
                 help="Rule ids, prefixes, names, families (R1, baseline), tags (fp8) or ALL (comma-separated, "
                      "any case); replaces the config's "
                      "selection."),
    click.option("--extend-select", multiple=True,
                 help="Like --select, but added to the selection (the config's included)."),
    click.option("--ignore", multiple=True, help="Rule ids, prefixes or names to skip (comma-separated)."),
)
report_options = _options(
    format_option,
    color_option,
    click.option("--output", "-o", type=click.Path(dir_okay=False, path_type=Path),
                 help="Write the report to this file (atomically) instead of stdout."),
    click.option("--statistics", is_flag=True,
                 help="Instead of the findings, a line per rule: how many findings, their summed device time "
                      "and bytes (text or json)."),
    click.option("--quiet", "-q", is_flag=True,
                 help="Text: print only findings and what could not be checked; nothing for a clean check."),
    click.option("--verbose", "-v", is_flag=True,
                 help="Text: add every trace's per-rule verdicts, reasons and notes; say on stderr which "
                      "config file applies."),
    click.option("--source-root", type=click.Path(file_okay=False, exists=True, path_type=Path), default=None,
                 metavar="DIR", help="The checkout that recorded Python paths are mapped into (default: the git "
                                     "checkout around the working directory): SARIF, GitHub and editors then "
                                     "point at its files."),
    click.option("--path-map", multiple=True, metavar="FROM=TO",
                 help="Map recorded paths starting with FROM to TO before matching them against the checkout "
                      "(a trace recorded in /workspace/vllm: --path-map /workspace/vllm/=) (repeatable)."),
)
verdict_options = _options(
    click.option("--fail-on", type=click.Choice(["info", "warning", "error"]), default="warning",
                 show_default=True, help="Lowest severity that makes the exit code 1."),
    click.option("--exit-zero/--no-exit-zero", default=False, help="Exit 0 even when there are findings."),
    click.option("--allow-incomplete/--no-allow-incomplete", default=False,
                 help="Exit 0 instead of 4 when some input could not be fully checked (damaged events, "
                      "unreadable entries); the report still says what."),
    click.option("--max-trace-bytes", type=ByteSize(), default=None, metavar="SIZE",
                 help="Refuse a trace larger than this (bytes, or with a suffix: 512M, 4G). "
                      "Default: kernlint's built-in limit."),
)
baseline_options = _options(
    click.option("--baseline", type=click.Path(dir_okay=False, path_type=Path), default=None, metavar="FILE",
                 help="Also compare with this baseline (kernlint baseline record): added or removed launches, new "
                      "syncs, scratch growth, slower or faster kernels (rules KL801-KL807)."),
    click.option("--strict-env/--no-strict-env", default=False,
                 help="With --baseline: when the GPU, driver or versions differ from the baseline's, or the GPU "
                      "was throttled or shared, make the timing verdict incomplete (exit 4) instead of warning."),
    click.option("--strict-timing/--no-strict-timing", default=False,
                 help="With --baseline: a timing the runs cannot decide (neither the same nor slower; the finding "
                      "says how many more runs would decide) is a KL804 finding instead of a note."),
)


class Jobs(click.ParamType):
    """`--jobs`: a number of worker processes, or auto (0: one per CPU)."""

    name = "jobs"

    def convert(self, value, param, ctx):
        if isinstance(value, int) or str(value).strip().lower() == "auto":
            return value if isinstance(value, int) else "auto"
        try:
            n = int(str(value).strip())
        except ValueError:
            self.fail(f"expected a number of worker processes or auto, got {value!r}", param, ctx)
        if n < 0:
            self.fail(f"expected 0 (auto) or more, got {n}", param, ctx)
        return n


jobs_option = click.option(
    "--jobs", "-j", type=Jobs(), default=1, show_default=True, metavar="N|auto",
    help="Check the traces in N worker processes (auto or 0: one per CPU). A worker holds one trace at a time "
         "and returns a small summary; the cross-rank rules and the baseline comparison read only those, so "
         "memory does not grow with the number of ranks. The report is the same for every N.")
parallel_options = _options(
    jobs_option,
    click.option("--backend", default=None, metavar="NAME",
                 help="Where the --jobs workers run: processes (default), serial, or dask (a local Dask "
                      "cluster of N workers; needs pip install 'kernlint[distributed]')."),
    click.option("--scheduler", default=None, metavar="ADDRESS",
                 help="Check on an existing Dask cluster (tcp://host:8786): its workers need kernlint installed "
                      "and the trace files at the same paths."),
)
capture_option = click.option(
    "--capture", "captures", multiple=True, type=click.Path(dir_okay=False, path_type=Path), metavar="FILE",
    help="A trace that recorded the CUDA-graph captures the checked traces replay (vLLM's graph_capture_rank_*):"
         " replayed kernels are attributed to the captured launches (repeatable). Capture and replay traces "
         "given together, or in one folder, are paired by content without it (a capture trace whose captures "
         "align with a replay trace's graphs).")
suppression_options = _options(
    click.option("--suppress-all", is_flag=True,
                 help="Write every current finding into the suppressions file (kernlint-suppressions.json in the "
                      "working directory, or --suppressions-location): later runs report only new ones."),
    click.option("--suppress-rule", multiple=True, metavar="ID",
                 help="Like --suppress-all, for this rule's findings only (repeatable)."),
    click.option("--suppressions-location", type=click.Path(dir_okay=False, path_type=Path), default=None,
                 metavar="FILE", help="The suppressions file to read and write (default: kernlint-suppressions.json "
                                      "in the working directory)."),
    click.option("--prune-suppressions", is_flag=True,
                 help="Remove from the suppressions file what no longer occurs."),
    click.option("--report-unused-ignores", is_flag=True,
                 help="After the check, list on stderr each inline `# kernlint: ignore...` comment that "
                      "suppressed nothing (file:line: unused ignore[ID]), in the files the findings' sources were "
                      "read from (comments in other files are not judged). Does not change the exit code."),
    click.option("--fix-unused-ignores", is_flag=True,
                 help="Remove those unused ignore comments from their files (rewritten atomically; the code "
                      "stays). Implies --report-unused-ignores."),
)
# Every option of `check` and `run` (and of what checks traces next).
def extra_output_options(f):
    """`--sarif-output FILE`, `--junit-output FILE`, ... (every format of the registry): more outputs of the same
    check, beside --format, from one reading of the traces (semgrep's --sarif-output)."""
    from kernlint.report import format_names

    for name in reversed(format_names()):
        f = click.option(f"--{name}-output", f"output_{name}", type=click.Path(dir_okay=False, path_type=Path),
                         default=None, metavar="FILE",
                         help=f"Also write the {name} report to FILE (the same check, read once).")(f)
    return f


check_options = _options(selection_options, baseline_options, report_options, extra_output_options,
                          verdict_options, parallel_options, config_options, debug_option)
repeat_option = click.option(
    "--repeat", type=click.IntRange(1, 10_000), default=1, show_default=True,
    help="Profiled runs of the workload, each a ProfilerStep of the trace. Timing against a baseline needs "
         "5 or more ([thresholds] min-runs).")


@dataclasses.dataclass
class CheckOptions:
    """The values of `check_options`, by parameter name. Options added to the commands that this class does
    not name yet land in `extra`."""

    rule_paths: tuple[Path, ...] = ()
    no_builtin: bool = False
    select: tuple[str, ...] = ()
    extend_select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    fmt: str = "text"
    output: Path | None = None
    statistics: bool = False
    quiet: bool = False
    verbose: bool = False
    fail_on: str = "warning"
    exit_zero: bool = False
    allow_incomplete: bool = False
    max_trace_bytes: int | None = None
    config_file: Path | None = None
    isolated: bool = False
    debug: bool = False
    baseline: Path | None = None
    strict_env: bool = False
    strict_timing: bool = False
    jobs: int | str = 1
    backend: str | None = None
    scheduler: str | None = None
    captures: tuple[Path, ...] = ()
    suppress_all: bool = False
    suppress_rule: tuple[str, ...] = ()
    suppressions_location: Path | None = None
    prune_suppressions: bool = False
    extra: dict[str, Any] = dataclasses.field(default_factory=dict)

    @classmethod
    def from_params(cls, params: dict[str, Any]) -> CheckOptions:
        names = {f.name for f in dataclasses.fields(cls)} - {"extra"}
        options = cls(**{k: v for k, v in params.items() if k in names},
                      extra={k: v for k, v in params.items() if k not in names})
        if options.quiet and options.verbose:
            raise click.UsageError("-q/--quiet and -v/--verbose cannot be combined")
        return options

    @property
    def verbosity(self) -> int:
        return QUIET if self.quiet else VERBOSE if self.verbose else NORMAL


device_option = click.option("--device", type=click.Choice(["auto", "cuda", "cpu"]), default="auto",
                              show_default=True, help="Where to run: auto takes the GPU when torch sees one.")
