"""`kernlint check` and `kernlint report`."""
from __future__ import annotations

from pathlib import Path

import click

from kernlint.cli.app import ByteSize, guarded, main
from kernlint.cli.checking import check_traces, numpy_without_blas_threads
from kernlint.cli.options import (
    CheckOptions,
    ConfiguredCommand,
    _options,
    baseline_options,
    capture_option,
    check_options,
    config_options,
    debug_option,
    selection_options,
    suppression_options,
)
from kernlint.errors import ExitCode

# How a folder is searched (kernlint.trace.ignored): --exclude GLOB, and whether what git ignores is skipped.
discovery_options = _options(
    click.option("--exclude", multiple=True, metavar="GLOB",
                 help="Skip the entries of a searched folder that this glob matches (their name, their path below "
                      "the folder given or as given; * also crosses /); a folder matched is not searched; a file "
                      "named on the command line is still checked (repeatable; replaces the config's exclude)."),
    click.option("--respect-gitignore/--no-respect-gitignore", default=True, show_default=True,
                 help="Skip what git ignores (.gitignore) in a folder inside a git checkout; -v says whether it "
                      "applied (no git: nothing skipped)."),
)


@main.command(cls=ConfiguredCommand)
@click.argument("traces", nargs=-1, required=True, type=click.Path(path_type=Path))
@check_options
@discovery_options
@click.option("--stdin-filename", default=None, metavar="NAME",
              help="With - (a trace on standard input): the name the report gives it, instead of the temporary "
                   "file it is kept in.")
@click.option("--show-settings", is_flag=True,
              help="Print the resolved settings (config file, rules selected, fail-on, thresholds, suppressions "
                   "file, path map, source root...) and exit 0 without checking.")
@capture_option
@suppression_options
@guarded
def check(traces, **params):
    """Check torch.profiler traces (files, .json.gz, or TensorBoard log folders) against the rules."""
    options = CheckOptions.from_params(params)
    if options.extra.get("show_settings"):
        from kernlint.cli.checking import check_settings
        from kernlint.cli.options import current_config
        from kernlint.cli.settings_view import settings_text

        click.echo(settings_text(check_settings(options, current_config()), options, traces), nl=False)
        return ExitCode.CLEAN
    numpy_without_blas_threads()
    return check_traces(traces, options)


@main.command(cls=ConfiguredCommand)
@click.argument("traces", nargs=-1, required=True, type=click.Path(path_type=Path))
@selection_options
@baseline_options
@click.option("--output", "-o", type=click.Path(dir_okay=False, path_type=Path), required=True, metavar="FILE",
              help="The HTML file to write (self-contained: attach it to a PR or keep it as a CI artifact).")
@click.option("--max-trace-bytes", type=ByteSize(), default=None, metavar="SIZE",
              help="Refuse a trace larger than this (bytes, or with a suffix: 512M, 4G).")
@discovery_options
@click.option("--embed-trace", type=click.Choice(["auto", "always", "never"]), default="auto", is_flag=False,
              flag_value="always", show_default=True,
              help="Put the trace (gzip, base64) in the report for its Open in Perfetto button: auto up to 2 MB "
                   "gzipped, always (the bare flag), or never.")
@capture_option
@config_options
@debug_option
@guarded
def report(traces, output, **params):
    """Write a self-contained HTML report of traces (a file, a run folder): verdicts, each finding with its
    rule's docs and source line, timelines of the scopes with findings, each trace's step timeline and its Open
    in Perfetto button, the kernel table, allocations, the baseline diff with --baseline, and run metadata. Exit 0
    once written (check is the gate)."""
    options = CheckOptions.from_params({**params, "fmt": "html", "output": output, "quiet": True})
    check_traces(traces, options)   # the report says what a check would exit with
    return ExitCode.CLEAN
