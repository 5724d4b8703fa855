"""What a check run produced, handed to every renderer."""
from __future__ import annotations

from dataclasses import dataclass, field

from kernlint.rules.result import Finding, TraceReport
from kernlint.rules.schema import Rule


@dataclass
class CheckResult:
    reports: list[TraceReport]
    rules: list[Rule]
    exit_code: int
    notes: list[str] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)   # (path, reason): met in a folder, not a trace
    ignored_files: int = 0                                          # files in folders with other suffixes

    @property
    def findings(self) -> list[Finding]:
        return [f for r in self.reports for f in r.findings]

    def rule_status(self, rule_id: str) -> str:
        """failed if any trace failed it; passed if it applied somewhere and never failed; else not-applicable."""
        statuses = {o.status for r in self.reports for o in r.outcomes if o.rule == rule_id}
        if "failed" in statuses:
            return "failed"
        if "incomplete" in statuses:
            return "incomplete"
        if "passed" in statuses:
            return "passed"
        return "not-applicable"
