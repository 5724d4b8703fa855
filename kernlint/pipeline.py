"""The one check: traces and rules in, a CheckResult with its exit status out.

    discover -> pair captures -> map (load + check each trace: here, or on --jobs workers) -> compare with a
    baseline -> reduce (run groups, cross-rank and baseline rules) -> suppress -> exit status

`kernlint check`, `kernlint report` and `kernlint.check()` (and, through it, the pytest plugin) call
`run_check`; what differs between them is only how they are asked (options, arguments) and what they do with
the result (render it, return it). It never prints and never exits: errors are the typed ones of
kernlint.errors.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernlint.report.model import CheckResult
from kernlint.rules.result import EXIT_CLEAN, exit_status


@dataclass
class CheckRequest:
    """What to check and how. `paths`: files and folders, discovered as the CLI does; `tables`: traces loaded
    already (an exported profiler); `captures`: capture traces for CUDA-graph attribution beyond those found
    beside the replays. `keep_tables`: a renderer needs the events (html's timelines): they are loaded here,
    even when the check ran on workers. `programs`: baseline profiles made already (a profiled block)."""

    rules: list
    paths: Sequence[Path] = ()
    tables: Sequence[Any] = ()
    captures: Sequence[Path] = ()
    max_trace_bytes: int | None = None
    baseline: Any = None             # a kernlint.baseline.Baseline, or None
    baseline_label: str = ""
    programs: dict | None = None
    strict_env: bool = False
    thresholds: Any = None
    fail_on: str = "warning"
    allow_incomplete: bool = False
    exit_zero: bool = False
    jobs: int = 1
    backend: str | None = None
    scheduler: str | None = None
    keep_tables: bool = False
    notes: Sequence[str] = ()
    # (reports, rules) -> (reports left, what was suppressed): the CLI's suppressions.
    suppress: Callable | None = None
    result_type: type = CheckResult
    result_fields: dict = field(default_factory=dict)


def run_check(request: CheckRequest) -> CheckResult:
    from kernlint.parallel import check_paths
    from kernlint.rules.engine import combine_checked, compare_checked, summarize_trace
    from kernlint.trace.load import DEFAULT_MAX_TRACE_BYTES, discover_traces, load_trace
    from kernlint.trace.pairing import pair_captures

    rules = list(request.rules)
    limit = request.max_trace_bytes or DEFAULT_MAX_TRACE_BYTES
    found = discover_traces(list(request.paths)) if request.paths else None
    files = found.files if found else []
    pairing = pair_captures(files, limit, list(request.captures))
    compare = request.baseline is not None and any(r.needs_baseline for r in rules)
    parallel = bool(request.jobs > 1 or request.backend or request.scheduler)
    tables: list = []
    if request.keep_tables:   # the renderer draws from the events: load them here (also when workers check)
        tables = [load_trace(p, max_bytes=limit, captures=pairing.captures.get(str(p), ())) for p in pairing.checked]
    if request.keep_tables and not parallel:
        checked = [summarize_trace(t, rules, baseline=compare) for t in tables]
    else:   # each trace loaded, checked and let go (in this process, or on the workers)
        checked = check_paths(pairing.checked, rules, max_bytes=limit, jobs=request.jobs, backend=request.backend,
                              scheduler=request.scheduler, baseline=compare, captures=pairing.captures)
    given = list(request.tables)
    checked += [summarize_trace(t, rules, baseline=compare) for t in given]
    tables += given
    comparison = None
    if compare:
        if request.programs is not None:
            from kernlint.baseline import compare_with_baseline

            comparison = compare_with_baseline(request.baseline, tables, programs=request.programs,
                                               strict_env=request.strict_env, limits=request.thresholds)
        else:
            comparison = compare_checked(request.baseline, checked, baseline_path=request.baseline_label,
                                         limits=request.thresholds, strict_env=request.strict_env)
    reports = combine_checked(checked, rules, baseline=comparison)
    suppressed: list = []
    if request.suppress is not None:
        reports, suppressed = request.suppress(reports, rules)
    skipped = list(found.skipped) if found else []
    # Entries that could not be read (not files that were read and are not traces): not checked.
    unreadable = [(str(e.path), e.reason) for e in skipped if e.unreadable]
    code = EXIT_CLEAN if request.exit_zero else exit_status(reports, request.fail_on,
                                                            allow_incomplete=request.allow_incomplete,
                                                            incomplete_input=bool(unreadable))
    return request.result_type(
        reports=reports, rules=rules, exit_code=code, notes=[*request.notes, *pairing.notes],
        skipped=[(str(e.path), e.reason) for e in skipped], ignored_files=found.ignored_count if found else 0,
        unreadable=unreadable, tables=tables if request.keep_tables else [], suppressed=suppressed,
        **request.result_fields)
