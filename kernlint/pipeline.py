"""The one check: traces and rules in, a CheckResult with its exit status out.

    discover -> pair captures -> map (load + check each trace: here, or on --jobs workers) -> compare with a
    baseline -> reduce (run groups, cross-rank and baseline rules) -> severity by cost -> suppress -> exit
    status -> sources mapped into the checkout and refined to the statement (SourceHandling)

`kernlint check`, `kernlint report`, `kernlint.check()` (and, through it, the pytest plugin), the audit
(kernlint.audit: each workload's traces, then the workloads against a baseline) and the rule cases
(kernlint.cases) call `run_check`; what differs between them is only how they are asked (options, arguments)
and what they do with the result (render it, return it, compare it with an expectation). It never prints and
never exits: errors are the typed ones of kernlint.errors.

What "baseline" is, on the way down: the callers read a file into a kernlint.baseline.Baseline; here it is
compared with the checked traces into a BaselineComparison; the engine takes only that comparison.

Layer: above rules, baseline and parallel; below the audit, the rule cases, the renderers and the CLI.
"""
from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernlint.errors import ConfigError
from kernlint.rules.result import EXIT_CLEAN, CheckResult, exit_status


@dataclass
class SourceHandling:
    """What silences findings and where their sources are read, applied by the pipeline after the reduce:
    the suppressions (the bulk file, `[per-source-ignores]`, inline `# kernlint: ignore[...]` comments read
    from the files under the source root only), then each finding's recorded path mapped into the root
    (`[path-map]` / `--path-map`, the tracked file it names: kernlint.rules.sources) and its line refined from
    the function's `def` to the statement that issued the op (kernlint.rules.statements). `root`: None for
    the git checkout around the working directory, else the working directory. `suppressions`: the bulk file
    read from `suppressions_location` (None where there is none). `update_suppressions`: (findings, rules, the
    file read, its location) -> the file to apply (the CLI's --suppress-all / --prune-suppressions, which write
    it first)."""

    root: Path | None = None
    path_map: Sequence[tuple[str, str]] = ()
    suppressions: Any = None          # a kernlint.rules.suppressions.SuppressionFile, or None
    suppressions_location: Path | None = None
    per_source_ignores: Mapping[str, Sequence[str]] = field(default_factory=dict)
    inline_ignores: bool = True
    update_suppressions: Callable | None = None

    @functools.cached_property
    def mapping(self):
        """The source map (lists the checkout's files: built only when a finding names a source)."""
        from kernlint.rules.sources import source_map

        return source_map(self.root, self.path_map)

    @functools.cached_property
    def statements(self):
        """The checkout's source files, each read and parsed once in a check: the inline-comment reader and
        the refinement of each finding's line share them (kernlint.rules.statements.SourceStatements)."""
        from kernlint.rules.statements import SourceStatements

        return SourceStatements(self.mapping.root)


@dataclass(frozen=True)
class Inputs:
    """What is checked. `paths`: files and folders, discovered as the CLI does; `tables`: traces loaded already
    (an exported profiler, a workload's ranks); `captures`: capture traces for CUDA-graph attribution beyond
    those found beside the replays; `notes`: lines the result carries (where a trace came from)."""

    paths: Sequence[Path] = ()
    tables: Sequence[Any] = ()
    captures: Sequence[Path] = ()
    max_trace_bytes: int | None = None
    notes: Sequence[str] = ()
    exclude: Sequence[str] = ()      # globs a folder search passes over (kernlint.trace.ignored)
    gitignore: bool = True           # a folder search passes over what git ignores


@dataclass(frozen=True)
class BaselineInput:
    """What the traces are compared with. `baseline`: a kernlint.baseline.Baseline (read by the caller), or None;
    without one the rules that compare with a baseline are left out (not listed as not applicable), and
    selecting only them is an error ending in `hint` (None: recording a baseline, no rule). `programs`:
    profiles made already (a profiled block, the audit's workloads) with their `environments`."""

    baseline: Any = None
    label: str = ""
    hint: str | None = "pass a baseline"
    programs: dict | None = None
    environments: list | None = None
    strict_env: bool = False
    strict_timing: bool = False      # an unknown timing verdict is a finding
    thresholds: Any = None           # kernlint.baseline.Thresholds ([thresholds]); None: the defaults


@dataclass(frozen=True)
class ExitPolicy:
    """How the findings become an exit status (kernlint.rules.result.exit_status)."""

    fail_on: str = "warning"
    allow_incomplete: bool = False
    exit_zero: bool = False


@dataclass(frozen=True)
class Execution:
    """Where the map runs (`--jobs`, `--backend`, `--scheduler`: kernlint.parallel), and whether the events are
    kept for a renderer that draws them (html's timelines: loaded here, even when workers checked)."""

    jobs: int = 1
    backend: str | None = None
    scheduler: str | None = None
    keep_tables: bool = False


@dataclass(frozen=True)
class CheckRequest:
    """One check: the rules (loaded, configured and selected: kernlint.config.resolve_check), the inputs, what
    they are compared with, the exit policy, where the work runs, and the suppressions and source mapping
    (None: neither; findings keep their sources as recorded)."""

    rules: list
    inputs: Inputs
    baseline: BaselineInput = BaselineInput()
    exit: ExitPolicy = ExitPolicy()
    execution: Execution = Execution()
    sources: SourceHandling | None = None


def rules_to_run(rules: Sequence, baseline: Any, hint: str | None) -> list:
    """`rules` less those that compare with a baseline when there is none; only those: ConfigError(hint)."""
    if baseline is not None:
        return list(rules)
    kept = [r for r in rules if not r.needs_baseline]
    if rules and not kept and hint is not None:
        raise ConfigError(None, "the selected rules (" + ", ".join(r.id for r in rules) + ") compare with a "
                                f"baseline: {hint}")
    return kept


def program_parts(checked: Sequence, roots: dict | None = None) -> list:
    """The checked traces' baseline parts, each named by its program's identity (kernlint.baseline.identity),
    its path read below the folder it was found in (`roots`, from discovery)."""
    from kernlint.baseline.profile import identified

    missing = [c.summary.path for c in checked if c.summary.baseline_runs is None]
    if missing:
        raise ValueError(f"{missing[0]} was summarized without its baseline part (baseline_part=True)")
    roots = roots or {}
    return [identified(c.summary.baseline_runs, roots.get(str(c.summary.path))) for c in checked]


def compare_checked(baseline: Any, checked: Sequence, *, baseline_path: str = "", limits: Any = None,
                    strict_env: bool = False, strict_timing: bool = False, roots: dict | None = None):
    """A kernlint.baseline.Baseline against checked traces that carry their baseline parts
    (summarize_trace(..., baseline_part=True)): a kernlint.baseline.BaselineComparison."""
    from kernlint.baseline import compare_with_baseline
    from kernlint.baseline.profile import named_as_in_baseline, profiles_from_runs

    parts = named_as_in_baseline(program_parts(checked, roots), baseline.programs)
    return compare_with_baseline(baseline, [], programs=profiles_from_runs(parts),
                                 environments=[c.summary.environment for c in checked], baseline_path=baseline_path,
                                 limits=limits, strict_env=strict_env, strict_timing=strict_timing)


def check_tables(tables: Sequence, rules: Sequence, *, baseline: Any = None, strict_env: bool = False,
                 thresholds: Any = None) -> list:
    """The reports of loaded traces (a test, a script): run_check on `tables`, its reports."""
    return run_check(CheckRequest(rules=list(rules), inputs=Inputs(tables=list(tables)),
                                  baseline=BaselineInput(baseline, strict_env=strict_env, thresholds=thresholds,
                                                         hint=None))).reports


def run_check(request: CheckRequest) -> CheckResult:
    from kernlint.parallel import check_paths
    from kernlint.rules.engine import combine_checked, summarize_trace
    from kernlint.rules.negligible import apply_min_cost
    from kernlint.trace.load import DEFAULT_MAX_TRACE_BYTES, discover_traces, load_trace
    inputs, against, policy, execution = request.inputs, request.baseline, request.exit, request.execution
    rules = rules_to_run(request.rules, against.baseline, against.hint)
    limit = inputs.max_trace_bytes or DEFAULT_MAX_TRACE_BYTES
    found = (discover_traces(list(inputs.paths), inputs.exclude, inputs.gitignore) if inputs.paths
             else None)
    files = found.files if found else []
    compare = against.baseline is not None and any(r.needs_baseline for r in rules)
    parallel = bool(execution.jobs > 1 or execution.backend or execution.scheduler)
    tables: list = []
    if execution.keep_tables:   # the renderer draws from the events: load them here (also when workers check)
        pairing = _paired_up_front(files, limit, inputs.captures)
        tables = [load_trace(p, max_bytes=limit, captures=pairing.captures.get(str(p), ()),
                             outside_captures=str(p) in pairing.outside_captures) for p in pairing.checked]
    if execution.keep_tables and not parallel:
        checked = [summarize_trace(t, rules, baseline_part=compare) for t in tables]
    elif execution.keep_tables:
        checked = check_paths(pairing.checked, rules, max_bytes=limit, jobs=execution.jobs,
                              backend=execution.backend, scheduler=execution.scheduler, baseline_parts=compare,
                              captures=pairing.captures, outside_captures=pairing.outside_captures)
    else:   # each trace loaded, checked and let go (in this process, or on the workers)
        checked, pairing = check_and_pair(files, rules, limit, inputs.captures, execution, baseline_parts=compare)
    given = list(inputs.tables)
    checked += [summarize_trace(t, rules, baseline_part=compare) for t in given]
    tables += given
    comparison = None
    if compare:
        if against.programs is not None:
            from kernlint.baseline import compare_with_baseline

            comparison = compare_with_baseline(against.baseline, tables, programs=against.programs,
                                               environments=against.environments, baseline_path=against.label,
                                               strict_env=against.strict_env, limits=against.thresholds,
                                               strict_timing=against.strict_timing)
        else:
            comparison = compare_checked(against.baseline, checked, baseline_path=against.label,
                                         limits=against.thresholds, strict_env=against.strict_env,
                                         strict_timing=against.strict_timing, roots=found.roots if found else None)
    reports = combine_checked(checked, rules, comparison=comparison)
    # Severity follows cost: a cause costing less than its rule's min-cost a step is info (negligible).
    reports = apply_min_cost(reports, rules)
    suppressed: list = []
    unused_ignores: list = []
    if request.sources is not None:
        applied = _suppressed(reports, rules, request.sources)
        reports, suppressed, unused_ignores = applied.reports, applied.suppressed, applied.unused_ignores
    skipped = list(found.skipped) if found else []
    # Entries that could not be read (not files that were read and are not traces): not checked.
    unreadable = [(str(e.path), e.reason) for e in skipped if e.unreadable]
    # A baseline that met none of the checked programs checked nothing: incomplete, never clean.
    nothing_compared = comparison is not None and comparison.compared_nothing
    code = EXIT_CLEAN if policy.exit_zero else exit_status(reports, policy.fail_on,
                                                           allow_incomplete=policy.allow_incomplete,
                                                           incomplete_input=bool(unreadable) or nothing_compared)
    result = CheckResult(
        reports=reports, rules=rules, exit_code=code, notes=[*inputs.notes, *pairing.notes],
        skipped=[(str(e.path), e.reason) for e in skipped], ignored_files=found.ignored_count if found else 0,
        unreadable=unreadable, tables=tables if execution.keep_tables else [], suppressed=suppressed,
        unused_ignores=unused_ignores)
    if request.sources is not None and any(f.source for f in result.findings):
        result = _mapped_sources(result, request.sources)
    return result


def check_and_pair(files: Sequence[Path], rules: Sequence, limit: int, captures: Sequence[Path],
                   execution: Execution, *, baseline_parts: bool) -> tuple[list, Any]:
    """Check `files` (the map, here or on workers) with the capture traces among them paired with the replay
    traces they serve (kernlint.trace.pairing): (the CheckedTraces in the order of `files`, the CapturePairing).

    Two or more files and no --capture: each trace is read once, by the worker that checks it, which also hands
    back its CUDA-graph role (`graph_roles`); the pairing is made from those roles, and only the traces it pairs
    (a replay trace that takes a capture trace, a capture trace checked outside its capture windows) are read
    and checked again, as the pairing says. Captures given (--capture, checked against every replay trace) are
    read up front, as a single trace is checked without any pairing."""
    from kernlint.parallel import check_paths
    from kernlint.trace.pairing import GraphRole, pair_roles
    from kernlint.trace.sources import pairs_captures

    def run(paths, **extra):
        return check_paths(paths, rules, max_bytes=limit, jobs=execution.jobs, backend=execution.backend,
                           scheduler=execution.scheduler, baseline_parts=baseline_parts, **extra)

    if captures or len(files) < 2:
        pairing = _paired_up_front(files, limit, captures)
        return run(pairing.checked, captures=pairing.captures, outside_captures=pairing.outside_captures), pairing
    checked = run(files, graph_roles=True)
    # Only a source that pairs captures (kineto) takes part: another's role counts as no graph at all.
    pairing = pair_roles(files, [c.graph_role if pairs_captures(p) else GraphRole.none(p)
                                 for p, c in zip(files, checked)])
    again = [p for p in pairing.checked if str(p) in pairing.captures or str(p) in pairing.outside_captures]
    if again:
        redone = dict(zip(map(str, again), run(again, captures=pairing.captures,
                                               outside_captures=pairing.outside_captures)))
        checked = [redone.get(str(p), c) for p, c in zip(files, checked)]
    return checked, pairing


def _paired_up_front(files: Sequence[Path], limit: int, captures: Sequence[Path]):
    """kernlint.trace.pairing.pair_captures over the entries whose source pairs captures (kineto's: another
    source's entry, an nsys export's process, is never read as JSON), every entry still checked."""
    from kernlint.trace.pairing import pair_captures
    from kernlint.trace.sources import pairable

    pairing = pair_captures(pairable(files), limit, list(captures))
    pairing.checked = [Path(f) for f in files]
    return pairing


def _suppressed(reports: list, rules: list, sources: SourceHandling):
    """The suppressions applied (kernlint.rules.suppressions.Applied): the reports less what they take out,
    what they took out, and the inline ignores that took out nothing. Inline comments are read only from the
    files the source map resolves inside the root (a path it does not resolve, a file not yet tracked, is read
    as it is: inside the root only), and only those of the findings' sources. Fingerprints are of the recorded
    sources: mapping comes after, as the bulk file's keys were made."""
    from kernlint.rules.suppressions import suppressions_applied

    file = sources.suppressions
    findings = [f for r in reports for f in r.findings]
    if sources.update_suppressions is not None:
        file = sources.update_suppressions(findings, rules, file, sources.suppressions_location)
    if not any(f.source for f in findings):
        return suppressions_applied(reports, rules, file=file, per_source=sources.per_source_ignores,
                                    inline=sources.inline_ignores)
    mapping = sources.mapping
    return suppressions_applied(reports, rules, file=file, per_source=sources.per_source_ignores,
                                inline=sources.inline_ignores, root=mapping.root,
                                resolve=lambda recorded: mapping.path(recorded) or recorded,
                                statements=sources.statements)


def _mapped_sources(result: CheckResult, sources: SourceHandling) -> CheckResult:
    """Recorded paths -> the checkout's files; the def line -> the statement that issued the op, in the files
    the map resolved into the checkout."""
    from kernlint.rules.sources import with_mapped_sources
    from kernlint.rules.statements import with_statement_lines

    mapping = sources.mapping
    result = with_mapped_sources(result, mapping)
    return with_statement_lines(result, sources.statements, only=lambda f: mapping.path(f) == f)


def record_programs(paths: Sequence[Path], *, max_trace_bytes: int | None = None, captures: Sequence[Path] = (),
                    jobs: int = 1, backend: str | None = None, scheduler: str | None = None) -> tuple[dict, dict]:
    """What `baseline record` keeps of traces: (program name -> ProgramProfile, the environment), made by the
    same discovery, capture pairing and map as a check (each trace's part made where it is loaded). An entry
    that cannot be read is an error: a baseline missing a rank is a wrong baseline."""
    from kernlint.baseline.profile import profiles_from_runs
    from kernlint.trace.load import DEFAULT_MAX_TRACE_BYTES, discover_traces

    found = discover_traces(list(paths))
    unreadable = [e for e in found.skipped if e.unreadable]
    if unreadable:
        raise ConfigError(unreadable[0].path, f"could not be read ({unreadable[0].reason}): no baseline written")
    limit = max_trace_bytes or DEFAULT_MAX_TRACE_BYTES
    checked, _ = check_and_pair(found.files, [], limit, captures, Execution(jobs, backend, scheduler),
                                baseline_parts=True)
    for c in checked:
        refuse_damaged_recording(c.summary.path, c.summary.damage)
    programs = profiles_from_runs(program_parts(checked, found.roots))
    return programs, (checked[0].summary.environment if checked else {})


def refuse_damaged_recording(path: Any, damage: Sequence[str]) -> None:
    """The one damage policy of every baseline recording (`baseline record`, the audit's `--record-baseline`,
    a profiled block's `keep_profile`): a trace with damage (kernlint.trace.damage: launches lost or read
    twice) is refused, since it would become the reference every later check is held to."""
    if damage:
        more = f"; {len(damage) - 1} more kind(s)" if len(damage) > 1 else ""
        raise ConfigError(path, f"damaged ({damage[0]}{more}): a baseline recorded from it would be wrong; no "
                                "baseline written")


def refuse_damaged_tables(tables: Sequence[Any]) -> None:
    """refuse_damaged_recording for loaded traces."""
    from kernlint.trace.damage import trace_damage

    for table in tables:
        refuse_damaged_recording(table.meta.path, trace_damage(table).summary())
