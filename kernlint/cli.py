"""The command line. The only layer that prints.

Exit codes:
  0  no finding at or above --fail-on (default: warning), and everything was fully checked; or --exit-zero
  1  findings at or above --fail-on
  2  usage error, unreadable or malformed trace, bad rule file, bad option value, a malformed
     kernlint-suppressions.json, a plugin (another package's entry point) that failed to load, raised or
     broke its contract (the line names its entry point and module): one line on stderr
  3  internal error (a bug in kernlint; rerun with --debug for the traceback)
  4  no finding at or above --fail-on, but something could not be fully checked: a rule verdict is
     incomplete (damaged events in a trace) or a folder held entries that could not be read (no
     permission, dangling link, FIFO, bad gzip); the report says what. --allow-incomplete makes it 0.

Every error a user can cause, click's usage errors included, is exactly one line on stderr:
`kernlint: error: <what is wrong>`. Warnings (an unknown key in a config file) are `kernlint: warning: ...`
lines on stderr, so they never mix with a report on stdout.

Option defaults come from the config file (kernlint.toml or pyproject.toml's [tool.kernlint], found from the
working directory upward; --config FILE, --isolated): see `_ConfiguredCommand` and docs/configuration.md.
The options of the check commands are shared decorators (`_check_options` and its parts), and reach the
command body as one `CheckOptions`, so that an option added to them reaches every check command.
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import io
import json
import os
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from kernlint._version import __version__
from kernlint.config import (
    SELECTION_KEYS,
    Config,
    check_rule_names,
    configured_rules,
    described,
    param_name,
    parse_size,
    resolve_config,
    selection_layer,
)
from kernlint.errors import ConfigError, ExitCode, KernlintError, TraceError
from kernlint.extras import require_capture
from kernlint.report.safe import printable

# Imported here: what every command needs to parse its options. The rest is imported where it is used: rich's
# console (an error line, a rich renderable, the progress display), the capture modules (run, audit, baseline
# record --workload), tempfile (a trace on standard input), shlex (baseline record), and in the command bodies
# the pipeline, the rules and the chosen format's renderers. tests/test_startup_imports.py checks what
# `kernlint check` of a small trace leaves out.

# How much the text report says (kernlint.report.text_format's levels): -q, the default, -v.
QUIET, NORMAL, VERBOSE = -1, 0, 1
# `audit --timeout`'s default: kernlint.capture.child.AUDIT_TIMEOUT_S, which is not imported for the option
# (tests/test_startup_imports.py checks that the two agree).
_AUDIT_TIMEOUT_S = 600.0


@functools.cache
def _stderr():
    """The rich console on stderr (error lines, the progress display), made on first use."""
    from rich.console import Console

    return Console(stderr=True, highlight=False, soft_wrap=True, emoji=False, markup=False)


def _error_line(message: str, prefix: str = "kernlint: error: ", *, join_lines: bool = False) -> None:
    """Print one line on stderr: `message` with every control character (newlines too) shown visibly, or
    with `join_lines` (click's own wrapped messages) its lines joined by spaces first."""
    if join_lines:
        message = " ".join(part.strip() for part in str(message).splitlines() if part.strip())
    _stderr().print(prefix + printable(message), markup=False, emoji=False, highlight=False, soft_wrap=True)


def _split(values: tuple[str, ...]) -> list[str]:
    return [v.strip() for value in values for v in value.split(",") if v.strip()]


def _warning_line(message: str) -> None:
    _error_line(message, prefix="kernlint: warning: ")


def _write_atomically(path: Path, text: str) -> None:
    """Write the whole output or nothing: a temp file beside the target, then rename."""
    from kernlint.fileio import write_text_atomically

    try:
        write_text_atomically(path, text)
    except OSError as exc:
        raise ConfigError(path, f"cannot write output: {exc.strerror or exc}") from None
    except UnicodeEncodeError as exc:
        raise ConfigError(path, f"cannot write output: {exc.reason}") from None


def _full_width(renderable: object) -> int:
    """The width at which `renderable` shows every cell whole: its widest line (80 at least)."""
    from rich.console import Console

    probe = Console(file=io.StringIO(), width=1 << 20, color_system=None, emoji=False, highlight=False)
    return max(80, probe.measure(renderable).maximum)


def _emit(rendered: object, output: Path | None) -> None:
    if isinstance(rendered, str):
        if output:
            _write_atomically(output, rendered)
        else:
            click.echo(rendered, nl=False)
        return
    from kernlint.report.styled import Lines

    terminal = not output and sys.stdout.isatty()
    # Lines alone (the text report of a check) are their plain text off a terminal: the characters rich
    # writes there, without importing it.
    written = rendered.plain_text() if isinstance(rendered, Lines) and not terminal else None
    if written is None:
        from rich.console import Console

        if isinstance(rendered, Lines):
            rendered = rendered.__rich__()
        if terminal:
            Console(highlight=False, soft_wrap=True, emoji=False).print(rendered)
            return
        # A pipe, a file or a CI log gets the width the report needs, so no name in a table is cut or folded
        # (`kernlint rules | cat`); without the padding that a table's last column gets at that width.
        buffer = io.StringIO()
        Console(file=buffer, width=_full_width(rendered), color_system=None, highlight=False, soft_wrap=True,
                emoji=False).print(rendered)
        written = buffer.getvalue()
    text = "\n".join(line.rstrip() for line in written.split("\n"))
    if output:
        _write_atomically(output, text)
    else:
        click.echo(text, nl=False)


def _guarded(fn: Callable[..., int], debug: bool, *args, **kwargs) -> None:
    """Run a command body: user errors become one line and exit 2; bugs exit 3."""
    try:
        code = fn(*args, **kwargs)
    except KernlintError as exc:
        if debug:
            raise
        _error_line(exc.one_line())
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        _error_line("interrupted", prefix="kernlint: ")
        sys.exit(130)
    except Exception as exc:  # a bug: still one line unless --debug
        if debug:
            raise
        from kernlint.registry import plugin_failed

        named = plugin_failed(exc)   # another package's plugin raised: its name, exit 2
        if named is not None:
            _error_line(named.one_line())
            sys.exit(named.exit_code)
        _error_line(f"{type(exc).__name__}: {exc} (rerun with --debug for the traceback)",
                    prefix="kernlint: internal error: ")
        sys.exit(ExitCode.INTERNAL)
    sys.exit(code)


_NO_ARGS_IS_HELP = getattr(click.exceptions, "NoArgsIsHelpError", ())


class _KernlintGroup(click.Group):
    """The `kernlint` group: click's own error handling, with every usage error as one line.

    click in standalone mode prints a usage error as four lines (Usage:, Try..., a blank line, Error:). Here
    click runs with standalone_mode=False and the errors it raises become `kernlint: error: <message>` on
    stderr, exit 2. --help and --version still print and exit 0. Warnings that numpy and pandas raise on
    NaN arithmetic (RuntimeWarning) never reach stderr.
    """

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        if not standalone_mode:  # a caller that handles click's exceptions itself
            return super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            try:
                rv = super().main(args, prog_name or "kernlint", complete_var, standalone_mode=False, **extra)
            except KernlintError as exc:   # a bad config file, read before the command's options
                _error_line(exc.one_line())
                sys.exit(exc.exit_code)
            except _NO_ARGS_IS_HELP:   # `kernlint` alone: the help, as `kernlint --help` prints it
                with click.Context(self, info_name=prog_name or "kernlint") as ctx:
                    click.echo(self.get_help(ctx))
                sys.exit(ExitCode.CLEAN)
            except click.ClickException as exc:
                _error_line(exc.format_message(), join_lines=True)
                sys.exit(exc.exit_code if exc.exit_code else ExitCode.ERROR)
            except click.Abort:
                _error_line("interrupted", prefix="kernlint: ")
                sys.exit(130)
        sys.exit(rv if isinstance(rv, int) else ExitCode.CLEAN)


@click.group(cls=_KernlintGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="kernlint")
def main() -> None:
    """kernlint: catch launch-level performance regressions in PyTorch profiler traces."""


class ByteSize(click.ParamType):
    """A size in bytes: a whole number, or a number with a suffix K, M, G or T (powers of 1024, an optional
    trailing B or iB; 512M, 4G, 1.5GiB)."""

    name = "size"

    def convert(self, value, param, ctx):
        try:
            return parse_size(value)
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


def _max_trace_bytes_default() -> int:
    from kernlint.trace.load import DEFAULT_MAX_TRACE_BYTES

    return DEFAULT_MAX_TRACE_BYTES


def _load(path: Path, max_bytes: int, captures=()):
    from kernlint.trace.load import load_trace

    return load_trace(path, max_bytes=max_bytes, captures=captures)


# -- configuration ---------------------------------------------------------------------------------------

_CONFIG_META = "kernlint.config"


def _resolve_config(explicit: str | None, isolated: bool) -> Config:
    from kernlint.report import format_names

    config = resolve_config(explicit, isolated=isolated, formats=format_names())
    for warning in config.warnings:
        _warning_line(warning.one_line())
    return config


class _ConfiguredCommand(click.Command):
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


def _current_config() -> Config:
    """The config of the running command (an empty one outside a configured command)."""
    ctx = click.get_current_context(silent=True)
    while ctx is not None:
        if _CONFIG_META in ctx.meta:
            return ctx.meta[_CONFIG_META]
        ctx = ctx.parent
    return Config()


def _rules_of(config: Config, rule_paths, no_builtin: bool) -> list:
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


def _format_option(f):
    from kernlint.report import FORMATS, format_names

    summaries = FORMATS.summaries()
    return click.option("--format", "fmt", type=click.Choice(format_names()), default="text", show_default=True,
                        help="Output format: " + "; ".join(f"{n} ({summaries[n]})" for n in format_names())
                             + ".")(f)


_debug_option = click.option("--debug", is_flag=True, help="Show tracebacks for errors.")
_rules_option = click.option("--rules", "rule_paths", multiple=True, type=click.Path(path_type=Path),
                             help="Extra rule file or folder (repeatable).")
_no_builtin_option = click.option("--no-builtin/--builtin", "no_builtin", default=False,
                                  help="Do not load the shipped rules (--builtin: do, whatever the config says).")
_config_options = _options(
    click.option("--config", "config_file", type=click.Path(dir_okay=False, path_type=Path), metavar="FILE",
                 help="Read this config file (kernlint.toml, or a pyproject.toml's [tool.kernlint]) instead of "
                      "the one found from the working directory upward."),
    click.option("--isolated", is_flag=True, help="Ignore every config file: built-in defaults and flags only."),
)
_selection_options = _options(
    _rules_option,
    _no_builtin_option,
    click.option("--select", multiple=True,
                 help="Rule ids, prefixes, names or ALL (comma-separated, any case); replaces the config's "
                      "selection."),
    click.option("--extend-select", multiple=True,
                 help="Like --select, but added to the selection (the config's included)."),
    click.option("--ignore", multiple=True, help="Rule ids, prefixes or names to skip (comma-separated)."),
)
_report_options = _options(
    _format_option,
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
_verdict_options = _options(
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
_baseline_options = _options(
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


_jobs_option = click.option(
    "--jobs", "-j", type=Jobs(), default=1, show_default=True, metavar="N|auto",
    help="Check the traces in N worker processes (auto or 0: one per CPU). A worker holds one trace at a time "
         "and returns a small summary; the cross-rank rules and the baseline comparison read only those, so "
         "memory does not grow with the number of ranks. The report is the same for every N.")
_parallel_options = _options(
    _jobs_option,
    click.option("--backend", default=None, metavar="NAME",
                 help="Where the --jobs workers run: processes (default), serial, or dask (a local Dask "
                      "cluster of N workers; needs pip install 'kernlint[distributed]')."),
    click.option("--scheduler", default=None, metavar="ADDRESS",
                 help="Check on an existing Dask cluster (tcp://host:8786): its workers need kernlint installed "
                      "and the trace files at the same paths."),
)
_capture_option = click.option(
    "--capture", "captures", multiple=True, type=click.Path(dir_okay=False, path_type=Path), metavar="FILE",
    help="A trace that recorded the CUDA-graph captures the checked traces replay (vLLM's graph_capture_rank_*):"
         " replayed kernels are attributed to the captured launches (repeatable). Capture and replay traces "
         "given together, or in one folder, are paired by content without it (a capture trace whose captures "
         "align with a replay trace's graphs).")
_suppression_options = _options(
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
)
# Every option of `check` and `run` (and of what checks traces next).
def _extra_output_options(f):
    """`--sarif-output FILE`, `--junit-output FILE`, ... (every format of the registry): more outputs of the same
    check, beside --format, from one reading of the traces (semgrep's --sarif-output)."""
    from kernlint.report import format_names

    for name in reversed(format_names()):
        f = click.option(f"--{name}-output", f"output_{name}", type=click.Path(dir_okay=False, path_type=Path),
                         default=None, metavar="FILE",
                         help=f"Also write the {name} report to FILE (the same check, read once).")(f)
    return f


_check_options = _options(_selection_options, _baseline_options, _report_options, _extra_output_options,
                          _verdict_options, _parallel_options, _config_options, _debug_option)
_repeat_option = click.option(
    "--repeat", type=click.IntRange(1, 10_000), default=1, show_default=True,
    help="Profiled runs of the workload, each a ProfilerStep of the trace. Timing against a baseline needs "
         "5 or more ([thresholds] min-runs).")


@dataclasses.dataclass
class CheckOptions:
    """The values of `_check_options`, by parameter name. Options added to the commands that this class does
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


def _selected_rules(options: CheckOptions, config: Config) -> list:
    """The rules of this check: loaded, [severity] applied, then selected by the config's selection and the
    command line's, in that order (ruff's layers). The config's [per-source-ignores] is checked against every
    loaded rule first (a rule this check leaves out is still a rule)."""
    from kernlint.rules.loader import RuleSelection, resolve_selection

    rules = _rules_of(config, options.rule_paths, options.no_builtin)
    check_rule_names(config, rules)
    layers = [layer for layer in [selection_layer(config)] if layer is not None]
    layers.append(RuleSelection(select=tuple(_split(options.select)) or None,
                                extend_select=tuple(_split(options.extend_select)),
                                ignore=tuple(_split(options.ignore))))
    return resolve_selection(rules, layers)


def _read_baseline(path: Path):
    from kernlint.baseline import read_baseline

    return read_baseline(path)


def _rendered(result, options: CheckOptions) -> object:
    from kernlint.report import RenderContext, get_format

    what = "statistics" if options.statistics else "check"
    return get_format(options.fmt).renderer(what)(result, RenderContext(verbosity=options.verbosity))


# How a trace read from standard input is named in errors (never the temporary file it is kept in).
STDIN_NAME = "<stdin>"
_STDIN_CHUNK = 1 << 20


@contextlib.contextmanager
def _stdin_as_file(traces, limit: int):
    """`-` among the traces: standard input, copied in chunks into a temporary trace file. The copy stops as
    soon as it passes `limit` bytes (memory: one chunk), and an error about the file names it `<stdin>`."""
    if not any(str(t) == "-" for t in traces):
        yield list(traces), []
        return
    import tempfile

    with tempfile.TemporaryDirectory(prefix="kernlint-stdin-") as tmp:
        head = sys.stdin.buffer.read(2)
        name = "stdin.pt.trace.json.gz" if head == b"\x1f\x8b" else "stdin.pt.trace.json"
        path = Path(tmp) / name
        size = len(head)
        with open(path, "wb") as out:
            out.write(head)
            while size <= limit:
                chunk = sys.stdin.buffer.read(min(_STDIN_CHUNK, limit + 1 - size))
                if not chunk:
                    break
                out.write(chunk)
                size += len(chunk)
        if size > limit:
            raise TraceError(STDIN_NAME, f"standard input: more than --max-trace-bytes ({limit} bytes); not "
                                         "checked (read no further)")
        if not size:
            raise TraceError(STDIN_NAME, "standard input is empty: no trace to check")
        try:
            yield [path if str(t) == "-" else t for t in traces], [f"Trace: read from standard input ({path})"]
        except KernlintError as exc:
            if exc.path != str(path) and str(path) not in exc.problem:
                raise
            renamed = type(exc).__new__(type(exc))   # the same error, naming <stdin> instead of the temp file
            renamed.__dict__.update(exc.__dict__)
            renamed.path = STDIN_NAME if exc.path == str(path) else exc.path
            renamed.problem = exc.problem.replace(str(path), STDIN_NAME)
            renamed.args = (renamed.one_line(),)
            raise renamed from None


def _run_check(traces, options: CheckOptions, notes=()) -> int:
    """Options -> the one check (kernlint.pipeline) -> the chosen format."""
    limit = options.max_trace_bytes or _max_trace_bytes_default()
    with _stdin_as_file(traces, limit) as (paths, more_notes):
        return _check_paths(paths, options, [*notes, *more_notes])


def _check_paths(traces, options: CheckOptions, notes=()) -> int:
    from kernlint.parallel import resolve_jobs
    from kernlint.pipeline import CheckRequest, run_check

    config = _current_config()
    if options.verbosity >= VERBOSE:
        _error_line(described(config), prefix="kernlint: ")
    from kernlint.report import get_format

    chosen = get_format(options.fmt)   # a format that cannot render this is refused before the work
    chosen.renderer("statistics" if options.statistics else "check")
    extra = {k[len("output_"):]: v for k, v in options.extra.items() if k.startswith("output_") and v is not None}
    renderers = {name: get_format(name).renderer("check") for name in extra}
    needs_tables = chosen.needs_tables or any(get_format(name).needs_tables for name in extra)
    request = CheckRequest(
        rules=_selected_rules(options, config),
        baseline_hint="add --baseline FILE (record one with `kernlint baseline record`)",
        paths=list(traces), captures=list(options.captures),
        max_trace_bytes=options.max_trace_bytes or _max_trace_bytes_default(),
        baseline=_read_baseline(options.baseline) if options.baseline else None,
        baseline_label=str(options.baseline or ""), strict_env=options.strict_env,
        strict_timing=options.strict_timing, thresholds=config.thresholds,
        fail_on=options.fail_on, allow_incomplete=options.allow_incomplete, exit_zero=options.exit_zero,
        jobs=resolve_jobs(options.jobs), backend=options.backend, scheduler=options.scheduler,
        keep_tables=needs_tables,   # html's timelines draw from every trace's events
        notes=list(notes), sources=_source_handling(options, config))
    result = run_check(request)
    from kernlint.report import RenderContext

    for name, path in extra.items():   # the extra outputs first: the main one may be stdout
        _emit(renderers[name](result, RenderContext(verbosity=options.verbosity)), path)
    _emit(_rendered(result, options), options.output)
    return result.exit_code


def _source_handling(options: CheckOptions, config: Config):
    """The suppressions and source mapping of a check (kernlint.pipeline.SourceHandling): the bulk file read now
    (a bad one is refused before the work), written or pruned first when asked, once the findings are known."""
    from kernlint.pipeline import SourceHandling
    from kernlint.rules.suppressions import SUPPRESSIONS_FILE, SuppressionFile, bulk_entries, pruned

    bad = [m for m in options.extra.get("path_map", ()) if "=" not in m]
    if bad:
        raise ConfigError(None, f"--path-map {bad[0]!r}: expected FROM=TO")
    # --path-map first, then the config's [path-map]: the first matching prefix wins
    pairs = [tuple(m.split("=", 1)) for m in options.extra.get("path_map", ())] + list(config.path_map.items())
    location = options.suppressions_location or Path.cwd() / SUPPRESSIONS_FILE
    # exists, not is_file: a FIFO or a folder there is refused in one line, never skipped (nor replaced)
    read = SuppressionFile.read(location) if location.exists() else None

    def update(findings, rules, file):
        for rule_id in options.suppress_rule:
            if rule_id.upper() not in {r.id for r in rules}:
                raise ConfigError(None, f"--suppress-rule {rule_id}: no such rule among those checked")
        if options.suppress_all or options.suppress_rule:
            new = bulk_entries(findings, None if options.suppress_all else options.suppress_rule)
            file = SuppressionFile(location, {**(file.upgraded(findings).entries if file else {}), **new})
            _write_atomically(location, file.text())
        elif options.prune_suppressions and file is not None:
            file = pruned(file, findings)
            _write_atomically(location, file.text())
        return file

    return SourceHandling(root=options.extra.get("source_root"), path_map=pairs, suppressions=read,
                          per_source_ignores=config.per_source_ignores, update_suppressions=update)


@main.command(cls=_ConfiguredCommand)
@click.argument("traces", nargs=-1, required=True, type=click.Path(path_type=Path))
@_check_options
@_capture_option
@_suppression_options
def check(traces, **params):
    """Check torch.profiler traces (files, .json.gz, or TensorBoard log folders) against the rules."""
    options = CheckOptions.from_params(params)

    def body() -> int:
        _numpy_without_blas_threads()
        return _run_check(traces, options)

    _guarded(body, options.debug)


# The variables OpenBLAS reads its number of threads from, in its order.
_BLAS_THREADS = ("OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS")


def _numpy_without_blas_threads() -> None:
    """Import numpy (the check's first import of it) with OpenBLAS on one thread. OpenBLAS starts a thread per
    core when it loads, and they spin a while: a tenth of a second of CPU that a check, which does no linear
    algebra, never uses, and that a small check waits for on a busy machine. Only where the user set no
    thread count, and the environment is back as it was at once: what this process starts later (--jobs
    workers, a Dask cluster) and scipy (a baseline's timing tests) read the user's own."""
    if "numpy" in sys.modules or any(name in os.environ for name in _BLAS_THREADS):
        return
    os.environ["OPENBLAS_NUM_THREADS"] = "1"
    try:
        import numpy  # noqa: F401
    finally:
        del os.environ["OPENBLAS_NUM_THREADS"]


@main.command(cls=_ConfiguredCommand)
@click.argument("traces", nargs=-1, required=True, type=click.Path(path_type=Path))
@_selection_options
@_baseline_options
@click.option("--output", "-o", type=click.Path(dir_okay=False, path_type=Path), required=True, metavar="FILE",
              help="The HTML file to write (self-contained: attach it to a PR or keep it as a CI artifact).")
@click.option("--max-trace-bytes", type=ByteSize(), default=None, metavar="SIZE",
              help="Refuse a trace larger than this (bytes, or with a suffix: 512M, 4G).")
@_capture_option
@_config_options
@_debug_option
def report(traces, output, **params):
    """Write a self-contained HTML report of traces (a file, a run folder): verdicts, each finding with its
    rule's docs and source line, timelines of the scopes with findings, the kernel table, allocations, the
    baseline diff with --baseline, and run metadata. Exit 0 once written (check is the gate)."""
    options = CheckOptions.from_params({**params, "fmt": "html", "output": output, "quiet": True})

    def body() -> int:
        _run_check(traces, options)   # the report says what a check would exit with
        return ExitCode.CLEAN

    _guarded(body, options.debug)


# The config keys that the commands which list or explain rules take (not the check's format or output).
_RULE_SOURCE_KEYS = frozenset({"rules", "no-builtin"})


@main.command("rules", cls=_ConfiguredCommand, config_keys=_RULE_SOURCE_KEYS)
@_rules_option
@_no_builtin_option
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True,
              help="Output format: a table (text) or a JSON array.")
@_config_options
@_debug_option
def list_rules(rule_paths, no_builtin, fmt, config_file, isolated, debug):
    """List the rules grouped by family (R1-R8, distributed, baseline), with the config's [severity] applied."""
    def body() -> int:
        from rich.console import Group
        from rich.table import Table
        from rich.text import Text

        from kernlint.rules.families import group_rules, id_span, zoo_cases

        rules = _rules_of(_current_config(), rule_paths, no_builtin)
        groups = group_rules(rules)
        if fmt == "json":
            click.echo(json.dumps([{"id": r.id, "name": r.name, "severity": r.severity, "summary": r.spec.summary,
                                    "check": r.spec.check.type, "path": r.path, "family": family.key,
                                    "family_title": family.title, "zoo_cases": zoo_cases(r.spec.tags)}
                                   for family, members in groups for r in members], indent=2, allow_nan=False))
            return ExitCode.CLEAN
        blocks = []
        for family, members in groups:
            ids = id_span([r.id for r in members])
            blocks.append(Text(printable(f"{family.label} ({ids}): {family.line}"), style="bold"))
            table = Table("id", "name", "severity", "check", "summary", box=None)
            for r in members:
                table.add_row(*(Text(printable(v)) for v in (r.id, r.name, r.severity, r.spec.check.type,
                                                            r.spec.summary)))
            blocks += [table, Text("")]
        _emit(Group(*blocks[:-1]), None)
        return ExitCode.CLEAN

    _guarded(body, debug)


@main.command(cls=_ConfiguredCommand, config_keys=_RULE_SOURCE_KEYS)
@click.argument("rule_id", required=False)
@click.option("--schema", is_flag=True, help="Print the rule-language reference (scopes, kinds, categories, "
                                             "check types and how they combine).")
@_rules_option
@_no_builtin_option
@_config_options
@_debug_option
def explain(rule_id, schema, rule_paths, no_builtin, config_file, isolated, debug):
    """Print a rule's documentation (What it does / Why is this bad? / Example / Use instead / References),
    or with --schema the rule-language reference. RULE_ID is an id or a name, in any case."""
    def body() -> int:
        from kernlint.rules.docs import rule_markdown
        from kernlint.rules.loader import rule_language_reference

        if schema:
            click.echo(rule_language_reference(), nl=False)
            return ExitCode.CLEAN
        if not rule_id:
            raise ConfigError(None, "explain needs a rule id or name, or --schema")
        rules = {r.id: r for r in _rules_of(_current_config(), rule_paths, no_builtin)}
        by_name = {r.name: r for r in rules.values()}
        rule = rules.get(rule_id.upper()) or by_name.get(rule_id.lower())
        if rule is None:
            raise ConfigError(None, f"no rule {rule_id!r} (known: {', '.join(sorted(rules))})")
        click.echo(rule_markdown(rule), nl=False)
        return ExitCode.CLEAN

    _guarded(body, debug)


def _progress():
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    # Only on a terminal: elsewhere (a pipe, a CI log) the transient display would leave a blank line
    # before the one error line.
    return Progress(SpinnerColumn(), TextColumn("{task.description}", markup=False), TimeElapsedColumn(),
                    console=_stderr(), transient=True, disable=not _stderr().is_terminal)


_device_option = click.option("--device", type=click.Choice(["auto", "cuda", "cpu"]), default="auto",
                              show_default=True, help="Where to run: auto takes the GPU when torch sees one.")


@main.command(cls=_ConfiguredCommand)
@click.argument("target")
@_device_option
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=Path("kernlint-runs"),
              show_default=True, help="Log folder: each invocation writes "
                                      "OUT/<run>/<UTC time>-<id>/<worker>.<ms>.pt.trace.json.gz plus .run.json.")
@click.option("--warmup", type=click.IntRange(0, 100), default=1, show_default=True,
              help="Steps run before the profiled one (compilation and caches warm up there).")
@click.option("--nproc", type=click.IntRange(1, 64), default=None,
              help="Run on N ranks (NCCL on GPUs, gloo on the CPU); one trace a rank.")
@click.option("--timeout", "timeout_s", type=click.FloatRange(min=1), default=None, metavar="SECONDS",
              help="Stop the workload after SECONDS of its own time (its import, build and steps; kernlint's start "
                   "is not counted): one error line, nothing checked (exit 2). Default: no limit.")
@_repeat_option
@_check_options
def run(target, device, out_dir, warmup, nproc, timeout_s, repeat, **params):
    """Profile a workload (a built-in name, module:callable or file.py:callable), then check its trace.

    The callable takes the device ("cpu"/"cuda") and returns the step to profile, or is the step itself.
    Built-in names include the regressed variants where the source checkout has them. The workload runs in a
    process of its own; what it prints goes to stderr as it comes.
    """
    options = CheckOptions.from_params(params)
    debug = options.debug

    def body() -> int:
        require_capture("kernlint run")
        if nproc is not None:
            from kernlint.capture.distributed import launch
            from kernlint.workloads import known_workloads, resolve_device, resolve_target

            dev = resolve_device(device)
            workload = resolve_target(target, known_workloads())
            with _progress() as progress:
                progress.add_task(f"profiling {workload.name} on {nproc} {dev} rank(s)", total=None)
                traces = launch(target, nproc, dev, out_dir, workload.name, warmup=warmup, steps=repeat,
                                timeout_s=timeout_s or 900.0)   # ranks that wait for a dead peer: stopped
            return _run_check(traces, options, notes=[f"Traces: {traces[0].parent} ({nproc} ranks)"])
        from kernlint.capture.child import run_in_child, run_name_of

        # One process: the child resolves the target and the device (an unknown name, a missing GPU or a
        # distributed workload come back as its one-line error), so this process never imports torch or
        # the user's module.
        name = run_name_of(target)
        with _progress() as progress:
            progress.add_task(f"profiling {name}", total=None)
            # --debug: the child prints the workload's own traceback, streamed with the rest of its output
            result = run_in_child(target, device, out_dir, name, label=target, warmup=warmup, steps=repeat,
                                  timeout_s=timeout_s, debug=debug,
                                  on_output=lambda line: click.echo(line, err=True))
        note = f"Trace: {result.trace} (captured in {result.wall_seconds:.1f} s); run metadata: {result.metadata}"
        # Where the trace went is what `run` made: said unless -q; the profiler's own log only with -v.
        notes = [note] + ([f"profiler: {line}" for line in result.profiler_log]
                          if options.verbosity >= VERBOSE else [])
        return _run_check([result.trace], options, notes=notes)

    _guarded(body, debug)


# The config keys `audit` takes: the baseline (and the [thresholds] it is compared with).
_AUDIT_KEYS = frozenset({"baseline"})


@main.command(cls=_ConfiguredCommand, config_keys=_AUDIT_KEYS)
@_device_option
@click.option("--include-regressed", is_flag=True,
              help="Also run the regressed variants (fixtures/regressed) and show them caught.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Keep the traces and run metadata here (default: a temporary folder, removed).")
@click.option("--replay", is_flag=True,
              help="Instead of running workloads, check the recorded fixture traces (H200 ones included).")
@click.option("--fixtures", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Fixture folder (default: the source checkout's fixtures/).")
@click.option("--timeout", "timeout_s", type=click.FloatRange(min=1), default=_AUDIT_TIMEOUT_S,
              show_default=True, metavar="SECONDS",
              help="Each workload's limit (it runs in a process of its own; kernlint's start there is not "
                   "counted): past it the workload is stopped, one error line (exit 2).")
@_repeat_option
@_baseline_options
@_format_option
@click.option("--output", "-o", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write the report to this file (atomically) instead of stdout.")
@click.option("--html", "html_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              metavar="FILE", help="Also write a self-contained HTML report of the audit (timelines, kernel "
                                   "tables, allocations, verdicts) to FILE.")
@_config_options
@_debug_option
def audit(device, include_regressed, out_dir, replay, fixtures, timeout_s, repeat, baseline, strict_env,
          strict_timing, fmt, output, html_path, config_file, isolated, debug):
    """Run the built-in workloads under the profiler and check every shipped rule.

    Exit 0 when every workload gets the verdict it must get (fixed ones pass; with --include-regressed the
    regressed ones are caught) and, with --baseline, no baseline rule fails; 1 otherwise.
    """
    def body() -> int:
        from kernlint.report import audit_renderer, replay_renderer

        if not replay:   # replaying recorded traces needs no torch; profiling does
            require_capture("kernlint audit")
        # The format is resolved before any work: a format that cannot render this is refused at once.
        render = replay_renderer(fmt) if replay else audit_renderer(fmt)
        render_html = audit_renderer("html") if html_path is not None and not replay else None
        from kernlint.rules.loader import load_rules

        rules = load_rules()
        if replay:
            from kernlint.cases import audit_recorded_cases
            from kernlint.checkout import CHECKOUT_FIXTURES

            folder = fixtures or CHECKOUT_FIXTURES
            if not (folder / "cases").is_dir():
                raise ConfigError(folder, "no cases/ folder here; pass --fixtures DIR")
            result = audit_recorded_cases(folder, rules)
            if not result.results:  # nothing replayed is no evidence: never "0/0 as expected"
                raise ConfigError(folder / "cases", "no case names a recorded trace (`trace = ...`): nothing to "
                                                    "replay")
            _emit(render(result), output)
            return ExitCode.CLEAN if result.all_as_expected else ExitCode.FINDINGS
        from kernlint.audit import WorkloadProcess, audit_workloads, run_audit, workloads_not_run
        from kernlint.workloads import resolve_device

        dev = resolve_device(device)
        workloads = audit_workloads(dev, include_regressed=include_regressed, fixtures=fixtures)
        not_run = workloads_not_run(dev, include_regressed=include_regressed, fixtures=fixtures)
        with _progress() as progress:
            task = progress.add_task("starting", total=None)

            def on_step(stage: str, workload) -> None:
                progress.update(task, description=f"{stage} {workload.name} on {dev}")

            result = run_audit(workloads, rules, dev, out_dir, on_step=on_step, steps=repeat,
                               baseline=_read_baseline(baseline) if baseline else None,
                               baseline_path=str(baseline or ""), limits=_current_config().thresholds,
                               strict_env=strict_env, strict_timing=strict_timing, keep_tables=html_path is not None,
                               not_run=not_run,
                               process=WorkloadProcess(timeout_s, fixtures, lambda line: click.echo(line, err=True)))
        if render_html is not None:
            _write_atomically(html_path, render_html(result))
        _emit(render(result), output)
        return ExitCode.CLEAN if result.all_as_expected else ExitCode.FINDINGS

    _guarded(body, debug)


@main.command(cls=_ConfiguredCommand, config_keys=frozenset())
@click.argument("baselines", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--cache", type=click.Path(dir_okay=False, path_type=Path), default=None, metavar="FILE",
              help="Keep what was found here and, for a history that only appended baselines, search again "
                   "only after each series' last change point.")
@click.option("--alpha", type=click.FloatRange(0, 1, min_open=True, max_open=True), default=0.01,
              show_default=True, help="Significance level of each change point's test (a permutation test with "
                                      "enough permutations for it; Student's t where a series is too short).")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True,
              help="text: a line per change point; json: the change points for scripts (schema_version 1).")
@click.option("--output", "-o", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write the output to FILE (atomically) instead of stdout.")
@_config_options
@_debug_option
def history(baselines, cache, alpha, fmt, output, config_file, isolated, debug):
    """Change points over baselines in commit order (files, or a folder whose *.json files sort in commit
    order): per launch series and each program's total device time, E-divisive means with a permutation
    test (Student's t where a series is too short for it to reach --alpha); names the first baseline after
    each change. Exit 0 (it reports; `check --baseline` gates)."""
    def body() -> int:
        import json as _json

        from kernlint.baseline.history import HistoryCacheError, analyse, as_dict, read_cache

        files: list[Path] = []
        for entry in baselines:
            files += sorted(entry.glob("*.json")) if entry.is_dir() else [entry]
        if len(files) < 4:
            raise ConfigError(None, f"history needs 4 or more baselines, got {len(files)}")
        previous = None
        ignored = "; not used: searched again, and the cache rewritten"
        if cache is not None:
            try:   # a FIFO or a device: exit 2 before any work; a malformed cache: a warning, searched again
                previous = read_cache(cache)
            except HistoryCacheError as exc:
                _warning_line(exc.one_line() + ignored)
        loaded = [_read_baseline(f) for f in files]
        result, kept = analyse(loaded, [f.name for f in files], alpha=alpha,
                               quantum_ticks=_current_config().thresholds.quantum_ticks, cache=previous)
        if result.cache_ignored:
            _warning_line(f"{cache}: {result.cache_ignored}{ignored}")
        if cache is not None:
            _write_atomically(cache, _json.dumps(kept) + "\n")
        if fmt == "json":
            text = _json.dumps(as_dict(result), indent=2) + "\n"
        else:
            lines = [f"{result.series} series over {len(files)} baselines ({files[0].name} .. {files[-1].name})"
                     + (f", {result.reused} from the cache" if cache is not None else "")
                     + f": {len(result.change_points)} change point(s)"]
            for c in result.change_points:
                lines.append(f"  at {c.baseline} (#{c.index + 1}): {c.series}: {c.before_us:g} -> {c.after_us:g} "
                             f"µs ({c.relative:+.1%}), p = {c.p_value:.2g}"
                             + (" (t-test)" if c.test != "permutation" else ""))
            lines += [f"note: {note}" for note in result.notes]
            text = "\n".join(printable(line) for line in lines) + "\n"
        _emit(text, output)
        return ExitCode.CLEAN

    _guarded(body, debug)


@main.group()
def baseline() -> None:
    """Record what a workload or traces launched, allocated, synced and how long each kernel took, to compare
    later runs with (check/run/audit --baseline FILE). See docs/baselines.md."""


@baseline.command("record", cls=_ConfiguredCommand, config_keys=frozenset())
@click.argument("traces", nargs=-1, type=click.Path(path_type=Path))
@click.option("--workload", "workload_names", multiple=True, metavar="NAME",
              help="Profile this workload instead of reading traces (repeatable): a built-in name (from "
                   "`kernlint audit`, or all), module:callable or path/to/file.py:callable, as `kernlint run`.")
@click.option("--processes", type=click.IntRange(min=1), default=1, show_default=True, metavar="N",
              help="With --workload: record each workload in N fresh processes, so that the baseline measures "
                   "how timings move between processes (3 or more for a timing gate).")
@_repeat_option
@_device_option
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="With --workload: keep the traces here (default: a temporary folder, removed).")
@click.option("--output", "-o", type=click.Path(dir_okay=False, path_type=Path), required=True,
              help="The baseline file to write (JSON; written atomically).")
@click.option("--max-trace-bytes", type=ByteSize(), default=None, metavar="SIZE",
              help="Refuse a trace larger than this (bytes, or with a suffix: 512M, 4G).")
@click.option("--quiet", "-q", is_flag=True, help="Print nothing when the baseline was written.")
@_parallel_options
@_capture_option
@_config_options
@_debug_option
def baseline_record(traces, workload_names, processes, repeat, device, out_dir, output, max_trace_bytes, quiet, jobs,
                    backend, scheduler, captures, config_file, isolated, debug):
    """Record a baseline from traces (files or folders; the traces of one rank are repeated runs of one
    program, each profiler step a run) or by profiling built-in workloads (--workload, --repeat N)."""
    def body() -> int:
        from kernlint.baseline import build_baseline, write_baseline

        if bool(traces) == bool(workload_names):
            raise ConfigError(None, "baseline record takes traces or --workload NAME, one of the two")
        if workload_names:
            require_capture("kernlint baseline record --workload")
            from kernlint.audit import audit_workloads, record_workloads
            from kernlint.baseline.environment import environment_of
            from kernlint.capture.metadata import collect_run_metadata
            from kernlint.workloads import known_workloads, resolve_device, resolve_target

            dev = resolve_device(device)
            targets: dict[str, str] = {}
            if [n.lower() for n in workload_names] == ["all"]:
                chosen = audit_workloads(dev)
            else:
                known = known_workloads()
                chosen = []
                for name in workload_names:   # a built-in name, module:callable or file.py:callable
                    workload = resolve_target(name, known)
                    targets[workload.name] = name
                    chosen.append(workload)
            with _progress() as progress:
                task = progress.add_task("starting", total=None)

                def on_step(stage: str, workload) -> None:
                    progress.update(task, description=f"{stage} {workload.name} on {dev} ({repeat} runs)")

                programs, _ = record_workloads(chosen, dev, steps=repeat, out_dir=out_dir, on_step=on_step,
                                               processes=processes, targets=targets)
            environment = environment_of(collect_run_metadata(dev))
            source = [*(a for n in workload_names for a in ("--workload", n)),
                      *(["--processes", str(processes)] if processes > 1 else []), "--repeat", str(repeat),
                      "--device", device]
        else:
            from kernlint.parallel import resolve_jobs
            from kernlint.pipeline import record_programs

            programs, environment = record_programs(
                traces, max_trace_bytes=max_trace_bytes or _max_trace_bytes_default(), captures=captures,
                jobs=resolve_jobs(jobs), backend=backend, scheduler=scheduler)
            source = [str(t) for t in traces]
        empty = [name for name, p in programs.items() if not p.runs]
        if empty:
            raise ConfigError(None, f"{empty[0]}: no launch to record (the trace holds no kernels or working ops)")
        for name, program in programs.items():
            if program.other_sequences:   # data-dependent dispatch, or traces of different programs
                _warning_line(f"{name}: {program.other_sequences} of {program.runs + program.other_sequences} "
                              "run(s) launched another sequence than the rest: kept as the program's variant "
                              f"({len(program.variants)} sequence(s), not timed); a check excuses only that "
                              "variation")
        import shlex

        refresh = shlex.join(["kernlint", "baseline", "record", *source, "-o", str(output)])
        written = write_baseline(output, build_baseline(programs, environment, refresh))
        if not quiet:
            runs = ", ".join(f"{name} ({p.runs} run(s), {sum(len(s.launches) for s in p.scopes.values())} "
                             "launches)" for name, p in programs.items())
            click.echo(f"kernlint: wrote {printable(written)}: {printable(runs)}")
        return ExitCode.CLEAN

    _guarded(body, debug)


if __name__ == "__main__":  # pragma: no cover
    main()
