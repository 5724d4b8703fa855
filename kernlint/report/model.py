"""What a check run produced, handed to every renderer."""
from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass, field

from kernlint.report.safe import is_missing
from kernlint.rules.result import STATUS_INCOMPLETE, Finding, RuleOutcome, TraceReport, combined_status
from kernlint.rules.schema import Rule


@dataclass
class CheckResult:
    reports: list[TraceReport]
    rules: list[Rule]
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
                       "details"})


def clean_finding(f: Finding) -> Finding:
    """`f` with every missing value (NaN, pandas NA) in its fields made None, so that no renderer shows
    `nan` and the fingerprint can be computed."""
    changes = {k.name: None if k.name in _OPTIONAL else "" for k in dataclasses.fields(f)
               if getattr(f, k.name) is not None and is_missing(getattr(f, k.name))}
    return dataclasses.replace(f, **changes) if changes else f
