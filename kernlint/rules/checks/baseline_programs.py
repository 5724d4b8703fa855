"""baseline-programs: a program of the baseline that no checked trace is a run of, or a checked program the
baseline does not hold (kernlint.baseline.identity decides what a program is). A regression that changes a
program's identity, or drops a program from the checked folder, must not pass as "another program"."""
from __future__ import annotations

from typing import Literal

import msgspec

from kernlint.rules.checks.base import CheckKind, CheckSpec, baseline_finding, register
from kernlint.rules.result import RuleOutcome, decided


class BaselinePrograms(CheckSpec, tag="baseline-programs"):
    # which side's programs that met none on the other side count
    sides: list[Literal["baseline", "candidate"]] = msgspec.field(default_factory=lambda: ["baseline", "candidate"])


def run_baseline(rule, comparison) -> RuleOutcome:
    findings = []
    known = ", ".join(repr(b) for _, b in comparison.matched) or "none"
    for program in comparison.unmatched:
        if program.side not in rule.spec.check.sides:
            continue
        if program.side == "baseline":
            message = (f"the baseline's program {program.name!r} ({program.runs} run(s)) has no run among the checked "
                       f"traces: it was not compared (programs compared: {known})")
        else:
            message = (f"program {program.name!r} ({program.runs} run(s), {len(program.traces)} trace(s)) is not in "
                       f"the baseline: it was not compared (programs compared: {known}); record the baseline "
                       "again if the program is new")
        trace = program.traces[0] if program.side == "candidate" and program.traces else comparison.baseline_path
        findings.append(baseline_finding(rule, comparison, program.name, message, trace=trace, scope=program.name,
                                         details={"side": program.side, "program": program.name,
                                                  "runs": program.runs, "traces": list(program.traces)}))
    programs = len(comparison.programs) + len(comparison.unmatched)
    return decided(rule, findings, None, programs)


register(CheckKind(
    type="baseline-programs", spec=BaselinePrograms, run_baseline=run_baseline, judges_pairing=True,
    summary="Programs of the baseline with no checked run, and checked programs the baseline does not hold."))
