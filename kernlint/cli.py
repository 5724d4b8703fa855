"""The command line. The only layer that prints.

Exit codes:
  0  no finding at or above --fail-on (default: warning), or --exit-zero
  1  findings
  2  usage error, unreadable or malformed trace, bad rule file, bad option value
  3  internal error (a bug in kernlint; rerun with --debug for the traceback)
"""
from __future__ import annotations

import io
import os
import sys
import tempfile
from pathlib import Path
from typing import Callable

import click
from rich.console import Console

from kernlint import __version__
from kernlint.errors import KernlintError

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR, EXIT_INTERNAL = 0, 1, 2, 3

_err = Console(stderr=True, highlight=False, soft_wrap=True)


def _split(values: tuple[str, ...]) -> list[str]:
    return [v.strip() for value in values for v in value.split(",") if v.strip()]


def _write_atomically(path: Path, text: str) -> None:
    """Write the whole output or nothing: a temp file beside the target, then rename."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except OSError as exc:
        from kernlint.errors import ConfigError
        raise ConfigError(path, f"cannot write output: {exc.strerror or exc}") from None


def _emit(rendered: object, output: Path | None) -> None:
    if isinstance(rendered, str):
        if output:
            _write_atomically(output, rendered)
        else:
            click.echo(rendered, nl=False)
        return
    if output:
        buffer = io.StringIO()
        Console(file=buffer, width=160, color_system=None, soft_wrap=True).print(rendered)
        _write_atomically(output, buffer.getvalue())
    else:
        # A pipe or a CI log gets a wide console, so tables are not cut at 80 columns.
        width = None if sys.stdout.isatty() else 160
        Console(highlight=False, soft_wrap=True, width=width).print(rendered)


def _guarded(fn: Callable[..., int], debug: bool, *args, **kwargs) -> None:
    """Run a command body: user errors become one line and exit 2; bugs exit 3."""
    try:
        code = fn(*args, **kwargs)
    except KernlintError as exc:
        if debug:
            raise
        _err.print(f"kernlint: error: {exc.one_line()}", markup=False)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        _err.print("kernlint: interrupted", markup=False)
        sys.exit(130)
    except Exception as exc:  # a bug: still one line unless --debug
        if debug:
            raise
        _err.print(f"kernlint: internal error: {type(exc).__name__}: {exc} (rerun with --debug for the traceback)",
                   markup=False)
        sys.exit(EXIT_INTERNAL)
    sys.exit(code)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="kernlint")
def main() -> None:
    """kernlint: catch launch-level performance regressions in PyTorch profiler traces."""


_format_option = click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
                              show_default=True, help="Output format.")


def _common_check_options(f):
    f = click.option("--debug", is_flag=True, help="Show tracebacks for errors.")(f)
    f = click.option("--fail-on", type=click.Choice(["info", "warning", "error"]), default="warning",
                     show_default=True, help="Lowest severity that makes the exit code 1.")(f)
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
               notes=()) -> int:
    from kernlint.report import OutputFormat, renderer
    from kernlint.report.model import CheckResult
    from kernlint.rules.engine import check_trace, exit_status
    from kernlint.rules.loader import load_rules, select_rules
    from kernlint.trace.load import find_trace_files, load_trace

    rules = select_rules(load_rules(rule_paths, builtin=not no_builtin), _split(select), _split(ignore))
    files = find_trace_files(traces)
    reports = [check_trace(load_trace(path), rules) for path in files]
    code = EXIT_CLEAN if exit_zero else exit_status(reports, fail_on)
    result = CheckResult(reports=reports, rules=rules, exit_code=code, notes=list(notes))
    _emit(renderer(OutputFormat(fmt))(result), output)
    return code


@main.command()
@click.argument("traces", nargs=-1, required=True, type=click.Path(path_type=Path))
@_common_check_options
def check(traces, rule_paths, no_builtin, select, ignore, fmt, output, exit_zero, fail_on, debug):
    """Check torch.profiler traces (files, .json.gz, or TensorBoard log folders) against the rules."""
    _guarded(_run_check, debug, traces, rule_paths, no_builtin, select, ignore, fmt, output, exit_zero, fail_on)


@main.command("rules")
@click.option("--rules", "rule_paths", multiple=True, type=click.Path(path_type=Path))
@click.option("--no-builtin", is_flag=True)
@_format_option
@click.option("--debug", is_flag=True)
def list_rules(rule_paths, no_builtin, fmt, debug):
    """List the rules."""
    def body() -> int:
        import json

        from rich.table import Table

        from kernlint.rules.loader import load_rules

        rules = load_rules(rule_paths, builtin=not no_builtin)
        if fmt == "json":
            click.echo(json.dumps([{"id": r.id, "name": r.name, "severity": r.severity, "summary": r.spec.summary,
                                    "check": r.spec.check.type, "path": r.path} for r in rules], indent=2))
            return EXIT_CLEAN
        table = Table("id", "name", "severity", "check", "summary", box=None)
        for r in rules:
            table.add_row(r.id, r.name, r.severity, r.spec.check.type, r.spec.summary)
        Console(highlight=False).print(table)
        return EXIT_CLEAN

    _guarded(body, debug)


@main.command()
@click.argument("rule_id")
@click.option("--rules", "rule_paths", multiple=True, type=click.Path(path_type=Path))
@click.option("--debug", is_flag=True)
def explain(rule_id, rule_paths, debug):
    """Print a rule's documentation (What it does / Why is this bad? / Example / Use instead / References)."""
    def body() -> int:
        from kernlint.errors import ConfigError
        from kernlint.rules.loader import load_rules

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


@main.command()
@click.option("--fixtures", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Fixture folder with cases/ and traces/ (default: the checkout's fixtures/).")
@_format_option
@click.option("--debug", is_flag=True)
def audit(fixtures, fmt, debug):
    """Audit: check the recorded GPU fixture traces and show each verdict against the expected one."""
    def body() -> int:
        from kernlint.report import audit_format
        from kernlint.rules.cases import audit_recorded_cases
        from kernlint.rules.loader import load_rules

        folder = fixtures or Path(__file__).resolve().parents[1] / "fixtures"
        if not (folder / "cases").is_dir():
            from kernlint.errors import ConfigError
            raise ConfigError(folder, "no cases/ folder here; pass --fixtures DIR")
        result = audit_recorded_cases(folder, load_rules())
        _emit(audit_format.render(result) if fmt == "text" else audit_format.render_json(result), None)
        return EXIT_CLEAN if result.all_as_expected else EXIT_FINDINGS

    _guarded(body, debug)


if __name__ == "__main__":  # pragma: no cover
    main()
