"""`kernlint baseline record`: what a workload or traces launched, allocated and synced, as a baseline."""
from __future__ import annotations

from pathlib import Path

import click

from kernlint.cli.app import ByteSize, guarded, main, max_trace_bytes_default, progress_display, warning_line
from kernlint.cli.options import (
    ConfiguredCommand,
    capture_option,
    config_options,
    debug_option,
    device_option,
    parallel_options,
    repeat_option,
)
from kernlint.errors import ConfigError, ExitCode
from kernlint.extras import require_capture
from kernlint.report.safe import printable


@main.group()
def baseline() -> None:
    """Record what a workload or traces launched, allocated, synced and how long each kernel took, to compare
    later runs with (check/run/audit --baseline FILE). See docs/baselines.md."""


@baseline.command("record", cls=ConfiguredCommand, config_keys=frozenset())
@click.argument("traces", nargs=-1, type=click.Path(path_type=Path))
@click.option("--workload", "workload_names", multiple=True, metavar="NAME",
              help="Profile this workload instead of reading traces (repeatable): a built-in name (from "
                   "`kernlint audit`, or all), module:callable or path/to/file.py:callable, as `kernlint run`.")
@click.option("--processes", type=click.IntRange(min=1), default=1, show_default=True, metavar="N",
              help="With --workload: record each workload in N fresh processes, so that the baseline measures "
                   "how timings move between processes (3 or more for a timing gate).")
@repeat_option
@device_option
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="With --workload: keep the traces here (default: a temporary folder, removed).")
@click.option("--output", "-o", type=click.Path(dir_okay=False, path_type=Path), required=True,
              help="The baseline file to write (JSON; written atomically).")
@click.option("--max-trace-bytes", type=ByteSize(), default=None, metavar="SIZE",
              help="Refuse a trace larger than this (bytes, or with a suffix: 512M, 4G).")
@click.option("--quiet", "-q", is_flag=True, help="Print nothing when the baseline was written.")
@parallel_options
@capture_option
@config_options
@debug_option
@guarded
def baseline_record(traces, workload_names, processes, repeat, device, out_dir, output, max_trace_bytes, quiet, jobs,
                    backend, scheduler, captures, config_file, isolated, debug):
    """Record a baseline from traces (files or folders; the traces of one rank are repeated runs of one
    program, each profiler step a run) or by profiling built-in workloads (--workload, --repeat N)."""
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
        with progress_display() as progress:
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
            traces, max_trace_bytes=max_trace_bytes or max_trace_bytes_default(), captures=captures,
            jobs=resolve_jobs(jobs), backend=backend, scheduler=scheduler)
        source = [str(t) for t in traces]
    empty = [name for name, p in programs.items() if not p.runs]
    if empty:
        raise ConfigError(None, f"{empty[0]}: no launch to record (the trace holds no kernels or working ops)")
    for name, program in programs.items():
        if program.other_sequences:   # data-dependent dispatch, or traces of different programs
            warning_line(f"{name}: {program.other_sequences} of {program.runs + program.other_sequences} "
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
