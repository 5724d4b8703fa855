"""The `kernlint` group and what every command shares: the one-line errors and warnings, atomic output,
`@guarded` (a command's errors and exit status), the byte-size option type, the progress display."""
from __future__ import annotations

import functools
import io
import os
import sys
import warnings
from collections.abc import Callable
from pathlib import Path

import click

from kernlint._version import __version__
from kernlint.config import parse_size
from kernlint.errors import ConfigError, ExitCode, KernlintError
from kernlint.report.safe import printable

# Imported here: what every command needs to parse its options. The rest is imported where it is used: rich's
# console (an error line, a rich renderable, the progress display), the capture modules (run, audit, baseline
# record --workload), tempfile (a trace on standard input), shlex (baseline record), and in the command bodies
# the pipeline, the rules and the chosen format's renderers. tests/test_startup_imports.py checks what
# `kernlint check` of a small trace leaves out.

# How much the text report says (kernlint.report.text_format's levels): -q, the default, -v.
QUIET, NORMAL, VERBOSE = -1, 0, 1


@functools.cache
def stderr_console():
    """The rich console on stderr (error lines, the progress display), made on first use."""
    from rich.console import Console

    return Console(stderr=True, highlight=False, soft_wrap=True, emoji=False, markup=False)


def error_line(message: str, prefix: str = "kernlint: error: ", *, join_lines: bool = False) -> None:
    """Print one line on stderr: `message` with every control character (newlines too) shown visibly, or
    with `join_lines` (click's own wrapped messages) its lines joined by spaces first."""
    if join_lines:
        message = " ".join(part.strip() for part in str(message).splitlines() if part.strip())
    stderr_console().print(prefix + printable(message), markup=False, emoji=False, highlight=False, soft_wrap=True)


def split_values(values: tuple[str, ...]) -> list[str]:
    return [v.strip() for value in values for v in value.split(",") if v.strip()]


def warning_line(message: str) -> None:
    error_line(message, prefix="kernlint: warning: ")


def write_atomically(path: Path, text: str) -> None:
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


# --color: auto (colour on a terminal), always (also into a pipe: a CI log), never. Set by the option's callback
# (on the group or on a command that prints styled text); None: not given, the environment decides.
COLOR_CHOICES = ("auto", "always", "never")
_color: list[str | None] = [None]


def _set_color(ctx, param, value):
    if value is not None:
        _color[0] = value
    return value


color_option = click.option(
    "--color", type=click.Choice(COLOR_CHOICES), default=None, expose_value=False, callback=_set_color,
    is_eager=True, help="Colour the styled output: auto (on a terminal; the default), always (also into a pipe or a "
                        "CI log) or never. Without it NO_COLOR (no-color.org) turns colour off and FORCE_COLOR "
                        "(force-color.org) on, NO_COLOR winning; a report written with --output is never coloured.")


def color_mode() -> str:
    """auto, always or never: --color, else NO_COLOR (set and not empty: never), else FORCE_COLOR (set and not
    empty: always), else auto."""
    if _color[0] is not None:
        return _color[0]
    if os.environ.get("NO_COLOR", ""):
        return "never"
    if os.environ.get("FORCE_COLOR", ""):
        return "always"
    return "auto"


def emit(rendered: object, output: Path | None) -> None:
    if isinstance(rendered, str):
        if output:
            write_atomically(output, rendered)
        else:
            click.echo(rendered, nl=False)
        return
    from kernlint.report.styled import Lines

    terminal = not output and sys.stdout.isatty()
    mode = "never" if output else color_mode()
    colour = mode == "always" or (mode == "auto" and terminal)
    # Lines alone (the text report of a check) are their plain text without colour: the characters rich
    # writes there, without importing it.
    written = rendered.plain_text() if isinstance(rendered, Lines) and not colour else None
    if written is None:
        from rich.console import Console

        if isinstance(rendered, Lines):
            rendered = rendered.__rich__()
        if terminal:
            Console(highlight=False, soft_wrap=True, emoji=False, no_color=not colour,
                    **({} if colour else {"color_system": None})).print(rendered)
            return
        # A pipe, a file or a CI log gets the width the report needs, so no name in a table is cut or folded
        # (`kernlint rules | cat`); without the padding that a table's last column gets at that width. With
        # --color always (FORCE_COLOR) it keeps the styles, in the 16 standard colours every CI log shows.
        buffer = io.StringIO()
        Console(file=buffer, width=_full_width(rendered), color_system="standard" if colour else None,
                force_terminal=colour, no_color=not colour, highlight=False, soft_wrap=True,
                emoji=False).print(rendered)
        written = buffer.getvalue()
    text = "\n".join(line.rstrip() for line in written.split("\n"))
    if output:
        write_atomically(output, text)
    else:   # click strips the escapes off a terminal unless told to keep them
        click.echo(text, nl=False, color=colour or None)


def guarded(command: Callable[..., int]) -> Callable[..., None]:
    """A command's callback, run as the CLI runs every command: its return value is the exit status; a user's
    error (a KernlintError, a plugin named as the one that raised) is its one line and exit code; Ctrl-C is
    one line and 130; anything else is a bug: one line, exit 3 (`--debug`: the traceback, for either).
    click's own errors (a bad option value) go on to the group, which prints them as one line too."""

    @functools.wraps(command)
    def run(*args, **kwargs) -> None:
        debug = bool(kwargs.get("debug"))
        try:
            code = command(*args, **kwargs)
        except (click.ClickException, click.Abort, click.exceptions.Exit):
            raise
        except KernlintError as exc:
            if debug:
                raise
            error_line(exc.one_line())
            sys.exit(exc.exit_code)
        except KeyboardInterrupt:
            error_line("interrupted", prefix="kernlint: ")
            sys.exit(130)
        except Exception as exc:  # a bug: still one line unless --debug
            if debug:
                raise
            from kernlint.registry import plugin_failed

            named = plugin_failed(exc)   # another package's plugin raised: its name, exit 2
            if named is not None:
                error_line(named.one_line())
                sys.exit(named.exit_code)
            error_line(f"{type(exc).__name__}: {exc} (rerun with --debug for the traceback)",
                       prefix="kernlint: internal error: ")
            sys.exit(ExitCode.INTERNAL)
        sys.exit(code)

    return run


_NO_ARGS_IS_HELP = getattr(click.exceptions, "NoArgsIsHelpError", ())


class _KernlintGroup(click.Group):
    """The `kernlint` group: click's own error handling, with every usage error as one line.

    click in standalone mode prints a usage error as four lines (Usage:, Try..., a blank line, Error:). Here
    click runs with standalone_mode=False and the errors it raises become `kernlint: error: <message>` on
    stderr, exit 2. --help and --version still print and exit 0. Warnings that numpy and pandas raise on
    NaN arithmetic (RuntimeWarning) never reach stderr.
    """

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        _color[0] = None   # --color of an earlier call in this process (tests) does not carry over
        if not standalone_mode:  # a caller that handles click's exceptions itself
            return super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            try:
                rv = super().main(args, prog_name or "kernlint", complete_var, standalone_mode=False, **extra)
            except KernlintError as exc:   # a bad config file, read before the command's options
                error_line(exc.one_line())
                sys.exit(exc.exit_code)
            except _NO_ARGS_IS_HELP:   # `kernlint` alone: the help, as `kernlint --help` prints it
                with click.Context(self, info_name=prog_name or "kernlint") as ctx:
                    click.echo(self.get_help(ctx))
                sys.exit(ExitCode.CLEAN)
            except click.ClickException as exc:
                error_line(exc.format_message(), join_lines=True)
                sys.exit(exc.exit_code if exc.exit_code else ExitCode.ERROR)
            except click.Abort:
                error_line("interrupted", prefix="kernlint: ")
                sys.exit(130)
        sys.exit(rv if isinstance(rv, int) else ExitCode.CLEAN)


@click.group(cls=_KernlintGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "-V", "--version", prog_name="kernlint")
@color_option
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


def max_trace_bytes_default() -> int:
    from kernlint.trace.load import DEFAULT_MAX_TRACE_BYTES

    return DEFAULT_MAX_TRACE_BYTES


def _load(path: Path, max_bytes: int, captures=()):
    from kernlint.trace.load import load_trace

    return load_trace(path, max_bytes=max_bytes, captures=captures)




def progress_display():
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    # Only on a terminal: elsewhere (a pipe, a CI log) the transient display would leave a blank line
    # before the one error line.
    return Progress(SpinnerColumn(), TextColumn("{task.description}", markup=False), TimeElapsedColumn(),
                    console=stderr_console(), transient=True, disable=not stderr_console().is_terminal)
