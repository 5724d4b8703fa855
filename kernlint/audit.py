"""The audit: run workloads under the profiler, check every rule, compare with what each must get.

Returns data; the CLI renders it. Sits above capture, trace and rules, below report and cli.
"""
from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

from kernlint.capture.metadata import collect_run_metadata
from kernlint.capture.distributed import launch
from kernlint.capture.runner import capture
from kernlint.rules.engine import TraceReport, check_trace, check_traces, merge_reports
from kernlint.rules.schema import Rule
from kernlint.trace.load import load_trace
from kernlint.workloads import BUILTIN_WORKLOADS, Workload, regressed_workloads


@dataclass
class WorkloadVerdict:
    workload: Workload
    device: str
    traces: list[Path] = field(default_factory=list)   # one per rank
    report: TraceReport | None = None
    problems: list[str] = field(default_factory=list)
    seconds: float = 0.0
    ranks: int = 1

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

    @property
    def all_as_expected(self) -> bool:
        return bool(self.verdicts) and all(v.ok for v in self.verdicts)


def audit_workloads(device: str, *, include_regressed: bool = False, fixtures: Path | None = None
                    ) -> list[Workload]:
    chosen = [w for w in BUILTIN_WORKLOADS.values() if device in w.devices]
    if include_regressed:
        chosen += [w for w in regressed_workloads(fixtures).values() if device in w.devices]
    return chosen


def audit_ranks(device: str) -> int:
    """Ranks for a distributed workload in the audit: two (gloo) on the CPU, up to two GPUs with NCCL."""
    if device == "cpu":
        return 2
    import torch

    return max(1, min(2, torch.cuda.device_count()))


def compare_with_expectation(workload: Workload, report: TraceReport, ranks: int = 1) -> list[str]:
    """A workload must get exactly its expected verdicts, and no other rule may fail on it. On one rank
    the cross-rank rules cannot apply, and must say so."""
    problems = []
    status = {o.rule: o for o in report.outcomes}
    for rule_id, expected in workload.expect.items():
        outcome = status.get(rule_id)
        if workload.distributed and ranks < 2 and outcome is not None and outcome.reason and \
                outcome.reason.startswith("needs the traces of two or more ranks"):
            continue
        if outcome is None:
            problems.append(f"{rule_id} was not run")
        elif outcome.status != expected:
            detail = outcome.reason or "; ".join(f.message for f in outcome.findings[:2])
            problems.append(f"{rule_id}: expected {expected}, got {outcome.status}" + (f" ({detail})" if detail else ""))
    for o in report.outcomes:
        if o.rule not in workload.expect and o.status == "failed":
            problems.append(f"{o.rule}: unexpected findings: {o.findings[0].message}")
        elif o.rule not in workload.expect and o.status == "incomplete":  # not fully checked is not a pass
            problems.append(f"{o.rule}: incomplete" + (f" ({o.reason})" if o.reason else ""))
    return problems


def run_audit(workloads: Iterable[Workload], rules: list[Rule], device: str, out_dir: Path | None = None,
              on_step: Callable[[str, Workload], None] | None = None) -> AuditRun:
    """Capture each workload (warm-up, then one profiled step), check it, compare. Traces go to out_dir,
    or to a temporary folder that is removed afterwards."""
    start = time.perf_counter()
    tmp = None if out_dir else tempfile.TemporaryDirectory(prefix="kernlint-audit-")
    folder = Path(out_dir) if out_dir else Path(tmp.name)
    verdicts = []
    try:
        for workload in workloads:
            t0 = time.perf_counter()
            verdict = WorkloadVerdict(workload, device)
            if on_step:
                on_step("capture", workload)
            if workload.distributed:
                nproc = audit_ranks(device)
                verdict.ranks = nproc
                verdict.traces = launch(workload.name, nproc, device, folder, workload.name)
                if on_step:
                    on_step("check", workload)
                verdict.report = merge_reports(check_traces([load_trace(t) for t in verdict.traces], rules))
            else:
                step = workload.build(device)
                verdict.traces = [capture(step, folder, workload.name, device=device,
                                          extra={"workload": workload.name, "regressed": workload.regressed}).trace]
                del step
                if on_step:
                    on_step("check", workload)
                verdict.report = check_trace(load_trace(verdict.traces[0]), rules)
            verdict.problems = compare_with_expectation(workload, verdict.report, verdict.ranks)
            verdict.seconds = time.perf_counter() - t0
            verdicts.append(verdict)
    finally:
        if tmp is not None:
            tmp.cleanup()
    return AuditRun(device=device, metadata=collect_run_metadata(device), verdicts=verdicts,
                    out_dir=Path(out_dir) if out_dir else None, seconds=time.perf_counter() - start)
