"""`kernlint audit`: the built-in workloads profiled and checked, or the recorded rule cases replayed."""
from __future__ import annotations

import threading
from pathlib import Path

import click

from kernlint.cli.app import color_option, emit, guarded, main, progress_display, write_atomically
from kernlint.cli.checking import read_baseline
from kernlint.cli.options import (
    ConfiguredCommand,
    baseline_options,
    config_options,
    current_config,
    debug_option,
    device_option,
    format_option,
    repeat_option,
)
from kernlint.config import (
    resolve_check,
)
from kernlint.errors import ConfigError, ExitCode
from kernlint.extras import require_capture


class WorkloadStages:
    """The audit's progress line: every workload being captured (several run side by side), and the one being
    checked. `step` takes the audit's on_step stages: "capture" when a workload starts, any other ("check")
    when its capture is done and it goes on to that stage (in the main thread, one workload at a time)."""

    SHOWN = 3   # names on the line; the rest counted

    def __init__(self, device: str):
        self.device = device
        self.capturing: list[str] = []

    def step(self, stage: str, name: str) -> str:
        """The line after this step."""
        if stage == "capture":
            self.capturing.append(name)
        elif name in self.capturing:
            self.capturing.remove(name)
        parts = [] if stage == "capture" else [f"{stage} {name}"]
        if self.capturing:
            more = len(self.capturing) - self.SHOWN
            parts.append("capture " + ", ".join(self.capturing[:self.SHOWN]) + (f" and {more} more" if more > 0
                                                                               else ""))
        return "; ".join(parts) + f" on {self.device}"


# `audit --timeout`'s default: kernlint.capture.child.AUDIT_TIMEOUT_S, which is not imported for the option
# (tests/test_startup_imports.py checks that the two agree).
_AUDIT_TIMEOUT_S = 600.0
# The config keys `audit` takes: the baseline (and the [thresholds] it is compared with).
_AUDIT_KEYS = frozenset({"baseline"})


@main.command(cls=ConfiguredCommand, config_keys=_AUDIT_KEYS)
@device_option
@click.option("--include-regressed", is_flag=True,
              help="Also run the regressed variants (fixtures/regressed, or kernlint-fixtures's) and show them "
                   "caught.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Keep the traces and run metadata here (default: a temporary folder, removed).")
@click.option("--replay", is_flag=True,
              help="Instead of running workloads, check the recorded fixture traces (H200 ones included).")
@click.option("--fixtures", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Fixture folder (default: the source checkout's fixtures/, else the installed "
                   "kernlint-fixtures package's).")
@click.option("--timeout", "timeout_s", type=click.FloatRange(min=1), default=_AUDIT_TIMEOUT_S,
              show_default=True, metavar="SECONDS",
              help="Each workload's limit (it runs in a process of its own; kernlint's start there is not "
                   "counted): past it the workload is stopped, one error line (exit 2).")
@repeat_option
@baseline_options
@format_option
@color_option
@click.option("--output", "-o", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write the report to this file (atomically) instead of stdout.")
@click.option("--html", "html_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              metavar="FILE", help="Also write a self-contained HTML report of the audit (timelines, kernel "
                                   "tables, allocations, verdicts) to FILE.")
@config_options
@debug_option
@guarded
def audit(device, include_regressed, out_dir, replay, fixtures, timeout_s, repeat, baseline, strict_env,
          strict_timing, fmt, output, html_path, config_file, isolated, debug):
    """Run the built-in workloads under the profiler and check every shipped rule.

    Exit 0 when every workload gets the verdict it must get (fixed ones pass; with --include-regressed the
    regressed ones are caught) and, with --baseline, no baseline rule fails; 1 otherwise.
    """
    from kernlint.report import audit_renderer, replay_renderer

    if not replay:   # replaying recorded traces needs no torch; profiling does
        require_capture("kernlint audit")
    # The format is resolved before any work: a format that cannot render this is refused at once.
    render = replay_renderer(fmt) if replay else audit_renderer(fmt)
    render_html = audit_renderer("html") if html_path is not None and not replay else None
    # The check's settings as `kernlint check` resolves them (kernlint.config.resolve_check): the config's
    # [severity], [min-cost], [thresholds], suppressions, inline ignores and path map apply; every shipped
    # rule is checked (select=ALL: the audit proves each rule on its workloads, whatever the project selects).
    settings = resolve_check(current_config(), rule_paths=(), builtin=True, select=("ALL",))
    rules = settings.rules
    if replay:
        from kernlint.cases import audit_recorded_cases
        from kernlint.checkout import replay_fixtures

        folder = replay_fixtures(fixtures)
        result = audit_recorded_cases(folder, rules, settings.sources)
        if not result.results:  # nothing replayed is no evidence: never "0/0 as expected"
            raise ConfigError(folder / "cases", "no case names a recorded trace (`trace = ...`): nothing to "
                                                "replay")
        emit(render(result), output)
        return ExitCode.CLEAN if result.all_as_expected else ExitCode.FINDINGS
    from kernlint.capture.forkserver import started_fork_server

    # The workloads' fork server imports torch once for all of them, while this process imports its own.
    with started_fork_server() as forks:
        from kernlint.audit import WorkloadProcess, audit_workloads, run_audit, workloads_not_run
        from kernlint.workloads import resolve_device

        dev = resolve_device(device)
        workloads = audit_workloads(dev, include_regressed=include_regressed, fixtures=fixtures)
        not_run = workloads_not_run(dev, include_regressed=include_regressed, fixtures=fixtures)
        with progress_display() as progress:
            task = progress.add_task("starting", total=None)
            stages = WorkloadStages(dev)

            def on_step(stage: str, workload) -> None:
                progress.update(task, description=stages.step(stage, workload.name))

            # Workloads run side by side: their output comes from a reader thread each; one line at a time, whole.
            echo_lock = threading.Lock()

            def on_output(line: str) -> None:
                with echo_lock:
                    click.echo(line, err=True)

            result = run_audit(workloads, rules, dev, out_dir, on_step=on_step, steps=repeat,
                               baseline=read_baseline(baseline) if baseline else None,
                               baseline_path=str(baseline or ""), limits=settings.thresholds,
                               strict_env=strict_env, strict_timing=strict_timing, keep_tables=html_path is not None,
                               not_run=not_run,
                               process=WorkloadProcess(timeout_s, fixtures, on_output, forks),
                               sources=settings.sources)
    if render_html is not None:
        write_atomically(html_path, render_html(result))
    emit(render(result), output)
    return ExitCode.CLEAN if result.all_as_expected else ExitCode.FINDINGS
