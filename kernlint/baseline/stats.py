"""Is a kernel slower than in the baseline? A two-sample test over repeated runs, gated by an effect size
scaled to the kernel's own run-to-run noise.

A timing change is reported only when all of these hold:
- both sides have at least `min_runs` runs (never from one run);
- the one-sided Mann-Whitney U test (as asv uses) gives p < `alpha`;
- the Hodges-Lehmann shift (the median of all pairwise differences) exceeds `min_effect` of the baseline
  median, `noise_multiple` times the larger robust coefficient of variation of the two sides, and
  `min_effect_us` in absolute terms;
- its distribution-free confidence interval excludes zero.
Small kernels are noisy (on an H200 a 10 µs kernel varies by up to 3% run to run, a 200 µs one by 0.3%), so a
fixed percentage would either cry wolf on the small ones or miss regressions on the large ones.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from kernlint.baseline.model import Thresholds

_MAD_TO_SIGMA = 1.4826   # MAD of a normal sample times this estimates its standard deviation


@dataclass(frozen=True)
class TimingVerdict:
    direction: str          # "slower", "faster" or "same"
    base_median: float
    cand_median: float
    shift: float            # Hodges-Lehmann estimate of candidate - baseline (µs)
    ci_low: float
    ci_high: float
    p_value: float          # one-sided, in the direction of the shift
    threshold: float        # the relative effect a change had to exceed
    noise: float            # the larger robust CV of the two sides
    base_runs: int
    cand_runs: int

    @property
    def relative(self) -> float:
        return self.shift / self.base_median if self.base_median > 0 else math.inf

    def as_details(self) -> dict:
        return {"direction": self.direction, "baseline_median_us": round(self.base_median, 4),
                "candidate_median_us": round(self.cand_median, 4), "shift_us": round(self.shift, 4),
                "relative": round(self.relative, 5), "ci_low_us": round(self.ci_low, 4),
                "ci_high_us": round(self.ci_high, 4), "p_value": float(f"{self.p_value:.3g}"),
                "threshold": round(self.threshold, 5), "noise_cv": round(self.noise, 5),
                "baseline_runs": self.base_runs, "candidate_runs": self.cand_runs}


def robust_cv(samples: np.ndarray) -> float:
    median = float(np.median(samples))
    if median <= 0:
        return 0.0
    return _MAD_TO_SIGMA * float(np.median(np.abs(samples - median))) / median


def hodges_lehmann(base: np.ndarray, cand: np.ndarray, confidence: float) -> tuple[float, float, float]:
    """The shift estimate and its distribution-free confidence interval (Lehmann 1975; the order
    statistics of the pairwise differences that the Mann-Whitney critical value picks)."""
    from scipy import stats  # imported here: scipy takes a while, and most commands never time anything

    diffs = np.sort(np.subtract.outer(cand, base).ravel())
    m, n = len(base), len(cand)
    z = stats.norm.ppf(0.5 + confidence / 2)
    k = int(math.floor(m * n / 2 - z * math.sqrt(m * n * (m + n + 1) / 12)))
    k = min(max(k, 0), len(diffs) - 1)
    return float(np.median(diffs)), float(diffs[k]), float(diffs[len(diffs) - 1 - k])


def compare_samples(base_samples, cand_samples, limits: Thresholds) -> TimingVerdict | None:
    """None when either side has fewer than `min_runs` runs."""
    base = np.asarray(base_samples, dtype=float)
    cand = np.asarray(cand_samples, dtype=float)
    if len(base) < limits.min_runs or len(cand) < limits.min_runs:
        return None
    base_median, cand_median = float(np.median(base)), float(np.median(cand))
    shift, low, high = hodges_lehmann(base, cand, limits.confidence)
    noise = max(robust_cv(base), robust_cv(cand))
    threshold = max(limits.min_effect, limits.noise_multiple * noise)
    from scipy import stats

    if np.array_equal(np.unique(base), np.unique(cand)) and len(np.unique(base)) == 1:
        p = 1.0   # identical constant samples: scipy's test is undefined there
    else:
        alternative = "greater" if shift >= 0 else "less"
        p = float(stats.mannwhitneyu(cand, base, alternative=alternative).pvalue)
    relative = shift / base_median if base_median > 0 else math.inf
    big_enough = abs(relative) > threshold and abs(shift) >= limits.min_effect_us
    direction = "same"
    if p < limits.alpha and big_enough:
        if shift > 0 and low > 0:
            direction = "slower"
        elif shift < 0 and high < 0:
            direction = "faster"
    return TimingVerdict(direction, base_median, cand_median, shift, low, high, p, threshold, noise,
                         len(base), len(cand))
