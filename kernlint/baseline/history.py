"""Change points over a history of baselines: the slow drift and the step that every two-sample PR check passes.

A history is baselines in commit order (one per merged change, say). Each launch of each program is a
series: its median duration in each baseline that has it (matched by program, scope, position and launch
key), plus each program's total device time. Each series is cut by E-divisive means (Matteson and James
2014, as MongoDB's and Apache Otava's performance CI use it): binary segmentation at the split that
maximizes the energy statistic, accepted only when a permutation test gives p < `alpha` and the medians
on both sides differ by at least the smallest change that counts (`min_effect` of the median and
`quantum_ticks` timer ticks). The first baseline after each accepted split is named.

Incremental: with a cache, a series whose values are the cached ones plus appended baselines keeps the
change points before its last one and is searched again only from there (as Otava re-analyses the tail).

Why not a library: MongoDB's signal-processing-algorithms pins Python < 3.12, numpy < 2 and
setuptools < 71; Apache Otava pins numpy 2.2.0 and pulls BigQuery, Postgres and Slack clients. The
statistic is a few lines of numpy over the series' distance matrix.
"""
from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

import numpy as np

from kernlint.baseline.compare import TOTAL
from kernlint.baseline.model import Baseline

CACHE_VERSION = 1


@dataclass(frozen=True)
class ChangePoint:
    series: str              # "program / scope / launch" or "program / total device time"
    index: int               # the first baseline after the change (0-based in the history)
    baseline: str            # its name
    before_us: float         # median of the series' values before (since the previous change point)
    after_us: float          # ... and after (until the next)
    p_value: float

    @property
    def relative(self) -> float:
        return (self.after_us - self.before_us) / self.before_us if self.before_us > 0 else float("inf")


@dataclass
class History:
    baselines: list[str]
    series: int
    change_points: list[ChangePoint] = field(default_factory=list)
    reused: int = 0          # series taken from the cache unchanged or only searched in their tail
    notes: list[str] = field(default_factory=list)


def _energy(d: np.ndarray) -> tuple[int, float]:
    """(split, statistic) maximizing E-divisive's Q over a segment's distance matrix `d` (n x n)."""
    n = len(d)
    best, best_q = -1, -np.inf
    for tau in range(2, n - 1):   # at least 2 values on each side
        m, k = tau, n - tau
        between = d[:tau, tau:].mean()
        within_a = d[:tau, :tau].sum() / (m * (m - 1))
        within_b = d[tau:, tau:].sum() / (k * (k - 1))
        q = m * k / (m + k) * (2 * between - within_a - within_b)
        if q > best_q:
            best, best_q = tau, q
    return best, best_q


def _split(values: np.ndarray, permutations: int, rng: np.random.Generator) -> tuple[int, float]:
    """(split, p) of the best split of one segment; split -1 when the segment is too short."""
    if len(values) < 4:
        return -1, 1.0
    d = np.abs(np.subtract.outer(values, values))
    tau, q = _energy(d)
    exceed = 0
    for _ in range(permutations):
        order = rng.permutation(len(values))
        if _energy(d[np.ix_(order, order)])[1] >= q:
            exceed += 1
    return tau, (exceed + 1) / (permutations + 1)


def change_points(values: Sequence[float], *, alpha: float = 0.01, permutations: int = 199,
                  min_relative: float = 0.005, min_us: float = 0.0, seed: int = 0,
                  start: int = 0) -> list[tuple[int, float]]:
    """(index, p) of each change in `values` from `start` on (earlier indexes are taken as decided)."""
    rng = np.random.default_rng(seed)
    x = np.asarray(values, dtype=float)
    found: list[tuple[int, float]] = []
    segments = [(start, len(x))]
    while segments:
        a, b = segments.pop()
        tau, p = _split(x[a:b], permutations, rng)
        if tau < 0 or p >= alpha:
            continue
        before, after = float(np.median(x[a:a + tau])), float(np.median(x[a + tau:b]))
        if abs(after - before) < max(min_relative * abs(before), min_us):
            continue   # a real but negligible difference: not a change worth naming
        found.append((a + tau, p))
        segments += [(a, a + tau), (a + tau, b)]
    return sorted(found)


def _series(baselines: Sequence[Baseline]) -> dict[str, list[float | None]]:
    """Each launch's (and each program's total) median per baseline; None where a baseline lacks it."""
    out: dict[str, list[float | None]] = {}
    for i, baseline in enumerate(baselines):
        for name, program in baseline.programs.items():
            seen: dict[tuple, int] = {}
            for scope, launch in program.sequence():
                if not launch.us:
                    continue
                key = (scope, launch.kind, launch.op, launch.name)
                seen[key] = seen.get(key, 0) + 1
                label = f"{name} / {scope} / {launch.name}" + (f" #{seen[key]}" if seen[key] > 1 else "")
                out.setdefault(label, [None] * len(baselines))[i] = float(np.median(launch.us))
            if program.total_us:
                out.setdefault(f"{name} / {TOTAL}", [None] * len(baselines))[i] = float(np.median(program.total_us))
    return out


def _digest(values: Sequence[float]) -> str:
    return hashlib.sha256(json.dumps([round(v, 6) for v in values]).encode()).hexdigest()[:16]


def analyse(baselines: Sequence[Baseline], names: Sequence[str], *, alpha: float = 0.01, permutations: int = 199,
            min_relative: float = 0.005, quantum_ticks: float = 2.5, cache: dict | None = None) -> tuple[History, dict]:
    """The history's change points, and the cache to keep for the next (appended) history."""
    history = History(baselines=list(names), series=0)
    quantum = max((p.quantum_us for b in baselines for p in b.programs.values()), default=0.0)
    old = (cache or {}).get("series", {}) if (cache or {}).get("version") == CACHE_VERSION else {}
    kept: dict = {}
    for label, raw in sorted(_series(baselines).items()):
        present = [(i, v) for i, v in enumerate(raw) if v is not None]
        if len(present) < 4:
            continue
        history.series += 1
        index = [i for i, _ in present]
        values = [v for _, v in present]
        start, known = 0, []
        prior = old.get(label)
        if prior and prior["n"] <= len(values) and prior["digest"] == _digest(values[:prior["n"]]):
            known = [tuple(c) for c in prior["changes"]]
            start = known[-1][0] if known else 0   # the appended values can only cut the last segment
            history.reused += 1
        found = known + change_points(values, alpha=alpha, permutations=permutations, min_relative=min_relative,
                                      min_us=quantum_ticks * quantum, start=start)
        found = sorted(set(found))
        kept[label] = {"n": len(values), "digest": _digest(values), "changes": [list(c) for c in found]}
        cuts = [0] + [c for c, _ in found] + [len(values)]
        for k, (c, p) in enumerate(found):
            before = float(np.median(values[cuts[k]:c]))
            after = float(np.median(values[c:cuts[k + 2]]))
            history.change_points.append(ChangePoint(label, index[c], names[index[c]], round(before, 4),
                                                     round(after, 4), p))
    history.change_points.sort(key=lambda c: (c.index, c.series))
    return history, {"version": CACHE_VERSION, "series": kept}


def as_dict(history: History) -> dict:
    return {"schema_version": 1, "baselines": history.baselines, "series": history.series,
            "reused_from_cache": history.reused,
            "change_points": [{**asdict(c), "relative": round(c.relative, 5)} for c in history.change_points]}
