"""Is a kernel slower than in the baseline? Three answers: slower (or faster), the same, or unknown (with how
many more runs would decide), from a noise model that matches how GPU timings vary.

The noise model (measured on an H200: see docs/timing.md):
- **Timer ticks.** Kernel durations come in ticks of the device timer (32 ns on an H200, with 1 ns of clock
  conversion jitter). Within one process a 1.3 µs kernel often takes the same number of ticks every run, so
  its within-process spread is 0 and a one-tick shift between processes looks infinitely significant. The
  quantum is read from the durations themselves (timer_quantum), and a change smaller than `quantum-ticks`
  ticks is never a regression.
- **Between processes.** Clocks, placement and allocator state differ from process to process more than
  from run to run. A baseline recorded from several processes (`baseline record --processes N`, or several
  traces of one program) measures that spread (the robust spread of the per-process medians), and a change
  must exceed `noise-multiple` times it, as it must exceed that multiple of the within-process spread. With
  one process on each side nothing measures it: a prior takes its place (`between-prior` of the median or
  `between-prior-ticks` timer ticks, the larger; measured on an H200, docs/baselines.md), and the verdict
  says it was assumed.
- **Many launches, one check.** Every matched launch is a test; the p-values of one check's launches are
  adjusted together by the Benjamini-Hochberg step-up method (the programs' total device times are a
  family of their own: the primary question, one test a program): when nothing changed (every test null) it bounds the
  chance of any false alarm at `alpha`, so 300 launches do not give 3 false alarms at alpha 0.01; when a
  change slows many kernels a little (a clock, a shared library) it still finds them, which Holm's
  family-wise method cannot at 5 runs a side (it controls the expected share of false findings instead).
- **Two tests.** The one-sided Mann-Whitney U test (a shift of the median) and the two-sample
  Kolmogorov-Smirnov test (any change of the distribution, a wider one included), as Chromium's Pinpoint
  combines them: p = min of the two, doubled (Bonferroni for taking the smaller).

The verdict, for a shift estimate (Hodges-Lehmann: the median of the pairwise differences) with its
distribution-free confidence interval, and the smallest change that counts (`floor_us`, the largest of
`min-effect` of the median, the noise multiples, the tick floor and `min-effect-us`):
- slower / faster: adjusted p < alpha, |shift| > floor, and the interval excludes zero; also slower when the
  90th percentile moved past the floor beyond the median's own move (a wider, slower tail; a shift of the
  whole distribution, as another process gives, is the median's to judge, never the tail's);
- same: the whole interval lies within +-floor (a change that large is ruled out);
- unknown: neither; `runs_needed` is how many more candidate runs would shrink the interval enough to
  decide (the interval narrows as 1/sqrt(runs)).
"""
from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from kernlint.baseline.model import Thresholds

_MAD_TO_SIGMA = 1.4826   # MAD of a normal sample times this estimates its standard deviation
_JITTER_NS = 2           # clock-conversion jitter around a tick (seen: +-1 ns on an H200)
_MIN_DISTINCT = 12       # distinct durations needed before a quantum is believed
_MAX_MORE_RUNS = 1000    # beyond this, "unknown" says the change sits at the threshold


@dataclass(frozen=True)
class TimingVerdict:
    direction: str          # "slower", "faster", "same" or "unknown"
    base_median: float
    cand_median: float
    shift: float            # Hodges-Lehmann estimate of candidate - baseline (µs)
    ci_low: float
    ci_high: float
    p_value: float          # combined (Mann-Whitney, Kolmogorov-Smirnov), before the family-wise adjustment
    threshold: float        # the relative effect a change had to exceed (floor_us / base median)
    noise: float            # the larger robust CV of the two sides, within a process
    base_runs: int
    cand_runs: int
    p_adjusted: float = math.nan    # after Benjamini-Hochberg over the check's timings
    p_mw: float = math.nan
    p_ks: float = math.nan
    floor_us: float = 0.0           # the smallest change that counts (µs)
    quantum_us: float = 0.0         # the device timer's tick, 0 where the durations show none
    between_noise: float = 0.0      # robust CV of the per-process medians, or the prior (between_source)
    base_processes: int = 1
    cand_processes: int = 1
    runs_needed: int | None = None  # unknown: more candidate runs that would decide
    tail_shift: float = 0.0         # candidate - baseline at the 90th percentile (µs): a wider, slower tail
    tests: int = 1                  # the size of the family the p-value was adjusted over
    # Where between_noise comes from: "baseline" or "candidate" (the side with 2 or more processes that measured
    # it; the baseline's first), or "prior" (one process on each side: assumed, Thresholds.between_prior*).
    between_source: str = "baseline"
    between_prior: str = ""         # the prior in words, where between_source is "prior"
    # The per-run durations (µs) of each side, in run order, so that a reader can judge the noise by eye (the
    # HTML report's strip plot): kept as given (no copy), out of comparisons and the repr.
    base_samples: Sequence[float] = field(default=(), compare=False, repr=False)
    cand_samples: Sequence[float] = field(default=(), compare=False, repr=False)
    base_sample_process: Sequence[int] | None = field(default=None, compare=False, repr=False)
    cand_sample_process: Sequence[int] | None = field(default=None, compare=False, repr=False)

    @property
    def tail_widening(self) -> float:
        """How far the 90th percentile moved beyond the median's own move (µs): the tail rule's measure."""
        return self.tail_shift - max(self.shift, 0.0)

    @property
    def relative(self) -> float:
        return self.shift / self.base_median if self.base_median > 0 else math.inf

    def as_details(self) -> dict:
        return {"direction": self.direction, "baseline_median_us": round(self.base_median, 4),
                "candidate_median_us": round(self.cand_median, 4), "shift_us": round(self.shift, 4),
                "relative": round(self.relative, 5), "ci_low_us": round(self.ci_low, 4),
                "ci_high_us": round(self.ci_high, 4), "p_value": float(f"{self.p_value:.3g}"),
                "p_adjusted": float(f"{self.p_adjusted:.3g}") if not math.isnan(self.p_adjusted) else None,
                "family_size": self.tests, "p_mann_whitney": _rounded(self.p_mw),
                "p_kolmogorov_smirnov": _rounded(self.p_ks), "threshold": round(self.threshold, 5),
                "floor_us": round(self.floor_us, 4), "quantum_us": round(self.quantum_us, 4),
                "noise_cv": round(self.noise, 5), "between_process_cv": round(self.between_noise, 5),
                "baseline_runs": self.base_runs, "candidate_runs": self.cand_runs,
                "baseline_processes": self.base_processes, "candidate_processes": self.cand_processes,
                "runs_needed": self.runs_needed, "tail_shift_us": round(self.tail_shift, 4),
                "tail_widening_us": round(self.tail_widening, 4), "between_process_source": self.between_source,
                "between_process_prior": self.between_prior or None,
                **_runs("baseline", self.base_samples, self.base_sample_process),
                **_runs("candidate", self.cand_samples, self.cand_sample_process)}


MAX_RUNS_IN_DETAILS = 1000   # per side; more runs are thinned evenly (every k-th run), and the details say so


def _runs(side: str, samples: Sequence[float], process: Sequence[int] | None) -> dict:
    """`<side>_runs_us`: the side's per-run durations in run order (rounded to ns), and `<side>_run_process`:
    the process each came from, where there was more than one; `<side>_runs_step` > 1 where only every k-th
    run is listed."""
    values = [float(v) for v in samples]
    step = max(1, math.ceil(len(values) / MAX_RUNS_IN_DETAILS))
    out: dict = {f"{side}_runs_us": [round(v, 4) for v in values[::step]]}
    if process is not None and len(process) == len(values) and len(set(process)) > 1:
        out[f"{side}_run_process"] = [int(g) for g in list(process)[::step]]
    if step > 1:
        out[f"{side}_runs_step"] = step
    return out


def _rounded(p: float) -> float | None:
    return None if math.isnan(p) else float(f"{p:.3g}")


def robust_cv(samples: np.ndarray) -> float:
    median = float(np.median(samples))
    if median <= 0:
        return 0.0
    return _MAD_TO_SIGMA * float(np.median(np.abs(samples - median))) / median


def timer_quantum(samples: Sequence[Sequence[float]]) -> float:
    """The device timer's tick (µs) that the durations (µs, one list per launch) are multiples of, give or
    take the clock conversion's jitter: the largest tick of 8 ns or more that at least 90% of the distinct
    durations sit on. 0 when there are too few distinct durations, or they sit on no such tick (a timer of
    nanosecond resolution)."""
    values = np.unique(np.concatenate([np.round(np.asarray(s, dtype=float) * 1000).astype(np.int64)
                                       for s in samples if len(s)] or [np.zeros(0, dtype=np.int64)]))
    values = values[values > 0]
    if len(values) < _MIN_DISTINCT:
        return 0.0
    for q in range(256, 7, -1):
        off = values % q
        on_tick = np.minimum(off, q - off) <= _JITTER_NS
        if on_tick.mean() >= 0.9:
            return q / 1000.0
    return 0.0


def within_process_cv(samples: np.ndarray, groups: Sequence[int] | None) -> float:
    """The run-to-run robust CV inside a process (the median over processes), so that the spread between
    processes is not counted twice."""
    if groups is None or len(groups) != len(samples):
        return robust_cv(samples)
    labels = np.asarray(groups)
    return float(np.median([robust_cv(samples[labels == g]) for g in np.unique(labels)]))


def prior_between_cv(limits: Thresholds, median: float, quantum_us: float) -> float:
    """The between-process CV assumed where no side measured one: `between_prior` of the median or
    `between_prior_ticks` ticks of the device timer, the larger (docs/baselines.md: measured on an H200)."""
    ticks = limits.between_prior_ticks * quantum_us / median if median > 0 else 0.0
    return max(limits.between_prior, ticks)


def _prior_words(limits: Thresholds, quantum_us: float) -> str:
    ticks = (f" and {limits.between_prior_ticks:g} ticks of {quantum_us * 1000:.0f} ns" if quantum_us
             and limits.between_prior_ticks else "")
    return f"the larger of {limits.between_prior:.1%} of the median{ticks}; one process on each side"


def between_process_cv(samples: np.ndarray, groups: Sequence[int] | None) -> tuple[float, int]:
    """(robust CV of the per-process medians, processes): how much a process's typical duration moves."""
    if groups is None or len(groups) != len(samples):
        return 0.0, 1
    labels = np.asarray(groups)
    distinct = np.unique(labels)
    if len(distinct) < 2:
        return 0.0, len(distinct) or 1
    medians = np.array([np.median(samples[labels == g]) for g in distinct])
    return robust_cv(medians), len(distinct)


@functools.lru_cache(maxsize=8)
def _normal_quantile(confidence: float) -> float:
    """The two-sided normal critical value for `confidence` (one per check's thresholds: computed once, as
    scipy's ppf costs a third of a millisecond and a check compares thousands of launches)."""
    from scipy import stats  # imported here: scipy takes a while, and most commands never time anything

    return float(stats.norm.ppf(0.5 + confidence / 2))


def hodges_lehmann(base: np.ndarray, cand: np.ndarray, confidence: float) -> tuple[float, float, float]:
    """The shift estimate and its distribution-free confidence interval (Lehmann 1975; the order
    statistics of the pairwise differences that the Mann-Whitney critical value picks)."""
    diffs = np.sort(np.subtract.outer(cand, base).ravel())
    m, n = len(base), len(cand)
    z = _normal_quantile(confidence)
    k = int(math.floor(m * n / 2 - z * math.sqrt(m * n * (m + n + 1) / 12)))
    k = min(max(k, 0), len(diffs) - 1)
    return float(np.median(diffs)), float(diffs[k]), float(diffs[len(diffs) - 1 - k])


def _p_values(base: np.ndarray, cand: np.ndarray, shift: float) -> tuple[float, float, float]:
    """(combined, Mann-Whitney one-sided in the direction of the shift, Kolmogorov-Smirnov two-sided)."""
    from scipy import stats

    if len(np.unique(np.concatenate([base, cand]))) == 1:
        return 1.0, 1.0, 1.0   # every run took the same time: the tests are undefined, nothing changed
    alternative = "greater" if shift >= 0 else "less"
    p_mw = float(stats.mannwhitneyu(cand, base, alternative=alternative).pvalue)
    p_ks = float(stats.ks_2samp(cand, base).pvalue)
    return min(1.0, 2 * min(p_mw, p_ks)), p_mw, p_ks


def compare_samples(base_samples, cand_samples, limits: Thresholds, *, base_groups: Sequence[int] | None = None,
                    cand_groups: Sequence[int] | None = None, quantum_us: float = 0.0) -> TimingVerdict | None:
    """One launch's durations on both sides -> its verdict, as if it were the only test of the check (decide()
    re-decides it with the family-wise adjusted p). None when either side has fewer than `min_runs` runs.
    `base_groups` / `cand_groups`: the process of each run (None: one process)."""
    base = np.asarray(base_samples, dtype=float)
    cand = np.asarray(cand_samples, dtype=float)
    if len(base) < limits.min_runs or len(cand) < limits.min_runs:
        return None
    base_median, cand_median = float(np.median(base)), float(np.median(cand))
    shift, low, high = hodges_lehmann(base, cand, limits.confidence)
    noise = max(within_process_cv(base, base_groups), within_process_cv(cand, cand_groups))
    between, base_processes = between_process_cv(base, base_groups)
    cand_between, cand_processes = between_process_cv(cand, cand_groups)
    # The spread between processes, measured by a side with 2 or more processes (the baseline's first), else
    # unknown: the prior, never 0 (one process shows no spread, and a 0 would make another process's offset
    # look like a change).
    source, prior = "baseline", ""
    if base_processes < 2:
        if cand_processes >= 2:
            source, between = "candidate", cand_between
        else:
            source, prior = "prior", _prior_words(limits, quantum_us)
            between = prior_between_cv(limits, base_median, quantum_us)
    relative_floor = max(limits.min_effect, limits.noise_multiple * max(noise, between))
    floor_us = max(relative_floor * base_median, limits.quantum_ticks * quantum_us, limits.min_effect_us)
    p, p_mw, p_ks = _p_values(base, cand, shift)
    tail = float(np.quantile(cand, 0.9) - np.quantile(base, 0.9))
    verdict = TimingVerdict("unknown", base_median, cand_median, shift, low, high, p,
                            floor_us / base_median if base_median > 0 else math.inf, noise, len(base), len(cand),
                            p_mw=p_mw, p_ks=p_ks, floor_us=floor_us, quantum_us=quantum_us, between_noise=between,
                            base_processes=base_processes, cand_processes=cand_processes, tail_shift=tail,
                            between_source=source, between_prior=prior, base_samples=base_samples,
                            cand_samples=cand_samples, base_sample_process=base_groups,
                            cand_sample_process=cand_groups)
    return decide(verdict, p, 1, limits)


def decide(v: TimingVerdict, p_adjusted: float, tests: int, limits: Thresholds) -> TimingVerdict:
    """The three-way verdict for an adjusted p-value (module docstring)."""
    floor = v.floor_us
    runs_needed = None
    if p_adjusted < limits.alpha and v.shift > floor and v.ci_low > 0:
        direction = "slower"
    elif p_adjusted < limits.alpha and v.tail_widening > floor and v.ci_high > 0:
        # The distribution changed and its slow tail (90th percentile) moved past the floor beyond the median's
        # own move: a wider, slower tail. A shift of the whole distribution (another process's offset, a
        # shift below the floor) moves the tail as much as the median and is the median's to judge: the tail
        # of 10 runs is one or two runs, and counting the shift in it again flagged sub-floor shifts (issue 35).
        direction = "slower"
    elif p_adjusted < limits.alpha and v.shift < -floor and v.ci_high < 0:
        direction = "faster"
    elif -floor <= v.ci_low and v.ci_high <= floor:
        direction = "same"
    else:
        direction = "unknown"
        # The interval must shrink to the distance between the estimate and the nearer edge of a decision
        # (the floor, to rule a change out; zero, to show one): half-widths narrow as 1/sqrt(runs).
        half = max(v.ci_high - v.ci_low, 0.0) / 2
        margin = abs(floor - abs(v.shift)) if abs(v.shift) <= floor else abs(v.shift)
        if half <= 0 or margin <= 0:
            runs_needed = _MAX_MORE_RUNS
        else:
            total = math.ceil(v.cand_runs * (half / margin) ** 2)
            runs_needed = int(min(max(total - v.cand_runs, 1), _MAX_MORE_RUNS))
    return replace(v, direction=direction, p_adjusted=p_adjusted, tests=tests, runs_needed=runs_needed)


def benjamini_hochberg(p_values: Sequence[float]) -> list[float]:
    """Benjamini-Hochberg adjusted p-values (q-values), in the order given."""
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i], reverse=True)
    adjusted = [1.0] * m
    running = 1.0
    for k, i in enumerate(order):   # from the largest p down: rank m - k
        running = min(running, p_values[i] * m / (m - k))
        adjusted[i] = min(1.0, running)
    return adjusted


def adjust_family(verdicts: Sequence[TimingVerdict], limits: Thresholds) -> list[TimingVerdict]:
    """Every timing test of one check, re-decided with Benjamini-Hochberg adjusted p-values."""
    adjusted = benjamini_hochberg([v.p_value for v in verdicts])
    return [decide(v, p, len(verdicts), limits) for v, p in zip(verdicts, adjusted, strict=True)]
