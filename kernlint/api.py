"""kernlint from Python: check traces or a finished torch.profiler run, or profile a block and check it.

    import kernlint

    result = kernlint.check("logdir/")                 # a trace file, a .json.gz, a folder, or a list of them
    result = kernlint.check(prof, rules=["KL001"])     # a finished torch.profiler.profile
    assert result.passed, result

    with kernlint.profiling(rules=["KL001"]) as run:   # profile the block, then check its trace
        layer(x)
    run.assert_clean()                                 # raises kernlint.RuleViolation, listing the findings

`rules` takes rule selectors and rule paths in one list: an item that is an existing file or folder (or any
os.PathLike) is an extra rule file or folder, loaded beside the shipped rules like the CLI's `--rules`;
any other string is a selector like `--select` (an id `KL001`, a prefix `KL0`, a rule name, or `ALL`). A
string that looks like a path (it ends in `.toml` or holds a `/`) but names nothing is an error, not a
selector. With no selector every loaded rule applies.

This module sits at the top of the layers, beside the CLI (which it never imports). It returns data and
raises the typed errors of kernlint.errors (TraceError, RuleFileError, ConfigError); it prints nothing and
never exits.

Baselines: `baseline=` (a path, or a kernlint.baseline.Baseline) also runs the baseline rules (KL801-KL807),
comparing the traces with it; a profiled block is compared with the baseline's program named `program`
(the pytest plugin names it after the test), and its profile is kept on the block (`.profile`) for
recording one.
"""
from __future__ import annotations

import contextlib
import dataclasses
import os
import sys
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernlint.errors import ConfigError, RuleFileError
from kernlint.extras import require_capture
from kernlint.report.safe import printable
from kernlint.rules.result import (
    EXIT_CLEAN,
    EXIT_INCOMPLETE,
    STATUS_FAILED,
    CheckResult,
    Finding,
    at_or_above,
    clean_finding,
    sorted_findings,
)
from kernlint.rules.severity import SEVERITY_ORDER

__all__ = ["CheckReport", "ProfiledBlock", "RuleViolation", "check", "profiling", "resolve_rules", "resolve_settings",
           "split_rules"]

# When a saved trace (save_trace=) is kept: always, or only when the check did not pass.
KEEP_TRACE = ("always", "failed")
# The trace label of a profiler run exported to a temporary file (which is gone once the check is done).
PROFILER_TRACE_LABEL = "<torch.profiler run>"


class RuleViolation(AssertionError):
    """A profiled block broke a rule (or could not be fully checked). The message lists each finding with
    its rule, message and source line; `.result` is the CheckReport."""

    def __init__(self, result: CheckReport, where: str | None = None, trace: Path | None = None):
        self.result = result
        self.trace = trace
        head = f"kernlint check of the block at {where}" if where else "kernlint check"
        kept = f"\n  trace kept at {printable(trace)} (open it in Perfetto or chrome://tracing)" if trace else ""
        super().__init__(f"{head}: {result.describe()}{kept}")


class RuleNotApplicable(AssertionError):
    """A rule the block asked for did not apply to it (no anchor, no scope, nothing of its kind): the check
    could not have failed, so it proves nothing. `.result` is the CheckReport; `.rules` the ids."""

    def __init__(self, result: CheckReport, rules: list[str], where: str | None = None):
        self.result = result
        self.rules = rules
        head = f"kernlint check of the block at {where}" if where else "kernlint check"
        reasons = []
        for rule_id in rules:
            outcome = next((o for r in result.reports for o in r.outcomes if o.rule == rule_id), None)
            reasons.append(f"{rule_id} did not apply" + (f": {outcome.reason}" if outcome and outcome.reason else ""))
        super().__init__(f"{head}: " + "; ".join(printable(r) for r in reasons)
                         + " (the block never did what the rule checks; allow_not_applicable=True if that is "
                           "expected)")


@dataclass(repr=False)
class CheckReport(CheckResult):
    """What a check found: a kernlint.rules.result.CheckResult (every output format renders it) plus the
    verdict under `fail_on`.

    `findings` (every finding, in a fixed order), `reports` (one per trace, plus one per run group of
    ranks), `incomplete` ((trace report, rule outcome) pairs that could not be fully checked), `unreadable`
    (folder entries that could not be read), `exit_code` (what `kernlint check` would exit with: 0, 1 or 4),
    `passed`, `failing` (the findings at or above `fail_on`), `summary` (one line) and `describe()` / str()
    (the summary, then one line per finding).
    """

    fail_on: str = "warning"

    @classmethod
    def of(cls, result: CheckResult, fail_on: str) -> CheckReport:
        """The pipeline's CheckResult as a CheckReport under `fail_on` (the exit policy it was made with)."""
        return cls(**{f.name: getattr(result, f.name) for f in dataclasses.fields(CheckResult)}, fail_on=fail_on)

    @property
    def failing(self) -> list[Finding]:
        """The findings at or above `fail_on`: those that make `passed` False and the exit code 1."""
        return at_or_above(self.findings, self.fail_on)

    @property
    def passed(self) -> bool:
        """No finding at or above `fail_on`, and everything was fully checked (no incomplete verdict, no
        unreadable entry): the exit policy's clean status (kernlint.rules.result.exit_status), as the CLI's."""
        return self.exit_code == EXIT_CLEAN

    @property
    def failed_rules(self) -> list[str]:
        return [r.id for r in self.rules if self.rule_status(r.id) == STATUS_FAILED]

    @property
    def summary(self) -> str:
        checked = f"checked {self.traces_checked} trace(s) with {len(self.rules)} rule(s)"
        n = len(self.findings)
        gaps = []
        if self.incomplete:
            gaps.append(f"{len(self.incomplete)} rule verdict(s) incomplete: "
                        + ", ".join(f"{o.rule} ({printable(r.trace)})" for r, o in self.incomplete))
        if self.unreadable:
            gaps.append(f"{len(self.unreadable)} entr{'y' if len(self.unreadable) == 1 else 'ies'} could not be read")
        if self.exit_code == EXIT_INCOMPLETE and not gaps:   # incomplete as a whole (an empty block; no baseline match)
            gaps.append(self.notes[-1] if self.notes else "not everything could be checked")
        if self.passed:
            below = f" ({n} below {self.fail_on})" if n else ""
            return f"passed: 0 findings at or above {self.fail_on}{below}; {checked}"
        failing = self.failing
        parts = []
        if failing:
            parts.append(f"{len(failing)} finding(s) at or above {self.fail_on} "
                         f"(rules {', '.join(sorted({f.rule for f in failing}))})")
        parts += gaps
        return f"failed: {'; '.join(parts)}; {checked}"

    def describe(self) -> str:
        """The summary line, then each finding (rule, severity, message, source file:line, scope, launching
        op, trace), then what could not be fully checked."""
        lines = [self.summary]
        for f in map(clean_finding, sorted_findings(self.findings)):
            rank = f" rank {f.rank}" if f.rank is not None else ""
            lines.append(f"  {printable(f.rule)} {printable(f.name)} [{printable(f.severity)}]: "
                         f"{printable(f.message)}")
            source = printable(f.source) if f.source else "unknown (the trace has no Python stacks)"
            if f.source and f.function:
                source += f" ({printable(f.function)})"
            launched = f"; launched by {printable(f.launch_op)}" if f.launch_op else ""
            lines.append(f"      at {source}; scope {printable(f.scope)}{launched}; "
                         f"trace {printable(f.trace)}{rank}")
        for report, outcome in self.incomplete:
            lines.append(f"  {printable(outcome.rule)} incomplete in {printable(report.trace)}: "
                         f"{printable(outcome.reason)}")
        for path, reason in self.unreadable:
            lines.append(f"  could not read {printable(path)}: {printable(reason)}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.describe()

    def __repr__(self) -> str:
        return (f"<CheckReport {'passed' if self.passed else 'failed'}: {len(self.findings)} finding(s), "
                f"exit_code={self.exit_code}, fail_on={self.fail_on!r}>")


def _is_profiler(obj: object) -> bool:
    """A torch.profiler.profile (or the legacy autograd profiler): told by its export_chrome_trace, so that
    checking trace files never imports torch."""
    return callable(getattr(obj, "export_chrome_trace", None))


def _looks_like_path(text: str) -> bool:
    return text.endswith(".toml") or "/" in text or (os.sep != "/" and os.sep in text)


def split_rules(rules: str | os.PathLike | Iterable[str | os.PathLike] | None) -> tuple[list[Path], list[str]]:
    """`rules` as (extra rule paths, selectors); see the module docstring."""
    if rules is None:
        return [], []
    if isinstance(rules, (str, os.PathLike)):
        items = [rules]
    elif isinstance(rules, Iterable):
        items = list(rules)
    else:
        raise TypeError(f"rules: expected a rule id, name or path, or a list of them; got {type(rules).__name__}")
    paths: list[Path] = []
    selectors: list[str] = []
    for item in items:
        if isinstance(item, os.PathLike):
            paths.append(Path(item))
        elif not isinstance(item, str):
            raise TypeError(f"rules: expected rule ids, names or paths, got {type(item).__name__}")
        elif Path(item).exists():
            paths.append(Path(item))
        elif _looks_like_path(item):
            raise RuleFileError(item, "no such rule file or folder")
        else:
            selectors += _selectors(item, "rules")
    return paths, selectors


def resolve_rules(rules: str | os.PathLike | Iterable[str | os.PathLike] | None = None, *,
                  select: Iterable[str] = (), ignore: Iterable[str] = (), builtin: bool | None = None,
                  config: Any = None) -> list:
    """The rules a check applies: the shipped rules (unless `builtin` is False) plus the rule paths in
    `rules`, narrowed to the selectors in `rules` and `select`, minus `ignore`. `config`: a project's
    kernlint.config.Config (None: none) whose rules, [severity], [min-cost] and selection apply first, as
    `kernlint check` applies them (kernlint.config.selected_rules). A selector that matches no rule is a
    ConfigError; a bad rule file a RuleFileError."""
    from kernlint.config import Config, selected_rules

    paths, selectors = split_rules(rules)
    chosen = [*selectors, *_selectors(select)]
    return selected_rules(config if config is not None else Config(), extra_rule_paths=paths, builtin=builtin,
                          select=chosen or None, ignore=_selectors(ignore, "ignore"))


def resolve_settings(rules: str | os.PathLike | Iterable[str | os.PathLike] | None = None, *,
                     select: Iterable[str] = (), ignore: Iterable[str] = (), fail_on: str | None = None,
                     builtin: bool | None = None, max_trace_bytes: int | None = None, config: Any = None,
                     isolated: bool = False, cwd: str | os.PathLike | None = None):
    """The settings of an API check (a kernlint.config.CheckSettings), resolved as `kernlint check` resolves
    them: `config` is a kernlint.config.Config, a config file's path, or None for the kernlint.toml /
    pyproject.toml [tool.kernlint] found from `cwd` (default: the working directory) upward; `isolated=True`
    reads none (as `--isolated`). An argument given wins over the config, which wins over the default; the
    config's rules, [severity], [min-cost], selection, [per-source-ignores], [path-map], source-root and
    [thresholds] apply, and the suppressions file (kernlint-suppressions.json in the working directory) and
    inline `# kernlint: ignore[...]` comments too. An unknown key in the config is a warning
    (kernlint.config.ConfigWarning's line, as a Python UserWarning), never an error."""
    import warnings

    from kernlint.config import Config, resolve_check, resolve_config

    if fail_on is not None:
        _check_fail_on(fail_on)
    if isinstance(config, Config):
        if isolated:
            raise ConfigError(None, "config and isolated=True cannot be combined (isolated reads no config)")
        project = config
    elif config is None or isinstance(config, (str, os.PathLike)):
        project = resolve_config(config, isolated=isolated, cwd=Path(cwd) if cwd is not None else None)
    else:
        raise TypeError(f"config: expected a path or a kernlint.config.Config, got {type(config).__name__}")
    for warning in project.warnings:
        warnings.warn(warning.one_line(), UserWarning, stacklevel=3)
    paths, selectors = split_rules(rules)
    chosen = [*selectors, *_selectors(select)]
    return resolve_check(project, extra_rule_paths=paths, builtin=builtin, select=chosen or None,
                         ignore=_selectors(ignore, "ignore"), fail_on=fail_on, max_trace_bytes=max_trace_bytes)


def _selectors(values: str | Iterable[str], what: str = "select") -> list[str]:
    """"KL001,KL002" or ["KL001", "KL0"] as a flat list, like the CLI's comma-separated options."""
    if isinstance(values, str):
        values = [values]
    elif isinstance(values, Iterable):
        values = list(values)
    else:
        values = [values]
    bad = [v for v in values if not isinstance(v, str)]
    if bad:
        raise TypeError(f"{what}: expected rule ids, prefixes or names (strings), got {type(bad[0]).__name__}")
    return [s.strip() for value in values for s in value.split(",") if s.strip()]


def _check_fail_on(fail_on: str) -> None:
    if fail_on not in SEVERITY_ORDER:
        raise ConfigError(None, f"fail_on: {fail_on!r} is not a severity (one of: {', '.join(SEVERITY_ORDER)})")


def _export_profiler(prof: Any, out_path: Path) -> Path:
    """Write the profiler's Chrome trace to `out_path`: plain JSON, or gzip when the name ends in .gz (a
    temporary file beside it, renamed into place)."""
    try:
        if out_path.suffix != ".gz":
            prof.export_chrome_trace(str(out_path))
            return out_path
        from kernlint.capture.profiler import export_gzipped_trace

        export_gzipped_trace(prof, out_path)
        return out_path
    except OSError as exc:
        raise ConfigError(out_path, f"cannot write the profiler's trace: {exc.strerror or exc}") from None
    except (AttributeError, RuntimeError, AssertionError) as exc:
        # torch raises these when the profiler never ran or is still running.
        raise ConfigError(None, "the profiler has no finished run to export (check it after its `with` block "
                                f"or prof.stop()): {type(exc).__name__}: {exc}") from None


def _relabel(table, label: str):
    table.meta = dataclasses.replace(table.meta, path=label)
    return table


def _baseline_of(baseline: Any):
    """A Baseline from a path or a Baseline; None stays None."""
    if baseline is None:
        return None
    if isinstance(baseline, (str, os.PathLike)):
        from kernlint.baseline import read_baseline

        return read_baseline(baseline)
    from kernlint.baseline import Baseline

    if not isinstance(baseline, Baseline):
        raise TypeError(f"baseline: expected a path or a kernlint.baseline.Baseline, got {type(baseline).__name__}")
    return baseline


def _check(settings: Any, *, paths=(), tables=(), baseline: Any = None, programs: dict | None = None,
           strict_env: bool = False, thresholds: Any = None, recording: bool = False, captures=()) -> CheckReport:
    """The one check (kernlint.pipeline), as the API asks it: a CheckReport under the settings' fail_on."""
    from kernlint.pipeline import BaselineInput, Inputs, run_check

    result = run_check(settings.request(
        Inputs(paths=list(paths), tables=list(tables), captures=[Path(c) for c in captures]),
        baseline=BaselineInput(baseline, hint=None if recording else "pass baseline=", programs=programs,
                               strict_env=strict_env, thresholds=thresholds)))
    return CheckReport.of(result, settings.exit.fail_on)


def check(trace_or_profiler: Any, rules: str | os.PathLike | Iterable[str | os.PathLike] | None = None, *,
          select: Iterable[str] = (), ignore: Iterable[str] = (), fail_on: str | None = None,
          builtin: bool | None = None, max_trace_bytes: int | None = None, baseline: Any = None,
          strict_env: bool = False, thresholds: Any = None, captures: Iterable[str | os.PathLike] = (),
          config: Any = None, isolated: bool = False) -> CheckReport:
    """Check traces against the rules, as `kernlint check` does, and return a CheckReport.

    `trace_or_profiler`: a path (str or os.PathLike) to a trace file, a `.json.gz`, or a folder (searched
    like the CLI does: every kineto trace in it, whatever its name); a finished `torch.profiler.profile`
    (its Chrome trace is exported to a temporary file, checked under the label PROFILER_TRACE_LABEL, and
    deleted); or a list of these. `rules`: None for the shipped rules, or selectors and rule paths (see the
    module docstring); `select` / `ignore` take ids, prefixes, names or ALL. `fail_on`: the lowest severity
    that fails (`info`, `warning`, `error`; None: the config's `fail-on`, else `warning`).
    `max_trace_bytes`: the largest trace read (default: the config's, else kernlint's limit). `baseline`: a
    baseline file or kernlint.baseline.Baseline to compare with (KL801-KL807); `strict_env` and `thresholds`
    (kernlint.baseline.Thresholds; None: the config's [thresholds]) as `--strict-env` and `[thresholds]`.
    `captures`: traces that recorded the CUDA-graph captures the checked traces replay, as `--capture` (merged
    into every replay trace, never checked themselves); capture traces among the checked paths pair by content.

    Configuration as `kernlint check` (kernlint.api.resolve_settings): `config` None reads the kernlint.toml /
    pyproject.toml [tool.kernlint] found from the working directory upward (a path: that file; a
    kernlint.config.Config: that one), `isolated=True` none; its rules, [severity], [min-cost], selection,
    `fail-on`, `max-trace-bytes`, [thresholds], [per-source-ignores] and [path-map] apply, and so do the
    suppressions file and inline `# kernlint: ignore[...]` comments. The same traces and config give the same
    findings as the CLI, the pytest fixture and the audit.

    Raises TraceError (a trace that cannot be read), RuleFileError, ConfigError (bad selector, bad
    `fail_on`, a profiler with nothing to export); never prints or exits.
    """
    from kernlint.trace.load import load_trace

    settings = resolve_settings(rules, select=select, ignore=ignore, fail_on=fail_on, builtin=builtin,
                                max_trace_bytes=max_trace_bytes, config=config, isolated=isolated)
    baseline = _baseline_of(baseline)
    limit = settings.max_trace_bytes
    if isinstance(trace_or_profiler, (str, os.PathLike)) or _is_profiler(trace_or_profiler):
        items = [trace_or_profiler]
    elif isinstance(trace_or_profiler, (list, tuple)):
        items = list(trace_or_profiler)
    else:
        raise TypeError("check: expected a trace path, a folder, a finished torch.profiler.profile, or a list "
                        f"of them; got {type(trace_or_profiler).__name__}")
    if not items:
        raise ConfigError(None, "check: no trace given")
    paths = []
    profilers = []
    for item in items:
        if _is_profiler(item):
            profilers.append(item)
        elif isinstance(item, (str, os.PathLike)):
            paths.append(Path(item))
        else:
            raise TypeError(f"check: expected a trace path or a torch.profiler.profile, got {type(item).__name__}")
    tables = []
    with tempfile.TemporaryDirectory(prefix="kernlint-profile-") as folder:
        for n, prof in enumerate(profilers):
            exported = _export_profiler(prof, Path(folder) / f"profile{n}.pt.trace.json")
            label = PROFILER_TRACE_LABEL if len(profilers) == 1 else f"{PROFILER_TRACE_LABEL} #{n + 1}"
            tables.append(_relabel(load_trace(exported, max_bytes=limit), label))
    return _check(settings, paths=paths, tables=tables, baseline=baseline, strict_env=strict_env,
                  thresholds=thresholds, captures=captures)


def _caller_location(depth: int) -> str | None:
    """`file:line` of the code `depth` frames above the caller (where a `with` block starts)."""
    try:
        frame = sys._getframe(depth + 1)
    except ValueError:
        return None
    return f"{frame.f_code.co_filename}:{frame.f_lineno}"


class ProfiledBlock:
    """The `as` target of `kernlint.profiling(...)`: profiles the block with torch.profiler as `kernlint run`
    does (CPU, plus CUDA where the device is a GPU; shapes, memory, Python stacks, nn.Module scopes;
    CUDA synchronized before the profiler stops), then checks the trace. After the block, `.result` is the
    CheckReport and `.trace` the kept trace file (None unless `save_trace` was given; with
    `keep_trace="failed"`, None too when the check passed: the file is removed).

    When the block raises, nothing is checked and the exception goes on. With `fail=True` a failing check
    raises RuleViolation when the block ends. `config` / `isolated`: the configuration, as kernlint.check()
    takes it (None: the config file found from the working directory upward; the pytest plugin passes the
    project's, found from its rootdir).
    """

    def __init__(self, rules=None, *, select: Iterable[str] = (), ignore: Iterable[str] = (),
                 fail_on: str | None = None, builtin: bool | None = None, device: Any = None,
                 save_trace: str | os.PathLike | None = None, keep_trace: str = "always", fail: bool = False,
                 where: str | None = None, baseline: Any = None, program: str = "trace",
                 keep_profile: bool = False, require_applicable: Iterable[str] | bool = False,
                 config: Any = None, isolated: bool = False):
        if keep_trace not in KEEP_TRACE:
            raise ConfigError(None, f"keep_trace: {keep_trace!r} is not one of {', '.join(KEEP_TRACE)}")
        # Settings are resolved before profiling, so a bad selector, rule or config file fails before the block
        # runs; they are kernlint.check()'s (resolve_settings), the project's config included.
        self.settings = resolve_settings(rules, select=select, ignore=ignore, fail_on=fail_on, builtin=builtin,
                                         config=config, isolated=isolated)
        self.rules = self.settings.rules
        self.baseline = _baseline_of(baseline)
        self.program = program
        self.keep_profile = keep_profile
        # With fail=True: these rule ids (or names) must each apply to the block; True: at least one rule must.
        self.require_applicable = require_applicable if isinstance(require_applicable, bool) else \
            frozenset(require_applicable)
        self.profile = None                # the block's kernlint.baseline.ProgramProfile (keep_profile=True)
        self.fail_on = self.settings.exit.fail_on
        self.device = device
        self.save_trace = None if save_trace is None else Path(save_trace)
        self.keep_trace = keep_trace
        self.fail = fail
        self.where = where
        self.trace: Path | None = None
        self.profiler_log: list[str] = []    # what the profiler wrote on stderr beyond its routine lines
        self._result: CheckReport | None = None
        self._stack: contextlib.ExitStack | None = None
        self._sync_devices: list = []      # CUDA devices synchronized before the profiler stops

    @property
    def result(self) -> CheckReport:
        if self._result is None:
            raise ConfigError(None, "no result yet: the profiled block has not finished (or it raised)")
        return self._result

    def _activities(self):
        import torch
        from torch.profiler import ProfilerActivity

        wanted = torch.device(self.device) if self.device is not None else None
        if wanted is None:
            use_cuda = torch.cuda.is_available()
            self._sync_devices = list(range(torch.cuda.device_count())) if use_cuda else []
        elif wanted.type == "cuda":
            if not torch.cuda.is_available():
                raise ConfigError(None, f"device {str(wanted)!r}: torch sees no CUDA device")
            use_cuda = True
            self._sync_devices = [wanted]
        elif wanted.type == "cpu":
            use_cuda = False
        else:
            raise ConfigError(None, f"device {str(wanted)!r}: kernlint profiles the CPU and CUDA devices only")
        return [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if use_cuda else [])

    def __enter__(self) -> ProfiledBlock:
        require_capture("kernlint.profiling()")
        from torch.profiler import profile

        from kernlint.capture.profiler import profiler_arguments, profiling_quietly, refuse_a_second_profiler

        refuse_a_second_profiler("kernlint.profiling()")
        if self.where is None:
            self.where = _caller_location(1)
        self._result = None
        self._prof = profile(activities=self._activities(), **profiler_arguments())
        self._stack = contextlib.ExitStack()
        # Kineto's start and stop chatter on file descriptor 2 goes to profiler_log, not the terminal.
        self._stack.enter_context(profiling_quietly(self._prof, self.profiler_log))
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        __tracebackhide__ = True
        stack, self._stack = self._stack, None
        try:
            if exc_type is None and self._sync_devices:
                import torch

                # Kernels still in flight when the profiler stops would be missing from the trace.
                for device in self._sync_devices:
                    torch.cuda.synchronize(device)
        finally:
            stack.__exit__(exc_type, exc, tb)
        if exc_type is not None:
            return False
        self._result = self._check_profile()
        if self.fail and not self._result.passed:
            raise RuleViolation(self._result, self.where, self.trace)
        if self.fail and self.require_applicable:
            status = {r.id: self._result.rule_status(r.id) for r in self._result.rules}
            if self.require_applicable is True:   # a selection by prefix, family or ALL: one must apply
                idle = sorted(status) if status and all(s == "not-applicable" for s in status.values()) else []
            else:
                idle = [r.id for r in self._result.rules if status[r.id] == "not-applicable"
                        and (r.id in self.require_applicable or r.name in self.require_applicable)]
            if idle:
                raise RuleNotApplicable(self._result, idle, self.where)
        return False

    def _checked(self, table) -> CheckReport:
        programs = None
        if self.baseline is not None or self.keep_profile:
            from kernlint.baseline import profile_program

            if self.keep_profile:   # recorded as `baseline record` would: never from a damaged trace
                from kernlint.pipeline import refuse_damaged_tables

                refuse_damaged_tables([table])
            programs = {self.program: profile_program([table])}
            if self.keep_profile:
                self.profile = programs[self.program]
        result = _check(self.settings, tables=[table], baseline=self.baseline, programs=programs,
                        recording=self.keep_profile)
        if not table.has_kind({"op", "kernel", "memcpy", "memset"}) and result.exit_code == EXIT_CLEAN:
            # An empty block proves nothing: never "passed" (the CLI's exit 4, could not fully check).
            result = dataclasses.replace(result, exit_code=EXIT_INCOMPLETE, notes=[
                *result.notes, "the profiled block ran no torch op: nothing was checked"])
        return result

    def _check_profile(self) -> CheckReport:
        from kernlint.trace.load import DEFAULT_MAX_TRACE_BYTES, load_trace

        if self.save_trace is None:
            with tempfile.TemporaryDirectory(prefix="kernlint-profile-") as folder:
                exported = _export_profiler(self._prof, Path(folder) / "block.pt.trace.json")
                table = _relabel(load_trace(exported, max_bytes=DEFAULT_MAX_TRACE_BYTES), PROFILER_TRACE_LABEL)
            return self._checked(table)
        try:
            self.save_trace.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigError(self.save_trace.parent,
                              f"cannot create the trace folder: {exc.strerror or exc}") from None
        self.trace = _export_profiler(self._prof, self.save_trace)
        result = self._checked(load_trace(self.trace, max_bytes=DEFAULT_MAX_TRACE_BYTES))
        if result.passed and self.keep_trace == "failed":
            self.trace.unlink(missing_ok=True)
            self.trace = None
        return result

    def assert_clean(self) -> None:
        """Raise RuleViolation unless the check passed (no finding at or above `fail_on`, nothing
        incomplete); its message lists each finding with rule, message and source line."""
        __tracebackhide__ = True
        if not self.result.passed:
            raise RuleViolation(self.result, self.where, self.trace)


def profiling(rules=None, *, select: Iterable[str] = (), ignore: Iterable[str] = (), fail_on: str | None = None,
              builtin: bool | None = None, device: Any = None, save_trace: str | os.PathLike | None = None,
              keep_trace: str = "always", fail: bool = False, baseline: Any = None,
              program: str = "trace", config: Any = None, isolated: bool = False) -> ProfiledBlock:
    """A context manager that profiles its block and checks the trace; see ProfiledBlock.

        with kernlint.profiling(rules=["KL001"]) as run:
            layer(x)
        run.assert_clean()          # or: assert run.result.passed, run.result

    `device`: None profiles CUDA too when torch sees a GPU; "cpu" the CPU only; "cuda" / "cuda:N" (or a
    torch.device) CPU and CUDA, synchronizing that device before the profiler stops. `save_trace`: keep
    the trace at this path (`.json`, or `.json.gz` gzipped); by default it goes to a temporary file that is
    deleted after the check; `keep_trace="failed"` removes the saved trace again when the check passed.
    `fail=True` raises RuleViolation at the end of the block when the check fails. `baseline` (a path or a
    kernlint.baseline.Baseline): also compare the block with the baseline's program `program`. `config` /
    `isolated`: the configuration, as kernlint.check() takes it.
    """
    return ProfiledBlock(rules, select=select, ignore=ignore, fail_on=fail_on, builtin=builtin, device=device,
                         save_trace=save_trace, keep_trace=keep_trace, fail=fail, where=_caller_location(1),
                         baseline=baseline, program=program, config=config, isolated=isolated)
