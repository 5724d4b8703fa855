"""What checking produces: findings, per-rule outcomes, per-trace reports, the CheckResult every renderer
takes, and the exit policy."""
from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from kernlint.errors import MAX_SHOWN_CHARS, ExitCode, shorten
from kernlint.rules.severity import SEVERITY_ORDER

STATUS_FAILED = "failed"
STATUS_PASSED = "passed"
STATUS_NOT_APPLICABLE = "not-applicable"
# The rule's evidence was damaged or could not all be read: never a pass.
STATUS_INCOMPLETE = "incomplete"

# Exit codes of a check (kernlint.errors.ExitCode), by the names the API has always exported.
EXIT_CLEAN, EXIT_FINDINGS, EXIT_INCOMPLETE = ExitCode.CLEAN, ExitCode.FINDINGS, ExitCode.INCOMPLETE


_SHOWN_TEXT_FIELDS = ("message", "scope", "event", "event_kind", "event_category", "launch_op", "top_op", "source",
                      "anchor", "function", "context")


@dataclass(frozen=True)
class Cost:
    """What a finding costs, measured from the trace (kernlint.rules.cost): `us` microseconds on `basis`
    ("host blocked + device idle", "copy + host blocked", "device time", "host time", "per run", ...), and
    `share`, that time's fraction of what `of` names (the step, the graph replay, the scope, the profiled
    window); `share` is None where the trace cannot say, and `reason` says why. `us` is None where nothing
    could be measured (an allocation: its bytes are the finding's `bytes`)."""

    us: float | None
    share: float | None
    basis: str
    of: str | None = None
    reason: str | None = None
    # The breakdown category (kernlint.trace.time_breakdown) of the device time it costs: where in the trace
    # report's "where the time goes" it falls. None where no device event was found.
    category: str | None = None


@dataclass(frozen=True)
class Finding:
    """One rule violation, pointing at the offending event and the code that launched it."""

    rule: str
    name: str
    severity: str
    message: str
    trace: str
    scope: str
    event: str
    event_kind: str
    event_category: str
    launch_op: str | None
    top_op: str | None
    source: str | None
    anchor: str | None
    ts: float
    rank: int | None = None
    function: str | None = None    # the user function at `source`
    # What it costs, so a reviewer can rank findings: the summed device time (µs) of the offending
    # launches, and the bytes they allocated. None where the trace cannot say (no GPU events; a missing event).
    device_us: float | None = None
    bytes: int | None = None
    # Evidence a renderer may show: for a timing change its effect, confidence interval and p-value.
    details: dict | None = field(default=None, compare=False, hash=False)
    # Why a right finding is not what to act on first (kernlint.rules.noise: step edge, warm-up, ...):
    # such findings are info. None for a finding at its rule's own severity.
    context: str | None = None
    # Findings of several rules on one event (a pageable upload's copy and the sync it makes) share a group:
    # one problem. The outermost op the event ran in, on its thread; None outside any op.
    group: str | None = field(default=None, compare=False, hash=False)
    # What it costs, on one scale for every rule (kernlint.rules.cost); None only where no cost was made.
    cost: Cost | None = field(default=None, compare=False, hash=False)

    def __post_init__(self) -> None:
        # Names come from the trace: a hostile 1 MB name is shown shortened, with a marker, in every format.
        for name in _SHOWN_TEXT_FIELDS:
            value = getattr(self, name)
            if isinstance(value, str) and len(value) > MAX_SHOWN_CHARS:
                object.__setattr__(self, name, shorten(value, 2 * MAX_SHOWN_CHARS if name == "message"
                                                       else MAX_SHOWN_CHARS))

    @property
    def fingerprint(self) -> str:
        """Identity across recordings of the same code (no times, trace paths, ranks, pids, step numbers;
        kernlint.rules.fingerprint): the suppressions file's key, SARIF's partialFingerprints, JSON's."""
        from kernlint.rules.fingerprint import fingerprint

        return fingerprint(self)


@dataclass
class RuleOutcome:
    rule: str
    name: str
    severity: str
    status: str
    level: str | None = None       # "kernel" or "op" for anchored checks
    instances: int = 0             # anchors or scope instances checked
    reason: str | None = None      # why not applicable
    note: str | None = None        # e.g. which part of the rule could not run on this trace
    findings: list[Finding] = field(default_factory=list)
    # Not applicable because what the rule is about is absent by name (no anchor, no scope, one rank):
    # a verdict that holds even where some events were damaged, since every name was read.
    subject_absent: bool = False
    # Not applicable because the trace is one rank alone: a cross-rank rule with nothing to compare.
    one_rank: bool = False


@dataclass
class TraceReport:
    trace: str
    events: int
    has_device_events: bool
    has_stacks: bool
    rank: int | None
    outcomes: list[RuleOutcome]
    ranks: list[int] | None = None   # set for the report of a group of ranks (the cross-rank rules)
    notes: list[str] = field(default_factory=list)    # run grouping, missing ranks, profiling-window edges
    outside_window: dict[str, int] = field(default_factory=dict)  # what was kept out of comparisons, by kind
    damage: list[str] = field(default_factory=list)   # what in the trace could not be used, one line each
    # What a reader must see even when nothing failed: a baseline's timing that was not judged, and why.
    warnings: list[str] = field(default_factory=list)
    # What the report is about: one "trace", a "run group" of ranks (the cross-rank rules), or the traces
    # against a "baseline". Summaries count traces only.
    subject: str = "trace"
    # CUDA-graph replays and how many of their device events were attributed (kernlint.trace.graphs); None
    # for a trace that replays no graph.
    graphs: dict | None = None
    # Where the device time goes (kernlint.trace.time_breakdown.TimeBreakdown.as_dict): per step, by breakdown
    # category, idle, the top costs. None for a trace without device events and for group / baseline reports.
    time: dict | None = None

    @property
    def findings(self) -> list[Finding]:
        return [f for o in self.outcomes for f in o.findings]


def not_applicable(rule, reason: str, *, absent: bool = False, one_rank: bool = False) -> RuleOutcome:
    """`absent`: the rule's subject does not exist by name (no anchor, no scope, one rank); `one_rank`: a
    cross-rank rule on a trace that is one rank alone."""
    return RuleOutcome(rule.id, rule.name, rule.severity, STATUS_NOT_APPLICABLE, reason=reason,
                       subject_absent=absent or one_rank, one_rank=one_rank)


def mark_incomplete(outcome: RuleOutcome, damage: list[str]) -> RuleOutcome:
    """A verdict that rests on damaged evidence: never passed (nor not applicable, unless the subject is
    absent by name). A failure stands: its findings are real; the damage is noted."""
    if not damage:
        return outcome
    what = "; ".join(damage)
    if outcome.status == STATUS_FAILED or (outcome.status == STATUS_NOT_APPLICABLE and outcome.subject_absent):
        extra = f"the trace is damaged ({what})"
        outcome.note = f"{outcome.note}; {extra}" if outcome.note else extra
        return outcome
    was = outcome.status + (f" ({outcome.reason})" if outcome.reason else "")
    outcome.note = f"{outcome.note}; would be {was}" if outcome.note else f"would be {was}"
    outcome.status = STATUS_INCOMPLETE
    outcome.reason = f"could not fully check: {what}"
    return outcome


def decided(rule, findings: list[Finding], level: str | None, instances: int, note: str | None = None
            ) -> RuleOutcome:
    """Failed when a finding at the rule's own severity or above exists; info-only findings pass. A rule run
    on the profiled window (no step in the trace) also fails on a finding at its window severity."""
    if not instances and not findings:
        # Nothing was there to check: a pass would be vacuous.
        return not_applicable(rule, "nothing of the rule's kind to judge in the trace (0 instances)")
    floor = failing_floor(rule)
    failing = any(SEVERITY_ORDER[f.severity] >= floor for f in findings)
    return RuleOutcome(rule.id, rule.name, rule.severity, STATUS_FAILED if failing else STATUS_PASSED,
                       level=level, instances=instances, findings=findings, note=note)


def failing_floor(rule) -> int:
    """The lowest severity rank (SEVERITY_ORDER) of a finding that fails the rule: its own severity, or its
    window severity where it ran on the profiled window."""
    floor = SEVERITY_ORDER[rule.severity]
    scope = getattr(rule.spec, "scope", None)
    if scope is not None and scope.window:
        floor = min(floor, SEVERITY_ORDER[scope.window_severity])
    return floor


# One rule's verdict over several traces: the first of these that any trace has.
STATUS_PRECEDENCE = (STATUS_FAILED, STATUS_INCOMPLETE, STATUS_PASSED, STATUS_NOT_APPLICABLE)


def combined_status(statuses: Iterable[str]) -> str:
    """failed if any failed, else incomplete if any was, passed if any passed, else not applicable."""
    found = set(statuses)
    return next((s for s in STATUS_PRECEDENCE if s in found), STATUS_NOT_APPLICABLE)


def at_or_above(findings: Iterable[Finding], fail_on: str) -> list[Finding]:
    """The findings at or above the severity `fail_on`: those that fail a check."""
    threshold = SEVERITY_ORDER[fail_on]
    return [f for f in findings if SEVERITY_ORDER[f.severity] >= threshold]


def merge_outcomes(outcomes: list[RuleOutcome]) -> RuleOutcome:
    """One rule's outcomes over several traces (the ranks of a run) as one: failed if any failed, else
    incomplete if any was, passed if any passed, else not applicable."""
    if len(outcomes) == 1:
        return outcomes[0]
    status = combined_status(o.status for o in outcomes)
    first = outcomes[0]
    levels = {o.level for o in outcomes if o.status != STATUS_NOT_APPLICABLE}
    return RuleOutcome(first.rule, first.name, first.severity, status,
                       level=levels.pop() if len(levels) == 1 else None,
                       instances=sum(o.instances for o in outcomes),
                       reason="; ".join(sorted({o.reason for o in outcomes if o.reason})) or None,
                       note="; ".join(sorted({o.note for o in outcomes if o.note})) or None,
                       findings=[f for o in outcomes for f in o.findings])


def merge_reports(reports: Sequence[TraceReport]) -> TraceReport:
    """The reports of one run's traces (its ranks, and their group) as one, rule by rule."""
    if len(reports) == 1:
        return reports[0]
    by_rule: dict[str, list[RuleOutcome]] = {}
    for report in reports:
        for o in report.outcomes:
            by_rule.setdefault(o.rule, []).append(o)
    outside: dict[str, int] = {}
    for report in reports:
        for k, v in report.outside_window.items():
            outside[k] = outside.get(k, 0) + v
    return TraceReport(trace=str(Path(reports[0].trace).parent), events=sum(r.events for r in reports),
                       has_device_events=all(r.has_device_events for r in reports),
                       has_stacks=all(r.has_stacks for r in reports), rank=None,
                       outcomes=[merge_outcomes(outs) for outs in by_rule.values()],
                       notes=[n for r in reports for n in r.notes], outside_window=outside,
                       damage=[d for r in reports for d in r.damage])


def exit_status(reports: Iterable[TraceReport], fail_on: str = "warning", *, allow_incomplete: bool = False,
                incomplete_input: bool = False) -> int:
    """1 when a finding is at or above `fail_on`; else 4 when something could not be fully checked (an
    incomplete rule, or `incomplete_input`: entries that could not be read), unless `allow_incomplete`;
    else 0."""
    reports = list(reports)
    if any(at_or_above(report.findings, fail_on) for report in reports):
        return EXIT_FINDINGS
    if not allow_incomplete and (incomplete_input or any(o.status == STATUS_INCOMPLETE for r in reports
                                                         for o in r.outcomes)):
        return EXIT_INCOMPLETE
    return EXIT_CLEAN


def timing_warnings(result) -> list[str]:
    """The baseline comparisons' timing warnings (unknown timings, another or a throttled GPU): what every
    format shows even when nothing failed. Per-program notes ("not timed: ...") stay in the full reports."""
    return [w for r in result.reports if r.subject == "baseline" for w in r.warnings if w.startswith("timing")]


def is_missing(value: object) -> bool:
    """None, a float NaN, or pandas' NA / NaT (told by type name, so pandas need not be imported)."""
    if value is None:
        return True
    if isinstance(value, float):
        return math.isnan(value)
    return type(value).__name__ in ("NAType", "NaTType")


@dataclass
class CheckResult:
    reports: list[TraceReport]
    rules: list  # kernlint.rules.schema.Rule
    exit_code: int
    notes: list[str] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)   # (path, reason): met in a folder, not a trace
    ignored_files: int = 0                                          # files in folders with other suffixes
    # The entries of `skipped` that could not be read (no permission, dangling link, FIFO, bad gzip...), as
    # opposed to files that were read and are not traces: what they held was not checked.
    unreadable: list[tuple[str, str]] = field(default_factory=list)
    # The event tables the reports were made from: the visual formats (html) draw timelines from them.
    tables: list = field(default_factory=list, repr=False)
    # Findings taken out by suppressions (kernlint.rules.suppressions.Suppressed): every format says so.
    suppressed: list = field(default_factory=list)
    # Inline ignore comments, in the files the findings' sources were read from, that suppressed nothing
    # (kernlint.rules.suppressions.UnusedIgnore); a file no finding named is never read, so never judged.
    unused_ignores: list = field(default_factory=list)

    @property
    def traces_checked(self) -> int:
        """The traces checked: not the reports of run groups or of a baseline comparison."""
        return sum(1 for r in self.reports if r.subject == "trace")

    @property
    def findings(self) -> list[Finding]:
        """Every finding, in a fixed order (see finding_sort_key) that the order of events cannot change."""
        return sorted_findings(f for r in self.reports for f in r.findings)

    def rule_status(self, rule_id: str) -> str:
        """failed if any trace failed it; passed if it applied somewhere and never failed; else not-applicable."""
        return combined_status(o.status for r in self.reports for o in r.outcomes if o.rule == rule_id)

    @property
    def incomplete(self) -> list[tuple[TraceReport, RuleOutcome]]:
        """The (trace, rule) verdicts that could not be fully checked."""
        return [(r, o) for r in self.reports for o in r.outcomes if o.status == STATUS_INCOMPLETE]


def _number_key(value) -> tuple[int, float]:
    return (1, 0.0) if is_missing(value) else (0, float(value))


def _text_key(value) -> str:
    return "" if is_missing(value) else str(value)


def finding_sort_key(f: Finding) -> tuple:
    """(trace, rank, rule, ts, scope, event, message); a missing rank or time sorts last."""
    return (_text_key(f.trace), _number_key(f.rank), _text_key(f.rule), _number_key(f.ts), _text_key(f.scope),
            _text_key(f.event), _text_key(f.message))


def sorted_findings(findings: Iterable[Finding]) -> list[Finding]:
    return sorted(findings, key=finding_sort_key)


_OPTIONAL = frozenset({"launch_op", "top_op", "source", "anchor", "ts", "rank", "function", "device_us", "bytes",
                       "details", "cost"})


def clean_finding(f: Finding) -> Finding:
    """`f` with every missing value (NaN, pandas NA) in its fields made None, so that no renderer shows
    `nan` and the fingerprint can be computed."""
    changes = {k.name: None if k.name in _OPTIONAL else "" for k in dataclasses.fields(f)
               if getattr(f, k.name) is not None and is_missing(getattr(f, k.name))}
    return dataclasses.replace(f, **changes) if changes else f
