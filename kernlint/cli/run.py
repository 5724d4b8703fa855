"""`kernlint run`: profile a workload, then check its trace."""
from __future__ import annotations

from pathlib import Path

import click

from kernlint.cli.app import VERBOSE, guarded, main, progress_display
from kernlint.cli.checking import check_traces
from kernlint.cli.options import CheckOptions, ConfiguredCommand, check_options, device_option, repeat_option
from kernlint.extras import require_capture


@main.command(cls=ConfiguredCommand)
@click.argument("target")
@device_option
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
@repeat_option
@check_options
@guarded
def run(target, device, out_dir, warmup, nproc, timeout_s, repeat, **params):
    """Profile a workload (a built-in name, module:callable or file.py:callable), then check its trace.

    The callable takes the device ("cpu"/"cuda") and returns the step to profile, or is the step itself.
    Built-in names include the regressed variants where kernlint's fixtures are (a source checkout's, or the
    kernlint-fixtures package). The workload runs in a process of its own; what it prints goes to stderr as it
    comes.
    """
    options = CheckOptions.from_params(params)
    debug = options.debug

    require_capture("kernlint run")
    if nproc is not None:
        from kernlint.capture.distributed import launch
        from kernlint.workloads import known_workloads, resolve_device, resolve_target

        dev = resolve_device(device)
        workload = resolve_target(target, known_workloads())
        with progress_display() as progress:
            progress.add_task(f"profiling {workload.name} on {nproc} {dev} rank(s)", total=None)
            traces = launch(target, nproc, dev, out_dir, workload.name, warmup=warmup, steps=repeat,
                            timeout_s=timeout_s or 900.0)   # ranks that wait for a dead peer: stopped
        return check_traces(traces, options, notes=[f"Traces: {traces[0].parent} ({nproc} ranks)"])
    from kernlint.capture.child import run_in_child, run_name_of

    # One process: the child resolves the target and the device (an unknown name, a missing GPU or a
    # distributed workload come back as its one-line error), so this process never imports torch or
    # the user's module.
    name = run_name_of(target)
    with progress_display() as progress:
        progress.add_task(f"profiling {name}", total=None)
        # --debug: the child prints the workload's own traceback, streamed with the rest of its output
        result = run_in_child(target, device, out_dir, name, label=target, warmup=warmup, steps=repeat,
                              timeout_s=timeout_s, debug=debug,
                              on_output=lambda line: click.echo(line, err=True))
    note = f"Trace: {result.trace} (captured in {result.wall_seconds:.1f} s); run metadata: {result.metadata}"
    # Where the trace went is what `run` made: said unless -q; the profiler's own log only with -v.
    notes = [note] + ([f"profiler: {line}" for line in result.profiler_log]
                      if options.verbosity >= VERBOSE else [])
    return check_traces([result.trace], options, notes=notes)
