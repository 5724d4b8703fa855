"""What a baseline file holds: per program (a workload, or one rank of recorded traces), per scope, the
launch sequence with device-time samples, counts, allocations and syncs, plus where it was recorded.

Bump SCHEMA_VERSION on any change a reader of an older file would misread; readers refuse other versions.
"""
from __future__ import annotations

import msgspec

SCHEMA_VERSION = 1


class Thresholds(msgspec.Struct, frozen=True, kw_only=True, rename="kebab"):
    """When a timing differs from the baseline's (kernlint.baseline.stats; `[thresholds]` in the config).

    alpha: significance level of the one-sided Mann-Whitney test (0 < alpha < 1).
    min_effect: smallest relative change that counts (a fraction of the baseline median; 0.01 is 1 %).
    noise_multiple: a change must also exceed this many times the larger robust CV of the two sides.
    min_runs: fewest timed runs on each side before any timing verdict (at least 2).
    min_effect_us: smallest absolute change that counts (µs).
    confidence: of the reported interval of the shift.
    quantum_ticks: a change must also exceed this many ticks of the device timer (read from the durations).
    between_prior: the between-process CV assumed where neither side measured one (one process on each side):
        a fraction of the baseline median (measured on an H200: docs/baselines.md).
    between_prior_ticks: ... and at least this many timer ticks (the larger of the two is the assumed spread).
    """

    alpha: float = 0.01
    min_effect: float = 0.01
    noise_multiple: float = 3.0
    min_runs: int = 5
    min_effect_us: float = 0.05
    confidence: float = 0.95
    quantum_ticks: float = 2.5
    between_prior: float = 0.005
    between_prior_ticks: float = 0.75


class Launch(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    """One element of a program's launch sequence: a kernel, memcpy or memset (or, on traces without GPU
    events, an outermost working op), or a host sync call. `pos` is its place in the program's sequence."""

    pos: int
    kind: str                 # kernel, memcpy, memset, op, sync
    name: str                 # the kernel's (or op's, or call's) readable name
    category: str
    op: str = ""              # the op that launched it
    source: str = ""          # file.py:line of the launching user frame, where the trace has stacks
    us: list[float] = []      # duration in each run whose sequence is the reference one (µs)

    @property
    def key(self) -> tuple[str, str, str, str]:
        """What must be equal for two launches to be the same launch in two runs."""
        return (self.kind, self.op, self.name, self.category)


class ScopeProfile(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    launches: list[Launch] = []
    counts: dict[str, int] = {}        # per category, one run
    alloc_bytes: int = 0               # bytes allocated in the scope in one run
    peak_scratch_bytes: int = 0        # most bytes allocated in the scope and live at once, in one run


class Variant(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    """Another launch sequence than the program's reference one, and how many runs launched it: data-dependent
    dispatch the baseline shows, or in a candidate, runs to compare with the baseline one by one. Its launches
    carry no samples (only reference runs are timed)."""

    runs: int
    scopes: dict[str, ScopeProfile] = {}
    # Candidate side only (never written to a baseline file): where the first run with it issued each launch.
    issued: list[tuple[float, str]] = []    # (issue time, the finding group of its outermost op), by pos
    trace: str = ""

    def sequence(self) -> list[tuple[str, Launch]]:
        return _sequence(self.scopes)


def _sequence(scopes: dict[str, ScopeProfile]) -> list[tuple[str, Launch]]:
    found = [(label, launch) for label, scope in scopes.items() for launch in scope.launches]
    return sorted(found, key=lambda item: item[1].pos)


class ProgramProfile(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    runs: int                          # runs (profiler steps, or traces without steps) it was built from
    timing_basis: str                  # "device" (kernel durations) or "host" (op durations, no GPU events)
    scopes: dict[str, ScopeProfile] = {}
    total_us: list[float] = []         # summed duration of every launch, per reference run
    alloc_bytes: int = 0
    peak_scratch_bytes: int = 0
    traces: list[str] = []
    # Runs whose launch sequence differed from the reference (data-dependent dispatch): not timed.
    other_sequences: int = 0
    unattributed: int = 0              # device events with no launching call (not in the sequence)
    # The process (0, 1, ...: the trace it came from) of each reference run, in the order of total_us and of
    # every launch's `us`: between-process noise is measured across them. Empty: one process.
    run_process: list[int] = []
    quantum_us: float = 0.0            # the device timer's tick the durations sit on (0: none seen)
    # The other launch sequences its runs showed, most runs first (their runs are counted in other_sequences).
    variants: list[Variant] = []
    # Candidate side only (never written to a baseline file): the reference sequence's first run, where it
    # issued each launch (issue time, finding group), and its trace.
    issued: list[tuple[float, str]] = []
    issued_trace: str = ""

    @property
    def processes(self) -> int:
        return len(set(self.run_process)) or 1

    def sequence(self) -> list[tuple[str, Launch]]:
        """(scope, launch) in program order."""
        return _sequence(self.scopes)

    def for_baseline_file(self) -> ProgramProfile:
        """Without what only a candidate needs (where its launches were issued)."""
        variants = [msgspec.structs.replace(v, issued=[], trace="") for v in self.variants]
        return msgspec.structs.replace(self, issued=[], issued_trace="", variants=variants)


class Baseline(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    schema_version: int
    kernlint_version: str
    created: str                       # UTC, ISO 8601
    programs: dict[str, ProgramProfile]
    environment: dict = {}             # GPU, driver, clocks, versions where known (kernlint.baseline.environment)
    refresh_command: str = ""          # how to record this baseline again
