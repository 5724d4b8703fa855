"""The command line. The only layer that prints.

Exit codes:
  0  no finding at or above --fail-on (default: warning), and everything was fully checked; or --exit-zero
  1  findings at or above --fail-on
  2  usage error, unreadable or malformed trace, bad rule file, bad option value: one line on stderr
  3  internal error (a bug in kernlint; rerun with --debug for the traceback)
  4  no finding at or above --fail-on, but something could not be fully checked: a rule verdict is
     incomplete (damaged events in a trace) or a folder held entries that could not be read (no
     permission, dangling link, FIFO, bad gzip); the report says what. --allow-incomplete makes it 0.

Every error a user can cause, click's usage errors included, is exactly one line on stderr:
`kernlint: error: <what is wrong>`.
"""
from __future__ import annotations

import io
import re
import sys
import warnings
from fractions import Fraction
from pathlib import Path
from typing import Callable

import click
from rich.console import Console

from kernlint import __version__
from kernlint.errors import KernlintError
from kernlint.fileio import write_text_atomically
from kernlint.report.safe import printable

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR, EXIT_INTERNAL, EXIT_INCOMPLETE = 0, 1, 2, 3, 4

_err = Console(stderr=True, highlight=False, soft_wrap=True, emoji=False, markup=False)

# Used when kernlint.trace.load has no DEFAULT_MAX_TRACE_BYTES of its own.


def _error_line(message: str, prefix: str = "kernlint: error: ", *, join_lines: bool = False) -> None:
    """Print one line on stderr: `message` with every control character (newlines too) shown visibly, or
    with `join_lines` (click's own wrapped messages) its lines joined by spaces first."""
    if join_lines:
        message = " ".join(part.strip() for part in str(message).splitlines() if part.strip())
    _err.print(prefix + printable(message), markup=False, emoji=False, highlight=False, soft_wrap=True)


def _split(values: tuple[str, ...]) -> list[str]:
    return [v.strip() for value in values for v in value.split(",") if v.strip()]


def _write_atomically(path: Path, text: str) -> None:
    """Write the whole output or nothing: a temp file beside the target, then rename."""
    from kernlint.errors import ConfigError

    try:
        write_text_atomically(path, text)
    except OSError as exc:
        raise ConfigError(path, f"cannot write output: {exc.strerror or exc}") from None
    except UnicodeEncodeError as exc:
        raise ConfigError(path, f"cannot write output: {exc.reason}") from None


def _emit(rendered: object, output: Path | None) -> None:
    if isinstance(rendered, str):
        if output:
            _write_atomically(output, rendered)
        else:
            click.echo(rendered, nl=False)
        return
    if output:
        buffer = io.StringIO()
        Console(file=buffer, width=160, color_system=None, soft_wrap=True, emoji=False).print(rendered)
        _write_atomically(output, buffer.getvalue())
    else:
        # A pipe or a CI log gets a wide console, so tables are not cut at 80 columns.
        width = None if sys.stdout.isatty() else 160
        Console(highlight=False, soft_wrap=True, width=width, emoji=False).print(rendered)


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
        _error_line(f"{type(exc).__name__}: {exc} (rerun with --debug for the traceback)",
                    prefix="kernlint: internal error: ")
        sys.exit(EXIT_INTERNAL)
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
            except _NO_ARGS_IS_HELP:
                _error_line(f"missing command (one of {', '.join(sorted(self.commands))}); see kernlint --help")
                sys.exit(EXIT_ERROR)
            except click.ClickException as exc:
                _error_line(exc.format_message(), join_lines=True)
                sys.exit(exc.exit_code if exc.exit_code else EXIT_ERROR)
            except click.Abort:
                _error_line("interrupted", prefix="kernlint: ")
                sys.exit(130)
        sys.exit(rv if isinstance(rv, int) else EXIT_CLEAN)


@click.group(cls=_KernlintGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="kernlint")
def main() -> None:
    """kernlint: catch launch-level performance regressions in PyTorch profiler traces."""


class ByteSize(click.ParamType):
    """A size in bytes: a whole number, or a number with a suffix K, M, G or T (powers of 1024, an optional
    trailing B or iB; 512M, 4G, 1.5GiB)."""

    name = "size"
    _UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
    _FORM = re.compile(r"\s*(\d+(?:\.\d*)?)\s*(?:([kmgt])(?:i?b)?|b)?\s*", re.IGNORECASE)

    def convert(self, value, param, ctx):
        if isinstance(value, int) and not isinstance(value, bool):
            number = value
        else:
            m = self._FORM.fullmatch(str(value))
            if not m:
                self.fail(f"{value!r} is not a size: give bytes, or a number with K, M, G or T (512M, 4G)",
                          param, ctx)
            number = int(Fraction(m.group(1)) * self._UNITS[(m.group(2) or "").lower()])
        if number <= 0:
            self.fail(f"{value!r}: the size must be above zero", param, ctx)
        return number


def _max_trace_bytes_default() -> int:
    from kernlint.trace.load import DEFAULT_MAX_TRACE_BYTES

    return DEFAULT_MAX_TRACE_BYTES


def _load(path: Path, max_bytes: int):
    from kernlint.trace.load import load_trace

    return load_trace(path, max_bytes=max_bytes)


def _format_option(f):
    from kernlint.report import format_names

    return click.option("--format", "fmt", type=click.Choice(format_names()), default="text", show_default=True,
                        help="Output format: text (terminal), json (schema in kernlint/report/json_format.py), "
                             "github (workflow annotations), markdown (job summary).")(f)


def _common_check_options(f):
    f = click.option("--debug", is_flag=True, help="Show tracebacks for errors.")(f)
    f = click.option("--fail-on", type=click.Choice(["info", "warning", "error"]), default="warning",
                     show_default=True, help="Lowest severity that makes the exit code 1.")(f)
    f = click.option("--max-trace-bytes", type=ByteSize(), default=None, metavar="SIZE",
                     help="Refuse a trace larger than this (bytes, or with a suffix: 512M, 4G). "
                          "Default: kernlint's built-in limit.")(f)
    f = click.option("--allow-incomplete", is_flag=True,
                     help="Exit 0 instead of 4 when some input could not be fully checked (damaged events, "
                          "unreadable entries); the report still says what.")(f)
    f = click.option("--exit-zero", is_flag=True, help="Exit 0 even when there are findings.")(f)
    f = click.option("--output", "-o", type=click.Path(dir_okay=False, path_type=Path),
                     help="Write the report to this file (atomically) instead of stdout.")(f)
    f = _format_option(f)
    f = click.option("--ignore", multiple=True, help="Rule ids, prefixes or names to skip (comma-separated).")(f)
    f = click.option("--select", multiple=True, help="Rule ids, prefixes, names or ALL (comma-separated).")(f)
    f = click.option("--no-builtin", is_flag=True, help="Do not load the shipped rules.")(f)
    f = click.option("--rules", "rule_paths", multiple=True, type=click.Path(path_type=Path),
                     help="Extra rule file or folder (repeatable).")(f)
    return f


def _run_check(traces, rule_paths, no_builtin, select, ignore, fmt, output, exit_zero, fail_on,
               allow_incomplete=False, max_trace_bytes=None, notes=()) -> int:
    from kernlint.report import renderer
    from kernlint.report.model import CheckResult
    from kernlint.rules.engine import check_traces, exit_status
    from kernlint.rules.loader import load_rules, select_rules
    from kernlint.trace.load import discover_traces

    rules = select_rules(load_rules(rule_paths, builtin=not no_builtin), _split(select), _split(ignore))
    found = discover_traces(traces)
    limit = max_trace_bytes or _max_trace_bytes_default()
    reports = check_traces([_load(path, limit) for path in found.files], rules)
    # Entries that could not be read (not files that were read and are not traces): not checked.
    unreadable = [(str(e.path), e.reason) for e in found.skipped if e.unreadable]
    code = EXIT_CLEAN if exit_zero else exit_status(reports, fail_on, allow_incomplete=allow_incomplete,
                                                    incomplete_input=bool(unreadable))
    result = CheckResult(reports=reports, rules=rules, exit_code=code, notes=list(notes),
                         skipped=[(str(e.path), e.reason) for e in found.skipped],
                         ignored_files=found.ignored_count, unreadable=unreadable)
    _emit(renderer(fmt)(result), output)
    return code


@main.command()
@click.argument("traces", nargs=-1, required=True, type=click.Path(path_type=Path))
@_common_check_options
def check(traces, rule_paths, no_builtin, select, ignore, fmt, output, exit_zero, allow_incomplete, max_trace_bytes,
          fail_on, debug):
    """Check torch.profiler traces (files, .json.gz, or TensorBoard log folders) against the rules."""
    _guarded(_run_check, debug, traces, rule_paths, no_builtin, select, ignore, fmt, output, exit_zero, fail_on,
             allow_incomplete, max_trace_bytes)


@main.command("rules")
@click.option("--rules", "rule_paths", multiple=True, type=click.Path(path_type=Path),
              help="Extra rule file or folder (repeatable).")
@click.option("--no-builtin", is_flag=True, help="Do not load the shipped rules.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True,
              help="Output format.")
@click.option("--debug", is_flag=True, help="Show tracebacks for errors.")
def list_rules(rule_paths, no_builtin, fmt, debug):
    """List the rules."""
    def body() -> int:
        import json

        from rich.table import Table

        from kernlint.rules.loader import load_rules

        rules = load_rules(rule_paths, builtin=not no_builtin)
        if fmt == "json":
            click.echo(json.dumps([{"id": r.id, "name": r.name, "severity": r.severity, "summary": r.spec.summary,
                                    "check": r.spec.check.type, "path": r.path} for r in rules], indent=2,
                                   allow_nan=False))
            return EXIT_CLEAN
        from rich.text import Text

        table = Table("id", "name", "severity", "check", "summary", box=None)
        for r in rules:
            table.add_row(*(Text(printable(v)) for v in (r.id, r.name, r.severity, r.spec.check.type,
                                                        r.spec.summary)))
        Console(highlight=False, emoji=False).print(table)
        return EXIT_CLEAN

    _guarded(body, debug)


@main.command()
@click.argument("rule_id", required=False)
@click.option("--schema", is_flag=True, help="Print the rule-language reference (scopes, kinds, categories, "
                                             "check types and how they combine).")
@click.option("--rules", "rule_paths", multiple=True, type=click.Path(path_type=Path),
              help="Extra rule file or folder (repeatable).")
@click.option("--debug", is_flag=True, help="Show tracebacks for errors.")
def explain(rule_id, schema, rule_paths, debug):
    """Print a rule's documentation (What it does / Why is this bad? / Example / Use instead / References),
    or with --schema the rule-language reference."""
    def body() -> int:
        from kernlint.errors import ConfigError
        from kernlint.rules.loader import load_rules, rule_language_reference

        if schema:
            click.echo(rule_language_reference(), nl=False)
            return EXIT_CLEAN
        if not rule_id:
            raise ConfigError(None, "explain needs a rule id or name, or --schema")
        rules = {r.id: r for r in load_rules(rule_paths)}
        by_name = {r.name: r for r in rules.values()}
        rule = rules.get(rule_id.upper()) or by_name.get(rule_id)
        if rule is None:
            raise ConfigError(None, f"no rule {rule_id!r} (known: {', '.join(sorted(rules))})")
        d = rule.spec.docs
        lines = [f"# {rule.id} {rule.name} ({rule.severity})", "", rule.spec.summary, "",
                 "## What it does", d.what_it_does.strip(), "",
                 "## Why is this bad?", d.why_is_this_bad.strip(), "",
                 "## Example", "```python", d.example.strip(), "```", "",
                 "## Use instead", "```python", d.use_instead.strip(), "```", "",
                 "## References", *[f"- {ref}" for ref in d.references]]
        click.echo("\n".join(lines))
        return EXIT_CLEAN

    _guarded(body, debug)


def _progress():
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    # Only on a terminal: elsewhere (a pipe, a CI log) the transient display would leave a blank line
    # before the one error line.
    return Progress(SpinnerColumn(), TextColumn("{task.description}", markup=False), TimeElapsedColumn(),
                    console=_err, transient=True, disable=not _err.is_terminal)


_device_option = click.option("--device", type=click.Choice(["auto", "cuda", "cpu"]), default="auto",
                              show_default=True, help="Where to run: auto takes the GPU when torch sees one.")


@main.command()
@click.argument("target")
@_device_option
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=Path("kernlint-runs"),
              show_default=True, help="Log folder: each invocation writes OUT/<run>/<UTC time>-<id>/<worker>.<ms>.pt.trace.json.gz "
                   "plus .run.json.")
@click.option("--warmup", type=click.IntRange(0, 100), default=1, show_default=True)
@click.option("--nproc", type=click.IntRange(1, 64), default=None,
              help="Run on N ranks under torchrun (NCCL on GPUs, gloo on the CPU); one trace a rank.")
@_common_check_options
def run(target, device, out_dir, warmup, nproc, rule_paths, no_builtin, select, ignore, fmt, output, exit_zero,
        allow_incomplete, max_trace_bytes, fail_on, debug):
    """Profile a workload (a built-in name, module:callable or file.py:callable), then check its trace.

    The callable takes the device ("cpu"/"cuda") and returns the step to profile, or is the step itself.
    Built-in names include the regressed variants where the source checkout has them.
    """
    def body() -> int:
        from kernlint.capture.runner import capture
        from kernlint.workloads import known_workloads, resolve_device, resolve_target

        dev = resolve_device(device)
        workload = resolve_target(target, known_workloads())
        if nproc is not None:
            from kernlint.capture.distributed import launch

            with _progress() as progress:
                progress.add_task(f"profiling {workload.name} on {nproc} {dev} rank(s) under torchrun", total=None)
                traces = launch(target, nproc, dev, out_dir, workload.name, warmup=warmup)
            return _run_check(traces, rule_paths, no_builtin, select, ignore, fmt, output, exit_zero, fail_on,
                              allow_incomplete, max_trace_bytes, notes=[f"Traces: {traces[0].parent} ({nproc} ranks)"])
        if workload.distributed:
            from kernlint.errors import ConfigError
            raise ConfigError(None, f"{workload.name} is a distributed workload: add --nproc N")
        with _progress() as progress:
            progress.add_task(f"profiling {workload.name} on {dev}", total=None)
            try:
                step = workload.build(dev)
                result = capture(step, out_dir, workload.name, device=dev, warmup=warmup,
                                 extra={"workload": workload.name, "target": target})
            except KernlintError:
                raise
            except SystemExit as exc:  # sys.exit() in the workload: no trace, so never a verdict
                from kernlint.errors import ConfigError
                raise ConfigError(None, f"{target}: the workload called sys.exit({exc.code!r}) before its "
                                        "trace was written; nothing was checked") from None
            except KeyboardInterrupt:
                from kernlint.errors import ConfigError
                raise ConfigError(None, f"{target}: interrupted (KeyboardInterrupt) while the workload ran; "
                                        "nothing was checked") from None
            except Exception as exc:  # the user's code failed: name it in one line, not a traceback
                if debug:
                    raise
                from kernlint.errors import ConfigError
                raise ConfigError(None, f"{target}: the workload raised {type(exc).__name__}: {exc}") from None
        note = f"Trace: {result.trace} (captured in {result.wall_seconds:.1f} s); run metadata: {result.metadata}"
        notes = [note] + [f"profiler: {line}" for line in result.profiler_log]
        return _run_check([result.trace], rule_paths, no_builtin, select, ignore, fmt, output, exit_zero, fail_on,
                          allow_incomplete, max_trace_bytes, notes=notes)

    _guarded(body, debug)


@main.command()
@_device_option
@click.option("--include-regressed", is_flag=True,
              help="Also run the regressed variants (fixtures/regressed) and show them caught.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Keep the traces and run metadata here (default: a temporary folder, removed).")
@click.option("--replay", is_flag=True,
              help="Instead of running workloads, check the recorded fixture traces (H200 ones included).")
@click.option("--fixtures", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Fixture folder (default: the source checkout's fixtures/).")
@_format_option
@click.option("--output", "-o", type=click.Path(dir_okay=False, path_type=Path), default=None)
@click.option("--debug", is_flag=True)
def audit(device, include_regressed, out_dir, replay, fixtures, fmt, output, debug):
    """Run the built-in workloads under the profiler and check every shipped rule.

    Exit 0 when every workload gets the verdict it must get (fixed ones pass; with --include-regressed the
    regressed ones are caught), 1 otherwise.
    """
    def body() -> int:
        from kernlint.audit import audit_workloads, run_audit
        from kernlint.report import audit_renderer, replay_renderer
        from kernlint.rules.loader import load_rules

        rules = load_rules()
        if replay:
            from kernlint.errors import ConfigError
            from kernlint.rules.cases import audit_recorded_cases

            from kernlint.workloads import CHECKOUT_FIXTURES

            folder = fixtures or CHECKOUT_FIXTURES
            if not (folder / "cases").is_dir():
                raise ConfigError(folder, "no cases/ folder here; pass --fixtures DIR")
            result = audit_recorded_cases(folder, rules)
            if not result.results:  # nothing replayed is no evidence: never "0/0 as expected"
                raise ConfigError(folder / "cases", "no case names a recorded trace (`trace = ...`): nothing to "
                                                    "replay")
            _emit(replay_renderer(fmt)(result), output)
            return EXIT_CLEAN if result.all_as_expected else EXIT_FINDINGS
        from kernlint.workloads import resolve_device

        dev = resolve_device(device)
        workloads = audit_workloads(dev, include_regressed=include_regressed, fixtures=fixtures)
        with _progress() as progress:
            task = progress.add_task("starting", total=None)

            def on_step(stage: str, workload) -> None:
                progress.update(task, description=f"{stage} {workload.name} on {dev}")

            result = run_audit(workloads, rules, dev, out_dir, on_step=on_step)
        _emit(audit_renderer(fmt)(result), output)
        return EXIT_CLEAN if result.all_as_expected else EXIT_FINDINGS

    _guarded(body, debug)


if __name__ == "__main__":  # pragma: no cover
    main()
