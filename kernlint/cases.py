"""Rule cases: each rule's good and bad traces, as data.

A case file (`fixtures/cases/KL001.toml`) lists cases for one rule:

```toml
rule = "KL001"

[[case]]
name = "gpu-placeholder-new-ones"
trace = "traces/gpu/placeholder_new_ones.pt.trace.json.gz"   # relative to the fixtures folder; a folder of
                                 # per-rank traces is checked as one distributed run
expect = "failed"                # failed | passed | incomplete | not-applicable
findings = 1                     # optional: exact number of findings
event = "FillFunctor"            # optional: regex every finding's event must match
scope = "Fp8BlockLinear"         # optional: regex every finding's scope must match
source = "placeholder"           # optional: regex every finding's source must match
level = "kernel"                 # optional: kernel | op

[[case]]
name = "cpu-placeholder-new-ones"
program = "placeholder_new_ones" # fixtures/programs/NAME.py, recorded on the CPU by the test suite
expect = "failed"

[[case]]                         # a baseline rule (KL801-KL807): the trace against a baseline
name = "gpu-fill-inserted"
trace = "traces/gpu/block_regressed.pt.trace.json.gz"
baseline-from = "traces/gpu/block_clean.pt.trace.json.gz"   # record the baseline from this trace; or
# baseline = "baselines/h200-fp8-block-linear.json"         # a recorded baseline file
# slowdown = 1.05                # what-if: the trace's kernels ran this many times as long ...
# slowdown-kernel = "^nvjet"     # ... only those whose name matches (default: every kernel)
# zoo = 1                        # the zoo.md case it reproduces (else read from a fixtures/zoo name: r4_14_...)
expect = "failed"
```
Adding a case never needs Python. The test suite runs every case of every rule through `evaluate_case`.
"""
from __future__ import annotations

import re
import tomllib
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import msgspec
import numpy as np

from kernlint.errors import RuleFileError
from kernlint.pipeline import BaselineInput, CheckRequest, Inputs, SourceHandling, run_check
from kernlint.rules.result import RuleOutcome, merge_outcomes
from kernlint.rules.schema import Rule
from kernlint.rules.sources import file_and_line
from kernlint.trace.load import find_trace_files, load_trace
from kernlint.trace.table import EventTable

_ZOO_NAME = re.compile(r"(?:^|/)r\d_(\d+)_")


class CaseSpec(msgspec.Struct, forbid_unknown_fields=True, rename="kebab", frozen=True):
    name: str
    expect: Literal["failed", "passed", "incomplete", "not-applicable"]
    trace: str | None = None
    program: str | None = None
    findings: int | None = None
    event: str | None = None
    scope: str | None = None
    source: str | None = None
    level: Literal["kernel", "op", "host"] | None = None
    severity: Literal["error", "warning", "info"] | None = None   # of every finding (a hot scope, or the window)
    context: str | None = None       # a regex every finding's context matches ("^negligible", "step edge")
    note: str = ""
    baseline: str | None = None
    baseline_from: str | None = None
    slowdown: float | None = None
    slowdown_kernel: str | None = None
    capture: str | None = None       # a capture trace of the CUDA graphs `trace` replays (relative to fixtures/)
    zoo: int | None = None           # the zoo.md case this case reproduces (fixtures/zoo workloads say it by name)


class CaseFile(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    rule: str
    case: list[CaseSpec]


@dataclass
class Case:
    rule: str
    spec: CaseSpec
    file: Path

    @property
    def id(self) -> str:
        return f"{self.rule}:{self.spec.name}"

    @property
    def zoo_case(self) -> int | None:
        """The zoo.md case this case reproduces: `zoo = N`, or the number in a fixtures/zoo workload's name
        (`r4_14_sampler_mask_before`)."""
        if self.spec.zoo is not None:
            return self.spec.zoo
        m = _ZOO_NAME.search(self.spec.program or self.spec.trace or "")
        return int(m.group(1)) if m else None

    def trace_path(self, fixtures: Path) -> Path | None:
        return fixtures / self.spec.trace if self.spec.trace else None


@dataclass
class CaseResult:
    case: Case
    outcome: RuleOutcome | None
    problems: list[str] = field(default_factory=list)
    # Findings the check's suppressions took out (kernlint.rules.suppressions.Suppressed): `audit --replay` with
    # a project's suppressions and inline ignores.
    suppressed: list = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def load_cases(folder: Path) -> list[Case]:
    cases: list[Case] = []
    for file in sorted(Path(folder).glob("KL*.toml")):
        try:
            data = msgspec.convert(tomllib.loads(file.read_text(encoding="utf-8")), CaseFile)
        except (tomllib.TOMLDecodeError, msgspec.ValidationError) as exc:
            raise RuleFileError(file, f"bad case file: {exc}") from None
        except (RecursionError, MemoryError):
            raise RuleFileError(file, "bad case file: nested too deeply to read") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise RuleFileError(file, f"cannot read case file: {exc}") from None
        for spec in data.case:
            if (spec.trace is None) == (spec.program is None):
                raise RuleFileError(file, f"case {spec.name!r} needs exactly one of `trace` or `program`")
            if spec.baseline is not None and spec.baseline_from is not None:
                raise RuleFileError(file, f"case {spec.name!r}: `baseline` or `baseline-from`, not both")
            if spec.slowdown is not None and not spec.slowdown > 0:
                raise RuleFileError(file, f"case {spec.name!r}: `slowdown` must be above 0")
            cases.append(Case(rule=data.rule, spec=spec, file=file))
    return cases


# The tables of the last few traces read: cases are run in trace order (sorted_for_loading), and several
# rules' cases replay one trace. A table is only read by the checks, never changed.
_RECENT_TABLES: OrderedDict[tuple, EventTable] = OrderedDict()
_RECENT_LIMIT = 2


def _loaded(path: Path, captures: list[Path]) -> EventTable:
    def stamp(p: Path) -> tuple:
        st = p.stat()
        return str(p.resolve()), st.st_mtime_ns, st.st_size

    key = (stamp(path), *(stamp(c) for c in captures))
    if key in _RECENT_TABLES:
        _RECENT_TABLES.move_to_end(key)
        return _RECENT_TABLES[key]
    table = load_trace(path, captures=captures)
    _RECENT_TABLES[key] = table
    while len(_RECENT_TABLES) > _RECENT_LIMIT:
        # Only the caches (they point back at the table: a cycle), never the derived facts: the evicted table
        # may be one of the ranks of the case being loaded, checked next with its graph attribution.
        _RECENT_TABLES.popitem(last=False)[1].clear_caches()
    return table


def sorted_for_loading(cases: list[Case]) -> list[Case]:
    """The cases with those of one recorded trace next to each other (each trace is then read once)."""
    return sorted(cases, key=lambda c: (c.spec.trace or "", c.spec.capture or ""))


def _slowed(table: EventTable, factor: float, kernel: str | None) -> EventTable:
    """The table with its kernels (those matching `kernel`) running `factor` times as long."""
    columns = table.columns.copy()
    rows = columns["kind"] == "kernel"
    if kernel:
        pattern = re.compile(kernel)
        rows &= np.fromiter((pattern.search(n) is not None for n in columns["short_name"].tolist()), dtype=bool,
                            count=len(columns))
    dur, end = columns["dur"].copy(), columns["end"].copy()
    dur[rows] = dur[rows] * factor
    end[rows] = columns["ts"][rows] + dur[rows]
    columns["dur"], columns["end"] = dur, end
    return table.with_columns(columns)   # its graph attribution, op arguments and frame tree go along


def _case_baseline(case: Case, fixtures: Path):
    from kernlint.baseline import build_baseline, profile_traces, read_baseline

    spec = case.spec
    if spec.baseline is not None:
        return read_baseline(fixtures / spec.baseline)
    if spec.baseline_from is not None:
        tables = [load_trace(p) for p in find_trace_files([fixtures / spec.baseline_from])]
        return build_baseline(profile_traces(tables))
    return None


def evaluate_case(case: Case, trace: Path, rules: list[Rule], fixtures: Path | None = None,
                  sources: SourceHandling | None = None) -> CaseResult:
    """Check `trace` with the case's rule (against its baseline, if it names one; baseline paths are
    relative to `fixtures`) and compare with what the case expects. `sources`: the suppressions and source
    mapping of a check's settings (`audit --replay` applies the project's, as `kernlint check` does)."""
    chosen = [r for r in rules if r.id == case.rule]
    if not chosen:
        return CaseResult(case, None, [f"rule {case.rule} is not loaded"])
    captures = [(fixtures or trace.parent) / case.spec.capture] if case.spec.capture else []
    tables = [_loaded(p, captures) for p in find_trace_files([trace])]
    if case.spec.slowdown is not None:
        tables = [_slowed(t, case.spec.slowdown, case.spec.slowdown_kernel) for t in tables]
    baseline = _case_baseline(case, fixtures or trace.parent)
    if chosen[0].needs_baseline and baseline is None:
        return CaseResult(case, None, [f"{case.rule} compares with a baseline: the case needs `baseline` or "
                                       "`baseline-from`"])
    checked = run_check(CheckRequest(rules=chosen, inputs=Inputs(tables=tables),
                                     baseline=BaselineInput(baseline, hint=None), sources=sources))
    outcome = merge_outcomes([o for r in checked.reports for o in r.outcomes])
    spec = case.spec
    problems = []
    if outcome.status != spec.expect:
        problems.append(f"expected {spec.expect}, got {outcome.status}"
                        + (f" ({outcome.reason})" if outcome.reason else "")
                        + (f": {[f.message for f in outcome.findings]}" if outcome.findings else ""))
    if spec.findings is not None and len(outcome.findings) != spec.findings:
        problems.append(f"expected {spec.findings} finding(s), got {len(outcome.findings)}: "
                        f"{[f.message for f in outcome.findings]}")
    if spec.level is not None and outcome.level != spec.level:
        problems.append(f"expected level {spec.level}, got {outcome.level}")
    if spec.severity is not None:
        other = sorted({f.severity for f in outcome.findings} - {spec.severity})
        if other or not outcome.findings:
            problems.append(f"expected every finding at severity {spec.severity}, got {other or 'no finding'}")
    for attr in ("event", "scope", "source", "context"):
        pattern = getattr(spec, attr)
        if pattern is None:
            continue
        for f in outcome.findings:
            value = getattr(f, attr) or ""
            if not any(re.search(pattern, v) for v in (_recorded_sources(f) if attr == "source" else [value])):
                problems.append(f"finding {attr} {value!r} does not match /{pattern}/")
    return CaseResult(case, outcome, problems, checked.suppressed)


def _recorded_sources(finding) -> list[str]:
    """A finding's source as reported and, where the pipeline refined it to the statement (`audit --replay` in a
    checkout: kernlint.rules.statements), at the function's def line the profiler recorded, which a case's
    `source` pattern names: the case holds wherever it is replayed."""
    sources = [finding.source or ""]
    details = finding.details if isinstance(finding.details, dict) else {}
    located = file_and_line(finding.source)
    if details.get("def_line") is not None and located is not None:
        sources.append(f"{located[0]}:{details['def_line']}")
    return sources


@dataclass
class AuditResult:
    results: list[CaseResult]

    @property
    def all_as_expected(self) -> bool:
        return all(r.ok for r in self.results)


def audit_recorded_cases(fixtures: Path, rules: list[Rule], sources: SourceHandling | None = None) -> AuditResult:
    """Every case that names a recorded trace, checked (with `sources`, as evaluate_case) and compared with its
    expectation."""
    cases = [c for c in load_cases(fixtures / "cases") if c.trace_path(fixtures) is not None]
    done = {id(c): evaluate_case(c, c.trace_path(fixtures), rules, fixtures, sources)
            for c in sorted_for_loading(cases)}
    return AuditResult([done[id(c)] for c in cases])   # reported in the case files' order
