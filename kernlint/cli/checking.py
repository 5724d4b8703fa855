"""A check from the command line: options -> settings (kernlint.config.resolve_check) -> the pipeline ->
the chosen formats; standard input as a trace; the suppressions file written when asked."""
from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path

from kernlint.cli.app import VERBOSE, emit, error_line, max_trace_bytes_default, split_values, write_atomically
from kernlint.cli.options import CheckOptions, current_config
from kernlint.config import (
    Config,
    described,
    resolve_check,
)
from kernlint.errors import ConfigError, KernlintError, TraceError


def check_settings(options: CheckOptions, config: Config):
    """This check's settings (kernlint.config.resolve_check), the options given: click has put the config's
    values in as their defaults already (command-line flag > config > default), and the rule selection is
    layered (the config's, then the command line's)."""
    bad = [m for m in options.extra.get("path_map", ()) if "=" not in m]
    if bad:
        raise ConfigError(None, f"--path-map {bad[0]!r}: expected FROM=TO")
    return resolve_check(
        config, rule_paths=options.rule_paths, builtin=not options.no_builtin,
        select=tuple(split_values(options.select)) or None, extend_select=split_values(options.extend_select),
        ignore=split_values(options.ignore), fail_on=options.fail_on, allow_incomplete=options.allow_incomplete,
        exit_zero=options.exit_zero, max_trace_bytes=options.max_trace_bytes,
        source_root=options.extra.get("source_root"),
        path_map=[tuple(m.split("=", 1)) for m in options.extra.get("path_map", ())],
        suppressions_file=options.suppressions_location, update_suppressions=_suppressions_update(options))


def read_baseline(path: Path):
    from kernlint.baseline import read_baseline

    return read_baseline(path)


def rendered(result, options: CheckOptions) -> object:
    from kernlint.report import RenderContext, get_format

    what = "statistics" if options.statistics else "check"
    context = RenderContext(verbosity=options.verbosity, embed_trace=options.extra.get("embed_trace") or "auto")
    return get_format(options.fmt).renderer(what)(result, context)


# How a trace read from standard input is named in errors (never the temporary file it is kept in).
STDIN_NAME = "<stdin>"
STDIN_CHUNK = 1 << 20


@contextlib.contextmanager
def stdin_as_file(traces, limit: int):
    """`-` among the traces: standard input, copied in chunks into a temporary trace file. The copy stops as
    soon as it passes `limit` bytes (memory: one chunk), and an error about the file names it `<stdin>`."""
    if not any(str(t) == "-" for t in traces):
        yield list(traces), []
        return
    import tempfile

    with tempfile.TemporaryDirectory(prefix="kernlint-stdin-") as tmp:
        head = sys.stdin.buffer.read(2)
        name = "stdin.pt.trace.json.gz" if head == b"\x1f\x8b" else "stdin.pt.trace.json"
        path = Path(tmp) / name
        size = len(head)
        with open(path, "wb") as out:
            out.write(head)
            while size <= limit:
                chunk = sys.stdin.buffer.read(min(STDIN_CHUNK, limit + 1 - size))
                if not chunk:
                    break
                out.write(chunk)
                size += len(chunk)
        if size > limit:
            raise TraceError(STDIN_NAME, f"standard input: more than --max-trace-bytes ({limit} bytes); not "
                                         "checked (read no further)")
        if not size:
            raise TraceError(STDIN_NAME, "standard input is empty: no trace to check")
        try:
            yield [path if str(t) == "-" else t for t in traces], [f"Trace: read from standard input ({path})"]
        except KernlintError as exc:
            if exc.path != str(path) and str(path) not in exc.problem:
                raise
            renamed = type(exc).__new__(type(exc))   # the same error, naming <stdin> instead of the temp file
            renamed.__dict__.update(exc.__dict__)
            renamed.path = STDIN_NAME if exc.path == str(path) else exc.path
            renamed.problem = exc.problem.replace(str(path), STDIN_NAME)
            renamed.args = (renamed.one_line(),)
            raise renamed from None


def check_traces(traces, options: CheckOptions, notes=()) -> int:
    """Options -> the one check (kernlint.pipeline) -> the chosen format."""
    limit = options.max_trace_bytes or max_trace_bytes_default()
    with stdin_as_file(traces, limit) as (paths, more_notes):
        name = options.extra.get("stdin_filename")
        renames = {}
        if name and paths != list(traces):   # --stdin-filename: the report names the trace NAME
            renames = {str(p): name for p, t in zip(paths, traces, strict=True) if str(t) == "-"}
            more_notes = [f"Trace: read from standard input as {name}"]
        return _check_paths(paths, options, [*notes, *more_notes], renames)


def _renamed(result, renames: dict[str, str]):
    """The result with the traces of `renames` (a temporary file: its name) named as the user said."""
    import dataclasses

    def finding(f):
        return dataclasses.replace(f, trace=renames[f.trace]) if f.trace in renames else f

    reports = [dataclasses.replace(
        r, trace=renames.get(r.trace, r.trace),
        outcomes=[dataclasses.replace(o, findings=[finding(f) for f in o.findings]) for o in r.outcomes])
        for r in result.reports]
    suppressed = [dataclasses.replace(s, finding=finding(s.finding)) for s in result.suppressed]
    return dataclasses.replace(result, reports=reports, suppressed=suppressed)


def _check_paths(traces, options: CheckOptions, notes=(), renames=None) -> int:
    from kernlint.parallel import resolve_jobs
    from kernlint.pipeline import BaselineInput, Execution, Inputs, run_check

    config = current_config()
    if options.verbosity >= VERBOSE:   # one line: the config, and whether .gitignore applies to each folder
        error_line("; ".join([described(config), *_gitignore_statuses(traces, options)]), prefix="kernlint: ")
    from kernlint.report import get_format

    chosen = get_format(options.fmt)   # a format that cannot render this is refused before the work
    chosen.renderer("statistics" if options.statistics else "check")
    extra = {k[len("output_"):]: v for k, v in options.extra.items() if k.startswith("output_") and v is not None}
    renderers = {name: get_format(name).renderer("check") for name in extra}
    needs_tables = chosen.needs_tables or any(get_format(name).needs_tables for name in extra)
    settings = check_settings(options, config)
    request = settings.request(
        Inputs(paths=list(traces), captures=list(options.captures), notes=list(notes),
               exclude=tuple(split_values(options.extra.get("exclude", ()))),
               gitignore=options.extra.get("respect_gitignore", True)),
        baseline=BaselineInput(baseline=read_baseline(options.baseline) if options.baseline else None,
                               label=str(options.baseline or ""),
                               hint="add --baseline FILE (record one with `kernlint baseline record`)",
                               strict_env=options.strict_env, strict_timing=options.strict_timing),
        execution=Execution(jobs=resolve_jobs(options.jobs), backend=options.backend, scheduler=options.scheduler,
                            keep_tables=needs_tables))   # html's timelines draw from every trace's events
    result = run_check(request)
    if renames:
        result = _renamed(result, renames)
    from kernlint.report import RenderContext

    for name, path in extra.items():   # the extra outputs first: the main one may be stdout
        emit(renderers[name](result, RenderContext(verbosity=options.verbosity)), path)
    emit(rendered(result, options), options.output)
    if options.extra.get("report_unused_ignores") or options.extra.get("fix_unused_ignores"):
        _report_unused_ignores(result, settings.sources, fix=bool(options.extra.get("fix_unused_ignores")))
    return result.exit_code


def _report_unused_ignores(result, sources, *, fix: bool) -> None:
    """--report-unused-ignores: `kernlint: warning: FILE:LINE: unused ignore[ID]` on stderr for each inline
    ignore that suppressed nothing (kernlint.rules.suppressions.UnusedIgnore), then what was judged; with
    --fix-unused-ignores, those comments taken out of their files. The exit code stays the check's."""
    from kernlint.cli.app import warning_line
    from kernlint.rules.suppressions import removed_unused_ignores

    unused = result.unused_ignores
    for u in unused:
        warning_line(u.one_line())
    judged = "only the files the findings' sources were read from were judged; comments in other files were not"
    if fix and unused:
        fixed = removed_unused_ignores(sources.mapping.root, unused)
        error_line(f"removed unused ignore comments from {len(fixed)} file(s); {judged}", prefix="kernlint: ")
    else:
        error_line(f"{len(unused)} unused ignore comment(s); {judged}", prefix="kernlint: ")


def _gitignore_statuses(traces, options: CheckOptions) -> list[str]:
    """-v: for each folder given, whether .gitignore applies to its search (kernlint.trace.ignored)."""
    if not options.extra.get("respect_gitignore", True):
        return []
    from kernlint.trace.ignored import git_ignored

    return [git_ignored(folder)[1] for folder in (Path(t) for t in traces) if folder.is_dir()]


def _suppressions_update(options: CheckOptions):
    """--suppress-all / --suppress-rule / --prune-suppressions: the bulk file written (or pruned) once the
    findings are known, before the pipeline applies it (kernlint.pipeline.SourceHandling.update_suppressions)."""
    from kernlint.rules.suppressions import SuppressionFile, bulk_entries, pruned

    def update(findings, rules, file, location):
        for rule_id in options.suppress_rule:
            if rule_id.upper() not in {r.id for r in rules}:
                raise ConfigError(None, f"--suppress-rule {rule_id}: no such rule among those checked")
        if options.suppress_all or options.suppress_rule:
            new = bulk_entries(findings, None if options.suppress_all else options.suppress_rule)
            file = SuppressionFile(location, {**(file.upgraded(findings).entries if file else {}), **new})
            write_atomically(location, file.text())
        elif options.prune_suppressions and file is not None:
            file = pruned(file, findings)
            write_atomically(location, file.text())
        return file

    return update


# The variables OpenBLAS reads its number of threads from, in its order.
_BLAS_THREADS = ("OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS")


def numpy_without_blas_threads() -> None:
    """Import numpy (the check's first import of it) with OpenBLAS on one thread. OpenBLAS starts a thread per
    core when it loads, and they spin a while: a tenth of a second of CPU that a check, which does no linear
    algebra, never uses, and that a small check waits for on a busy machine. Only where the user set no
    thread count, and the environment is back as it was at once: what this process starts later (--jobs
    workers, a Dask cluster) and scipy (a baseline's timing tests) read the user's own."""
    if "numpy" in sys.modules or any(name in os.environ for name in _BLAS_THREADS):
        return
    os.environ["OPENBLAS_NUM_THREADS"] = "1"
    try:
        import numpy  # noqa: F401
    finally:
        del os.environ["OPENBLAS_NUM_THREADS"]
