"""`kernlint check` and `kernlint report`."""
from __future__ import annotations

from pathlib import Path

import click

from kernlint.cli.app import ByteSize, guarded, main
from kernlint.cli.checking import check_traces, numpy_without_blas_threads
from kernlint.cli.options import (
    CheckOptions,
    ConfiguredCommand,
    baseline_options,
    capture_option,
    check_options,
    config_options,
    debug_option,
    selection_options,
    suppression_options,
)
from kernlint.errors import ExitCode


@main.command(cls=ConfiguredCommand)
@click.argument("traces", nargs=-1, required=True, type=click.Path(path_type=Path))
@check_options
@capture_option
@suppression_options
@guarded
def check(traces, **params):
    """Check torch.profiler traces (files, .json.gz, or TensorBoard log folders) against the rules."""
    options = CheckOptions.from_params(params)
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
