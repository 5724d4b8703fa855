"""A candidate's programs against a baseline's: what launches were added or removed (by sequence
alignment, so an inserted kernel is named at its position), new syncs, allocation growth, and which
kernels got slower or faster (kernlint.baseline.stats). Returns data; rules turn it into findings.
"""
from __future__ import annotations

import dataclasses
import difflib
import shlex
from dataclasses import dataclass, field

from kernlint.baseline.model import Baseline, Launch, ProgramProfile
from kernlint.baseline.stats import Thresholds, TimingVerdict, adjust_family, compare_samples

TOTAL = "total device time"


@dataclass(frozen=True)
class Placed:
    """A launch where it stands in one side's program: its scope and its place in it."""

    launch: Launch
    scope: str
    index_in_scope: int      # 0-based
    scope_length: int
    before: str | None       # the next launch in launch order, if any
    after: str | None        # the previous launch in launch order, if any

    def where(self) -> str:
        text = f"{self.scope} at position {self.index_in_scope + 1} of {self.scope_length}"
        if self.before:
            return f"{text}, before {self.before}"
        return f"{text}, after {self.after}" if self.after else text


@dataclass(frozen=True)
class SequenceChange:
    program: str
    change: str              # "added" or "removed"
    placed: Placed           # in the candidate for added launches, in the baseline for removed ones
    trace: str               # a trace of the side it is in
    ts: float = float("nan")     # an added launch: when the candidate issued it (in `trace`)
    group: str | None = None     # and the finding group of the op it ran in (rules.checks.base.make_finding)
    runs: int = 0                # an added launch of a candidate variant: how many runs launched that variant


@dataclass(frozen=True)
class TimingChange:
    program: str
    subject: str             # the launch's name, or TOTAL
    scope: str
    placed: Placed | None    # None for the program total
    verdict: TimingVerdict
    trace: str


@dataclass(frozen=True)
class ScratchChange:
    program: str
    scope: str               # a scope label, or "" for the whole program
    what: str                # "allocated" or "peak scratch"
    before: int
    after: int
    trace: str


@dataclass(frozen=True)
class UnmatchedProgram:
    """A program on one side that met none on the other: a regression that changes a program's identity (or
    a program added or gone) must not pass as "another program"."""

    side: str                # "baseline": in the baseline, not among the checked traces; "candidate": the reverse
    name: str
    traces: tuple[str, ...]  # the candidate's traces, or the baseline's record of them
    runs: int


@dataclass
class ProgramComparison:
    name: str
    baseline_name: str
    sequence: list[SequenceChange] = field(default_factory=list)
    timing: list[TimingChange] = field(default_factory=list)        # every timed launch, changed or not
    scratch: list[ScratchChange] = field(default_factory=list)
    counts: dict[str, tuple[int, int]] = field(default_factory=dict)  # category -> (baseline, candidate)
    timing_note: str | None = None     # why timing was not (fully) compared


@dataclass
class BaselineComparison:
    baseline_path: str
    programs: list[ProgramComparison]
    notes: list[str] = field(default_factory=list)             # programs that did not meet, and why
    environment_warnings: list[str] = field(default_factory=list)
    strict_env: bool = False
    refresh_command: str = ""
    thresholds: Thresholds = field(default_factory=Thresholds)
    strict_timing: bool = False    # an unknown timing is a finding (--strict-timing)
    unmatched: list[UnmatchedProgram] = field(default_factory=list)   # programs that met none on the other side
    matched: list[tuple[str, str]] = field(default_factory=list)      # (candidate program, baseline program)

    @property
    def timings(self) -> list[TimingChange]:
        return [t for p in self.programs for t in p.timing]

    @property
    def unknown_timings(self) -> list[TimingChange]:
        """The timings neither shown slower (or faster) nor ruled the same, the most undecided first."""
        unknown = [t for t in self.timings if t.verdict.direction == "unknown"]
        return sorted(unknown, key=lambda t: -(t.verdict.runs_needed or 0))

    @property
    def compared_nothing(self) -> bool:
        """No checked program met a program of the baseline: no baseline verdict rests on anything."""
        return not self.programs

    @property
    def timing_refused(self) -> bool:
        """--strict-env and the environments differ: no timing verdict."""
        return self.strict_env and bool(self.environment_warnings)


class _Placer:
    """Places launches of one side's sequence in their scopes (built once: sequences can be long)."""

    def __init__(self, sequence: list[tuple[str, Launch]]):
        self.sequence = sequence
        self.members: dict[str, list[int]] = {}
        self.rank: list[int] = []
        for i, (scope, _) in enumerate(sequence):
            same = self.members.setdefault(scope, [])
            self.rank.append(len(same))
            same.append(i)

    def __call__(self, i: int) -> Placed:
        scope, launch = self.sequence[i]
        same, k = self.members[scope], self.rank[i]
        # Its neighbours in launch order, whatever their scope: what a reader sees in a timeline.
        before = self.sequence[i + 1][1].name if i + 1 < len(self.sequence) else None
        after = self.sequence[i - 1][1].name if i > 0 else None
        return Placed(launch, scope, k, len(same), before, after)


def _counts(sequence: list[tuple[str, Launch]]) -> dict[str, int]:
    out: dict[str, int] = {}
    for _, launch in sequence:
        out[launch.category] = out.get(launch.category, 0) + 1
    return out


def _scratch(name: str, base: ProgramProfile, cand: ProgramProfile, trace: str) -> list[ScratchChange]:
    changes = []
    pairs = [("", base.alloc_bytes, cand.alloc_bytes, "allocated"),
             ("", base.peak_scratch_bytes, cand.peak_scratch_bytes, "peak scratch")]
    for label in sorted(set(base.scopes) & set(cand.scopes)):
        b, c = base.scopes[label], cand.scopes[label]
        pairs += [(label, b.alloc_bytes, c.alloc_bytes, "allocated"),
                  (label, b.peak_scratch_bytes, c.peak_scratch_bytes, "peak scratch")]
    for label, before, after, what in pairs:
        if before != after:
            changes.append(ScratchChange(name, label, what, before, after, trace))
    return changes


def _issued(issued: list, j: int) -> tuple[float, str | None]:
    if j < len(issued):
        ts, group = issued[j]
        return float(ts), group or None
    return float("nan"), None


def _keys(sequence: list[tuple[str, Launch]]) -> list[tuple]:
    return [launch.key for _, launch in sequence]


def _variant_changes(name: str, base: ProgramProfile, cand: ProgramProfile, reported: set) -> list[SequenceChange]:
    """Launches that the candidate's other sequences (runs that launched another sequence than its reference)
    add to the baseline: each variant aligned with the baseline sequence it is closest to (the reference, or one
    of the baseline's own variants: the variation the baseline itself shows is no change). Launches the
    reference comparison already reported at the same place are not reported again."""
    base_keys = [_keys(seq) for seq in (base.sequence(), *(v.sequence() for v in base.variants))]
    known = {tuple(k) for k in base_keys}
    out = []
    for variant in cand.variants:
        seq = variant.sequence()
        if tuple(_keys(seq)) in known:
            continue
        matchers = [difflib.SequenceMatcher(None, k, _keys(seq), autojunk=False) for k in base_keys]
        best = max(matchers, key=lambda m: m.ratio())
        place = _Placer(seq)
        for tag, _, _, j1, j2 in best.get_opcodes():
            if tag in ("insert", "replace"):
                for j in range(j1, j2):
                    placed = place(j)
                    where = (placed.scope, placed.launch.key, placed.index_in_scope)
                    if where in reported:
                        continue
                    reported.add(where)
                    ts, group = _issued(variant.issued, j)
                    out.append(SequenceChange(name, "added", placed, variant.trace, ts, group, variant.runs))
    return out


def compare_program(name: str, baseline_name: str, base: ProgramProfile, cand: ProgramProfile,
                    limits: Thresholds) -> ProgramComparison:
    out = ProgramComparison(name, baseline_name)
    base_seq, cand_seq = base.sequence(), cand.sequence()
    cand_trace = cand.issued_trace or (cand.traces[0] if cand.traces else "")
    base_trace = base.traces[0] if base.traces else ""
    matcher = difflib.SequenceMatcher(None, [launch.key for _, launch in base_seq],
                                      [launch.key for _, launch in cand_seq],
                                      autojunk=False)
    base_place, cand_place = _Placer(base_seq), _Placer(cand_seq)
    matched: list[tuple[int, int]] = []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            matched += list(zip(range(i1, i2), range(j1, j2)))
            continue
        out.sequence += [SequenceChange(name, "removed", base_place(i), base_trace) for i in range(i1, i2)]
        out.sequence += [SequenceChange(name, "added", cand_place(j), cand_trace, *_issued(cand.issued, j))
                         for j in range(j1, j2)]
    reported = {(c.placed.scope, c.placed.launch.key, c.placed.index_in_scope) for c in out.sequence
                if c.change == "added"}
    out.sequence += _variant_changes(name, base, cand, reported)
    base_counts, cand_counts = _counts(base_seq), _counts(cand_seq)
    out.counts = {c: (base_counts.get(c, 0), cand_counts.get(c, 0)) for c in sorted(set(base_counts) | set(cand_counts))
                  if base_counts.get(c, 0) != cand_counts.get(c, 0)}
    out.scratch = _scratch(name, base, cand, cand_trace)
    if base.timing_basis != cand.timing_basis:
        out.timing_note = (f"not timed: the baseline has {base.timing_basis} times, the candidate "
                           f"{cand.timing_basis} times")
        return out
    if cand.timing_basis == "host":
        out.timing_note = ("not timed: a trace without device events times ops by host time, which is not device "
                           "time (launch overhead, the Python interpreter); record on the GPU to gate timing")
        return out
    if min(base.runs, cand.runs) < limits.min_runs:
        out.timing_note = (f"not timed: timing needs {limits.min_runs} or more runs on each side (profiler steps "
                           f"or traces); the baseline has {base.runs}, the candidate {cand.runs}")
        return out
    quantum = max(base.quantum_us, cand.quantum_us)
    groups = {"base_groups": base.run_process or None, "cand_groups": cand.run_process or None,
              "quantum_us": quantum}
    for i, j in matched:
        b, c = base_seq[i][1], cand_seq[j][1]
        verdict = compare_samples(b.us, c.us, limits, **groups) if b.us and c.us else None
        if verdict is not None:
            placed = cand_place(j)
            out.timing.append(TimingChange(name, c.name, placed.scope, placed, verdict, cand_trace))
    if out.sequence:
        out.timing_note = "the total device time is not compared: the launch sequence changed"
    else:
        verdict = compare_samples(base.total_us, cand.total_us, limits, **groups)
        if verdict is not None:
            out.timing.append(TimingChange(name, TOTAL, "", None, verdict, cand_trace))
    return out


def _pairs(baseline: Baseline, candidate: dict[str, ProgramProfile]
           ) -> tuple[list[tuple[str, str]], list[str], list[UnmatchedProgram]]:
    """Which candidate program meets which baseline program: by identity (name); a baseline of one program and
    a check of one program meet whatever their names (a renamed file), with a note. What meets nothing on the
    other side is returned as unmatched."""
    if len(baseline.programs) == 1 and len(candidate) == 1:
        (b,), (c,) = baseline.programs, candidate
        # "trace" is the name of an unnamed program (a trace with no rank): nothing to warn about.
        same = b == c or c == "trace"
        return [(c, b)], ([] if same else [f"the candidate's program {c!r} is compared with the baseline's only "
                                           f"program {b!r}"]), []
    pairs = [(c, c) for c in candidate if c in baseline.programs]
    unmatched = [UnmatchedProgram("candidate", c, tuple(p.traces), p.runs + p.other_sequences)
                 for c, p in candidate.items() if c not in baseline.programs]
    unmatched += [UnmatchedProgram("baseline", b, tuple(p.traces), p.runs + p.other_sequences)
                  for b, p in baseline.programs.items() if b not in candidate]
    return pairs, [], unmatched


def compare(baseline: Baseline, candidate: dict[str, ProgramProfile], *, baseline_path: str = "",
            limits: Thresholds | None = None, environment_warnings: list[str] | None = None,
            strict_env: bool = False, strict_timing: bool = False) -> BaselineComparison:
    limits = limits or Thresholds()
    pairs, notes, unmatched = _pairs(baseline, candidate)
    programs = [compare_program(c, b, baseline.programs[b], candidate[c], limits) for c, b in pairs]
    # Two families per check, each adjusted together (Benjamini-Hochberg): the programs' totals (the primary
    # question, one test a program) and every matched launch of every program.
    for totals in (True, False):
        timed = [(p, k) for p in programs for k in range(len(p.timing)) if (p.timing[k].placed is None) == totals]
        adjusted = adjust_family([p.timing[k].verdict for p, k in timed], limits)
        for (p, k), verdict in zip(timed, adjusted, strict=True):
            p.timing[k] = dataclasses.replace(p.timing[k], verdict=verdict)
    for name, program in candidate.items():
        if program.other_sequences:
            notes.append(f"{name}: {program.other_sequences} run(s) launched another sequence than the other "
                         f"{program.runs}: their launches were compared with the baseline one by one, their times "
                         "not")
    return BaselineComparison(baseline_path, programs, notes, list(environment_warnings or []), strict_env,
                              _refresh(baseline, candidate, baseline_path), limits, strict_timing,
                              unmatched=unmatched, matched=[(c, b) for c, b in pairs])


def _refresh(baseline: Baseline, candidate: dict[str, ProgramProfile], baseline_path: str) -> str:
    """How to accept the candidate: a baseline recorded by profiling a workload is recorded the same way
    again (that profiles the new code); one recorded from traces is recorded from the candidate's traces
    (recording the old traces again would keep the old behavior)."""
    command = baseline.refresh_command
    if "--workload" in command.split():
        return command
    traces = sorted({t for p in candidate.values() for t in p.traces})
    if not traces or not baseline_path:
        return command
    return shlex.join(["kernlint", "baseline", "record", *traces, "-o", baseline_path])
