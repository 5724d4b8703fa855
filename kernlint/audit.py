"""The audit: run workloads under the profiler, check every rule, compare with what each must get.

Returns data; the CLI renders it. Sits above capture, trace and rules, below report and cli.
"""
from __future__ import annotations

import contextlib
import dataclasses
import os
import queue
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from kernlint.baseline import Baseline, ProgramProfile, Thresholds, profile_program
from kernlint.baseline.environment import environment_of
from kernlint.capture.child import AUDIT_TIMEOUT_S, ChildCancelled, run_in_child
from kernlint.capture.distributed import RankLaunch, launch, start_ranks
from kernlint.capture.forkserver import WorkloadForkServer, started_fork_server
from kernlint.capture.metadata import collect_run_metadata
from kernlint.device import Device
from kernlint.fileio import TerminatedError, termination_raised
from kernlint.pipeline import (
    BaselineInput,
    CheckRequest,
    Inputs,
    SourceHandling,
    refuse_damaged_tables,
    run_check,
)
from kernlint.rules.result import STATUS_FAILED, STATUS_INCOMPLETE, TraceReport, merge_reports
from kernlint.rules.schema import Rule
from kernlint.trace.load import load_trace
from kernlint.trace.table import EventTable
from kernlint.workloads import ANY_VERDICT, WORKLOADS, Workload, regressed_workloads

# Rank processes of distributed workloads running at once, beside this process (each imports torch and,
# on GPUs, holds a CUDA context and a copy of the weights): at least one workload's ranks, more where
# the machine has the cores for it.
MAX_RANK_PROCESSES = max(2, (os.cpu_count() or 2) // 4)
# Workload processes running at once without a baseline, the rank processes above counted in: each child pays
# torch's import and the device's start again, mostly waiting, so they overlap; one single-process workload
# always runs, whatever the ranks take.
MAX_WORKLOAD_PROCESSES = max(2, (os.cpu_count() or 2) // 2)


@dataclass
class WorkloadVerdict:
    workload: Workload
    device: str
    traces: list[Path] = field(default_factory=list)   # one per rank
    report: TraceReport | None = None
    problems: list[str] = field(default_factory=list)
    seconds: float = 0.0
    ranks: int = 1
    # Kept for a visual report (run_audit(keep_tables=True)): the loaded traces, and each rank's report.
    tables: list[EventTable] = field(default_factory=list, repr=False)
    rank_reports: list[TraceReport] = field(default_factory=list, repr=False)

    @property
    def ok(self) -> bool:
        return not self.problems


@dataclass
class AuditRun:
    device: str
    metadata: dict
    verdicts: list[WorkloadVerdict]
    out_dir: Path | None
    seconds: float = 0.0
    baseline_report: TraceReport | None = None   # the workloads against --baseline
    rules: list[Rule] = field(default_factory=list, repr=False)
    # Workloads left out on this device, with why (CUDA graphs on the CPU): said, never dropped silently.
    not_run: list[tuple[str, str]] = field(default_factory=list)

    @property
    def baseline_failed(self) -> bool:
        """A baseline rule failed, or could not be fully checked."""
        report = self.baseline_report
        return report is not None and any(o.status in (STATUS_FAILED, STATUS_INCOMPLETE) for o in report.outcomes)

    @property
    def all_as_expected(self) -> bool:
        return bool(self.verdicts) and all(v.ok for v in self.verdicts) and not self.baseline_failed


def _candidates(include_regressed: bool, fixtures: Path | None) -> list[Workload]:
    """The registered workloads the audit runs (built-ins first, then other packages'), and with
    `include_regressed` the regressed variants (a plugin of the registry, loaded from the checkout's fixtures
    or `fixtures`): a regressed workload runs only then."""
    chosen = [w for _, w in WORKLOADS.items() if w.audited and not w.regressed]
    if include_regressed:
        chosen += [w for w in regressed_workloads(fixtures).values() if w.audited]
    return chosen


def audit_workloads(device: str, *, include_regressed: bool = False, fixtures: Path | None = None
                    ) -> list[Workload]:
    return [w for w in _candidates(include_regressed, fixtures) if device in w.devices]


def workloads_not_run(device: str, *, include_regressed: bool = False, fixtures: Path | None = None
                      ) -> list[tuple[str, str]]:
    """(name, why) of the audit's workloads that do not run on `device`."""
    return [(w.name, w.not_run_reason) for w in _candidates(include_regressed, fixtures) if device not in w.devices]


def audit_ranks(device: str) -> int:
    """Ranks for a distributed workload in the audit: two (gloo) on the CPU, up to two GPUs with NCCL."""
    if not Device.parse(device).is_gpu:
        return 2
    import torch

    return max(1, min(2, torch.cuda.device_count()))


def compare_with_expectation(workload: Workload, report: TraceReport, ranks: int = 1) -> list[str]:
    """A workload must get exactly its expected verdicts, and no other rule may fail on it. On one rank
    the cross-rank rules cannot apply, and must say so."""
    problems = []
    status = {o.rule: o for o in report.outcomes}
    expect = dict(workload.expect)
    if workload.distributed and ranks < 2:
        expect.update(workload.expect_one_rank)
    for rule_id, expected in expect.items():
        outcome = status.get(rule_id)
        if workload.distributed and ranks < 2 and outcome is not None and outcome.one_rank:
            continue
        if expected == ANY_VERDICT and outcome is not None:
            continue
        if outcome is None:
            problems.append(f"{rule_id} was not run")
        elif outcome.status != expected:
            detail = outcome.reason or "; ".join(f.message for f in outcome.findings[:2])
            problems.append(f"{rule_id}: expected {expected}, got {outcome.status}"
                            + (f" ({detail})" if detail else ""))
    for o in report.outcomes:
        if o.rule not in expect and o.status == "failed":
            problems.append(f"{o.rule}: unexpected findings: {o.findings[0].message}")
        elif o.rule not in expect and o.status == "incomplete":  # not fully checked is not a pass
            problems.append(f"{o.rule}: incomplete" + (f" ({o.reason})" if o.reason else ""))
    return problems




@dataclass(frozen=True)
class WorkloadProcess:
    """How the audit runs each workload in a process of its own: its time limit, the fixture folder its
    name may come from, and where the process's output goes (line by line, as it comes, each line after
    the workload's name and " | ")."""

    timeout_s: float = AUDIT_TIMEOUT_S
    fixtures: Path | None = None
    on_output: Callable[[str], None] = lambda line: None
    # The fork server the single-process workloads' children come from (torch imported once for all); None:
    # run_audit starts one where it has two or more to run, and without one each child is a new interpreter.
    forks: WorkloadForkServer | None = None


def capture_workload(workload: Workload, device: str, folder: Path, *, steps: int = 1,
                     process: WorkloadProcess = WorkloadProcess(), cancel: threading.Event | None = None
                     ) -> tuple[list[Path], int]:
    """Profile one workload (`steps` profiled runs after a warm-up) in processes of its own; its traces, one a
    rank, and its ranks. A workload that exits, dies or runs past the limit is a WorkloadError. `cancel` (a
    single-process workload): set from another thread, it stops the workload's process (ChildCancelled)."""
    if workload.distributed:
        nproc = audit_ranks(device)
        return launch(workload.process_target, nproc, device, folder, workload.name, steps=steps,
                      timeout_s=process.timeout_s, fixtures=process.fixtures), nproc
    name, on_output = workload.name, process.on_output
    capture = run_in_child(workload.process_target, device, folder, workload.name, label=workload.name,
                           steps=steps, timeout_s=process.timeout_s, fixtures=process.fixtures,
                           # workloads run side by side: each line says whose it is
                           on_output=lambda line: on_output(f"{name} | {line}"), cancel=cancel,
                           forks=process.forks)
    return [capture.trace], 1


def workload_programs(workload: Workload, tables: list[EventTable]) -> dict[str, ProgramProfile]:
    """A workload's programs for a baseline: the workload's name, and its rank for distributed ones."""
    if len(tables) == 1:
        return {workload.name: profile_program(tables)}
    return {f"{workload.name}/rank {t.meta.rank}": profile_program([t]) for t in tables}


def record_workloads(workloads: Iterable[Workload], device: str, *, steps: int, out_dir: Path | None = None,
                     on_step: Callable[[str, Workload], None] | None = None, processes: int = 1,
                     targets: dict[str, str] | None = None, process: WorkloadProcess = WorkloadProcess()
                     ) -> tuple[dict[str, ProgramProfile], list[Path]]:
    """Profile each workload `steps` times for a baseline; its programs, and the traces (kept in out_dir).
    `processes` > 1: each workload in that many fresh processes, one after another (the baseline then
    measures how timings move between processes); `targets`: how a rank process finds a workload that is
    not a built-in name (module:callable, path/file.py:callable)."""
    programs: dict[str, ProgramProfile] = {}
    kept: list[Path] = []
    with _folder(out_dir) as folder:
        for workload in workloads:
            if on_step:
                on_step("capture", workload)
            if processes <= 1:
                traces, _ = capture_workload(workload, device, folder, steps=steps, process=process)
                tables = [load_trace(t) for t in traces]
                refuse_damaged_tables(tables)   # the policy of `baseline record`: never a damaged reference
                programs.update(workload_programs(workload, tables))
                kept += traces if out_dir else []
                continue
            target = (targets or {}).get(workload.name, workload.process_target)
            nproc = audit_ranks(device) if workload.distributed else 1
            runs = [launch(target, nproc, device, folder, workload.name, steps=steps, timeout_s=process.timeout_s,
                           fixtures=process.fixtures) for _ in range(processes)]
            tables = [[load_trace(t) for t in run] for run in runs]
            refuse_damaged_tables([t for run in tables for t in run])
            if nproc == 1:
                programs[workload.name] = profile_program([run[0] for run in tables])
            else:
                for r in range(nproc):
                    programs[f"{workload.name}/rank {r}"] = profile_program([run[r] for run in tables])
            kept += [t for run in runs for t in run] if out_dir else []
    return programs, kept


@contextlib.contextmanager
def _folder(out_dir: Path | None):
    """out_dir, or a temporary folder removed afterwards."""
    if out_dir:
        yield Path(out_dir)
        return
    with tempfile.TemporaryDirectory(prefix="kernlint-audit-") as tmp:
        yield Path(tmp)


def run_audit(workloads: Iterable[Workload], rules: list[Rule], device: str, out_dir: Path | None = None,
              on_step: Callable[[str, Workload], None] | None = None, *, steps: int = 1,
              baseline: Baseline | None = None, baseline_path: str = "", limits: Thresholds | None = None,
              strict_env: bool = False, strict_timing: bool = False, keep_tables: bool = False,
              not_run: Iterable[tuple[str, str]] = (), process: WorkloadProcess = WorkloadProcess(),
              sources: SourceHandling | None = None) -> AuditRun:
    """Capture each workload (warm-up, then `steps` profiled runs) in a process of its own (`process`: its
    time limit and where its output goes), check it (`sources`: the suppressions and source mapping of the
    check's settings, kernlint.config.resolve_check), compare with what it must get;
    with a baseline, compare every workload's programs with it too. Traces go to out_dir, or to a temporary
    folder that is removed afterwards.

    Without a baseline the workloads' processes overlap (the audit checks launch sequences, not timings): the
    ranks of the distributed workloads start first (up to MAX_RANK_PROCESSES), and up to MAX_WORKLOAD_PROCESSES
    single-process workloads' children (the ranks running counted in; always at least one) run side by side,
    each waited for by a thread of its own, so their starts (a torch import each, CUDA set-up) overlap instead
    of adding up. Each is still its own process, under its own time limit, with a fresh profiler, and is checked
    on its own traces; the checks and `on_step` run in this (the calling) thread as captures complete, and the
    verdicts come in workload order, as a sequential run's. When one fails (or a check of one fails), the others
    are stopped and the error of the failing workload with the lowest index is raised; Ctrl-C or SIGTERM stops
    them all too: no workload process outlives the audit. With a baseline (timings compared, KL804) nothing
    overlaps: each workload runs alone, in order, the distributed ones after the others."""
    start = time.perf_counter()
    workloads = list(workloads)
    verdicts: dict[int, WorkloadVerdict] = {}
    programs: dict[str, ProgramProfile] = {}
    tables_of: dict[int, list[EventTable]] = {}
    queued = [i for i, w in enumerate(workloads) if w.distributed]
    running: dict[int, tuple[RankLaunch, int, float]] = {}
    with _folder(out_dir) as folder:

        # Against a baseline, kernel durations are compared (KL804): nothing then runs beside a profiled
        # workload on the GPU, so the distributed ones run one at a time after the others.
        overlap = baseline is None
        cap = MAX_RANK_PROCESSES if overlap else 0

        def start_queued() -> None:
            """Start queued distributed workloads while the rank processes running stay within the cap."""
            while queued:
                nproc = audit_ranks(device)
                if running and sum(n for _, n, _ in running.values()) + nproc > cap:
                    return
                i = queued.pop(0)
                if on_step:
                    on_step("capture", workloads[i])
                running[i] = (start_ranks(workloads[i].process_target, nproc, device, folder, workloads[i].name,
                                          steps=steps, timeout_s=process.timeout_s, fixtures=process.fixtures),
                              nproc, time.perf_counter())

        def check(i: int, traces: list[Path], ranks: int, t0: float) -> None:
            verdicts[i], tables_of[i] = _checked(workloads[i], device, traces, ranks, rules, on_step, keep_tables,
                                                 sources)
            verdicts[i].seconds = time.perf_counter() - t0

        singles = [i for i, w in enumerate(workloads) if not w.distributed]
        # SIGTERM / SIGHUP anywhere in here, not only while a child is waited for, stop the ranks started too
        with termination_raised(), _with_fork_server(process, len(singles)) as process:
            try:
                if overlap:
                    start_queued()
                    _side_by_side(singles, workloads, device, folder, steps, process, on_step, check, start_queued,
                                  running)
                else:   # timings compared: one at a time, in this thread
                    for i in singles:
                        t0 = time.perf_counter()
                        if on_step:
                            on_step("capture", workloads[i])
                        traces, ranks = capture_workload(workloads[i], device, folder, steps=steps, process=process)
                        check(i, traces, ranks, t0)
                start_queued()
                while running:
                    i = min(running)
                    launch_, nproc, t0 = running.pop(i)
                    traces = launch_.wait()
                    start_queued()
                    check(i, traces, nproc, t0)   # its time from the ranks' start, overlapping others
            finally:
                for launch_, _, _ in running.values():  # an error or an interrupt: no rank is left running
                    launch_.stop()
    ordered = [verdicts[i] for i in range(len(workloads))]
    all_tables: list[EventTable] = []
    if baseline is not None:
        for i, verdict in enumerate(ordered):
            programs.update(workload_programs(verdict.workload, tables_of[i]))
            all_tables += tables_of[i]
    metadata = collect_run_metadata(device)
    baseline_report = None
    baseline_rules = [r for r in rules if r.needs_baseline]
    if baseline is not None and baseline_rules:
        compared = run_check(CheckRequest(
            rules=baseline_rules, inputs=Inputs(tables=all_tables), sources=sources,
            baseline=BaselineInput(baseline, label=baseline_path, programs=programs,
                                   environments=[environment_of(metadata)], thresholds=limits, strict_env=strict_env,
                                   strict_timing=strict_timing)))
        baseline_report = compared.reports[-1]
    return AuditRun(device=device, metadata=metadata, verdicts=ordered,
                    out_dir=Path(out_dir) if out_dir else None, seconds=time.perf_counter() - start,
                    baseline_report=baseline_report, rules=list(rules), not_run=list(not_run))


@contextlib.contextmanager
def _with_fork_server(process: WorkloadProcess, singles: int) -> Iterator[WorkloadProcess]:
    """`process` with a fork server: the caller's, or one made here (started when the first child is, closed on
    the way out with any child it still runs) where two or more single-process workloads will share its imports."""
    if process.forks is not None or singles < 2:
        yield process
        return
    with started_fork_server(now=False) as forks:
        yield dataclasses.replace(process, forks=forks)


def _side_by_side(singles: list[int], workloads: list[Workload], device: str, folder: Path, steps: int,
                  process: WorkloadProcess, on_step: Callable[[str, Workload], None] | None,
                  check: Callable[[int, list[Path], int, float], None], start_queued: Callable[[], None],
                  running: dict[int, tuple[RankLaunch, int, float]]) -> None:
    """Capture the single-process workloads `singles` (indexes into `workloads`), several at once: each child
    waited for by a thread of its own, at most MAX_WORKLOAD_PROCESSES processes with the ranks running (always
    one). Each capture is checked here, in the calling thread, as it completes (`check(i, traces, ranks, t0)`),
    and so is each launch of ranks in `running` that has finished meanwhile (its processes make room: queued
    ranks are started, `start_queued`). A failure stops the others and raises the error of the failing workload
    with the lowest index; an error here, Ctrl-C or SIGTERM stops them too.
    Signals reach only the main thread: the threads are stopped through `cancel`, and joined before this
    returns or raises, so no child and no thread is left behind."""
    pending = list(singles)
    cancel = threading.Event()
    done: queue.Queue[tuple[int, tuple[list[Path], int] | None, BaseException | None]] = queue.Queue()
    live: dict[int, tuple[threading.Thread, float, threading.Event]] = {}
    failures: dict[int, BaseException] = {}

    def capture(i: int, ended: threading.Event) -> None:
        try:
            done.put((i, capture_workload(workloads[i], device, folder, steps=steps, process=process,
                                          cancel=cancel), None))
        except BaseException as exc:   # handed to the main thread, which raises it
            done.put((i, None, exc))
        finally:
            ended.set()

    try:
        while pending or live:
            for i in sorted(running):   # ranks that ended: checked now, their room for more
                if running[i][0].finished():
                    launch_, nproc, t0 = running.pop(i)
                    try:
                        traces = launch_.wait()
                        start_queued()
                        check(i, traces, nproc, t0)
                    except Exception as exc:
                        failures[i] = exc
                        break
            if failures:
                break
            rank_processes = sum(n for launch_, n, _ in running.values() if not launch_.finished())
            while pending and (not live or len(live) + rank_processes < MAX_WORKLOAD_PROCESSES):
                i = pending.pop(0)
                if on_step:
                    on_step("capture", workloads[i])
                ended = threading.Event()
                thread = threading.Thread(target=capture, args=(i, ended), daemon=True,
                                          name=f"kernlint-audit-{workloads[i].name}")
                live[i] = (thread, time.perf_counter(), ended)
                thread.start()
            try:   # a short wait: SIGTERM's handler and Ctrl-C run in between
                i, captured, exc = done.get(timeout=0.1)
            except queue.Empty:
                continue
            thread, t0, _ = live.pop(i)
            thread.join()
            if exc is not None:
                failures[i] = exc
                break
            try:
                check(i, *captured, t0)
            except Exception as exc:   # ordered with the captures' failures, by workload
                failures[i] = exc
                break
            start_queued()
    finally:
        cancel.set()
        # Every thread still out ends its capture first (once it has, its child's process group is gone). A
        # second Ctrl-C or SIGTERM meanwhile is raised after that, not in between, where it would leave children
        # running; and never inside Thread.join, which would then take a running thread for ended.
        signalled: BaseException | None = None
        for thread, _, ended in live.values():
            while not ended.is_set():
                try:
                    ended.wait()
                except (KeyboardInterrupt, TerminatedError) as sig:
                    signalled = signalled or sig
            if signalled is None:
                thread.join()   # it is returning
        while not done.empty():
            i, _, exc = done.get_nowait()
            if exc is not None and not isinstance(exc, ChildCancelled):
                failures[i] = exc
        if signalled is not None:
            raise signalled
    if failures:
        raise failures[min(failures)]


def _checked(workload: Workload, device: str, traces: list[Path], ranks: int, rules: list[Rule],
             on_step: Callable[[str, Workload], None] | None, keep_tables: bool,
             sources: SourceHandling | None = None) -> tuple[WorkloadVerdict, list[EventTable]]:
    """Load a workload's traces, check every rule (the cross-rank ones over all ranks), compare with what the
    workload must get."""
    verdict = WorkloadVerdict(workload, device, traces=traces, ranks=ranks)
    if on_step:
        on_step("check", workload)
    tables = [load_trace(t) for t in traces]
    reports = run_check(CheckRequest(rules=rules, inputs=Inputs(tables=tables), baseline=BaselineInput(hint=None),
                                     sources=sources)).reports
    if workload.distributed:   # each rank's report, then the run group's (the cross-rank rules)
        verdict.report = merge_reports(reports)
        if keep_tables:
            verdict.rank_reports = reports
    else:
        (verdict.report,) = reports
    verdict.problems = compare_with_expectation(workload, verdict.report, ranks)
    if keep_tables:
        verdict.tables = tables
    return verdict, tables
