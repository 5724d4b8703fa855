"""Change points over a history of baselines: the slow drift and the step that every two-sample PR check passes.

A history is baselines in commit order (one per merged change, say). Each launch of each program is a
series: its median duration in each baseline that has it (matched by program, scope, position and launch
key), plus each program's total device time. Each series is cut by E-divisive means (Matteson and James
2014, as MongoDB's and Apache Otava's performance CI use it): binary segmentation at the split that
maximizes the energy statistic, accepted only when the medians on both sides differ by at least the smallest
change that counts (`min_effect` of the median and `quantum_ticks` timer ticks) and a test gives p < `alpha`.
The first baseline after each accepted split is named.

The test (issue 35). A permutation test (E-divisive's own) is exact under exchangeability, but its p can go
no lower than 2 / C(n, tau): the orderings that put the same values on each side of the split give the same
statistic. For 8 baselines split 4 | 4 that is 2/70 = 0.029, so no number of permutations finds the
clearest step at alpha 0.01; at alpha 0.01 a segment needs 11 values before the smallest p of its most even
split is below alpha / 2. So:
- a segment of that many values or more: the permutation test, with enough permutations for the alpha asked
  (20 / alpha: p in steps of alpha / 20; at least 199), drawn in chunks and stopped as soon as p can no
  longer fall below alpha;
- a shorter one: Student's t-test of the values on the two sides (as Hunter, now Apache Otava, tests its
  E-divisive splits: it reaches small p with few values), Bonferroni-adjusted over the segment's n - 3
  splits (the split was chosen among them). It assumes normal noise of the per-baseline medians; the
  history's notes say which series that applied to.
Seeded: the same history gives the same change points.

Incremental: with a cache, a series whose values are the cached ones plus appended baselines keeps the
change points before its last one and is searched again only from there (as Otava re-analyses the tail).
The cache is input, never trusted (issue 38): read_cache takes only a regular file of at most
MAX_CACHE_BYTES, decoded by msgspec against its schema (every number in range, no NaN); it names the
digest of each baseline it was computed from and a digest of its own content. One that is malformed, of
another version, edited (its content digest differs) or computed from other baselines (its inputs are not
the first of these) is not used: the history is searched again and the CLI says why in one warning line.
The digests are not a signature: whoever can write the file can forge them, as they could the baselines.

Why not a library: MongoDB's signal-processing-algorithms pins Python < 3.12, numpy < 2 and
setuptools < 71; Apache Otava pins numpy 2.2.0 and pulls BigQuery, Postgres and Slack clients. The
statistic is a few lines of numpy over the series' distance matrix.
"""
from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Annotated, Literal

import msgspec
import numpy as np

from kernlint.baseline.compare import TOTAL
from kernlint.baseline.model import Baseline
from kernlint.errors import ConfigError, KernlintError, shorten
from kernlint.fileio import FileTooLargeError, NotRegularFileError, read_regular

# 2: the cache names its inputs (a digest per baseline) and a digest of its own content (issue 38).
CACHE_VERSION = 2
# A cache larger than this is not read (a real one holds ~100 bytes a series: 64 MiB is 600,000 series).
MAX_CACHE_BYTES = 64 << 20
PERMUTATION, T_TEST = "permutation", "t-test"   # the test that accepted a change point
_MIN_VALUES = 4              # a split needs 2 values on each side
_STEPS_PER_ALPHA = 20        # permutations_for: the Monte Carlo p in steps of alpha / 20
_CHUNK = 500                 # permutations drawn at once (then: can p still fall below alpha?)
_MAX_GATHERED = 4_000_000    # ... and at most this many distances gathered at once (chunk x n x n)
# What cached change points were found with: a cache of other settings (or of the 199-permutation test before
# issue 35: no settings) is searched again, not reused.
_METHOD = 2


@dataclass(frozen=True)
class ChangePoint:
    series: str              # "program / scope / launch" or "program / total device time"
    index: int               # the first baseline after the change (0-based in the history)
    baseline: str            # its name
    before_us: float         # median of the series' values before (since the previous change point)
    after_us: float          # ... and after (until the next)
    p_value: float
    test: str = PERMUTATION  # what gave p: "permutation", or "t-test" for a segment too short for it

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
    cache_ignored: str = ""  # why a cache given was not used ("" when it was, or none was given)


class HistoryCacheError(KernlintError):
    """A history cache that cannot be used (malformed, too large, another version): the history is searched
    again without it. Not a regular file (a FIFO, a device) is a ConfigError instead: nothing is replaced."""


_Index = Annotated[int, msgspec.Meta(ge=0, le=1 << 40)]
_P = Annotated[float, msgspec.Meta(ge=0.0, le=1.0)]
_Digest = Annotated[str, msgspec.Meta(pattern="^[0-9a-f]{16,64}$")]


class _CachedSeries(msgspec.Struct, forbid_unknown_fields=True):
    n: _Index                                                     # values of the series the changes were found in
    digest: _Digest                                               # _digest of those values
    changes: list[tuple[_Index, _P, Literal["permutation", "t-test"]]]   # (index, p, test), in order


class _Settings(msgspec.Struct, forbid_unknown_fields=True):
    method: Annotated[int, msgspec.Meta(ge=0, le=1 << 20)]
    alpha: Annotated[float, msgspec.Meta(gt=0.0, lt=1.0)]
    permutations: Annotated[int, msgspec.Meta(ge=1, le=1 << 40)]
    min_relative: Annotated[float, msgspec.Meta(ge=0.0, le=1e9)]
    min_us: Annotated[float, msgspec.Meta(ge=0.0, le=1e15)]


class _Version(msgspec.Struct):
    version: object = None


class HistoryCache(msgspec.Struct, forbid_unknown_fields=True):
    """What --cache holds (schema version CACHE_VERSION)."""

    version: Literal[2]
    inputs: list[_Digest]                  # input_digest of each baseline the cache was computed from, in order
    settings: _Settings
    series: dict[str, _CachedSeries]
    digest: _Digest                        # _content_digest of the rest


def input_digest(baseline: Baseline) -> str:
    """A baseline's content, as the cache names its inputs."""
    return hashlib.sha256(msgspec.json.encode(baseline, order="sorted")).hexdigest()[:32]


def _content_digest(cache: HistoryCache) -> str:
    body = {"version": cache.version, "inputs": cache.inputs, "settings": cache.settings, "series": cache.series}
    return hashlib.sha256(msgspec.json.encode(body, order="sorted")).hexdigest()[:32]


def read_cache(path: str | Path) -> HistoryCache | None:
    """The cache at `path`, None when there is none yet. HistoryCacheError when it is malformed (the caller
    searches again without it); ConfigError when it is not a regular file (a FIFO is never opened for
    reading, so never waited on)."""
    path = Path(path)
    try:
        data = read_regular(path, MAX_CACHE_BYTES)
    except FileNotFoundError:
        return None
    except NotRegularFileError as exc:
        raise ConfigError(path, "is a folder: give --cache a file path" if exc.is_folder else
                          f"not a regular file ({exc.kind}): give --cache a file path") from None
    except FileTooLargeError:
        raise HistoryCacheError(path, f"larger than {MAX_CACHE_BYTES >> 20} MiB: not a kernlint history "
                                      "cache") from None
    except OSError as exc:
        raise HistoryCacheError(path, f"cannot read the history cache: {exc.strerror or exc}") from None
    return decode_cache(data, path)


def decode_cache(data: bytes | dict, path: str | Path | None = None) -> HistoryCache:
    """A cache from its JSON bytes (or the dict that analyse returned), checked against the schema: a
    HistoryCacheError naming what is wrong otherwise."""
    try:
        version = (msgspec.json.decode(data, type=_Version) if isinstance(data, bytes)
                   else msgspec.convert(data, _Version)).version
        if version != CACHE_VERSION:
            raise HistoryCacheError(path, f"history cache of version {shorten(repr(version), 40)} (this kernlint "
                                          f"writes {CACHE_VERSION})")
        if isinstance(data, bytes):
            return msgspec.json.decode(data, type=HistoryCache)
        return msgspec.convert(data, HistoryCache)
    except msgspec.ValidationError as exc:
        raise HistoryCacheError(path, f"not a kernlint history cache ({shorten(str(exc), 200)})") from None
    except msgspec.DecodeError as exc:
        raise HistoryCacheError(path, f"not a kernlint history cache (not JSON: {shorten(str(exc), 200)})") from None
    except RecursionError:
        raise HistoryCacheError(path, "not a kernlint history cache: its JSON nests too deeply to read") from None


def _unusable(cache: HistoryCache, inputs: list[str], names: Sequence[str]) -> str:
    """Why the cache cannot be reused for these inputs ("" when it can): its content was edited, or it was
    computed from other baselines than the first of these, or a cached change point lies outside its series."""
    if cache.digest != _content_digest(cache):
        return "its content digest does not match (edited or damaged)"
    if len(cache.inputs) > len(inputs):
        return f"computed from {len(cache.inputs)} baselines, more than the {len(inputs)} given"
    for i, (was, now) in enumerate(zip(cache.inputs, inputs, strict=False)):
        if was != now:
            return f"computed from other baselines ({shorten(names[i], 200)}, #{i + 1}, differs)"
    for label, entry in cache.series.items():
        indexes = [c[0] for c in entry.changes]
        if entry.n > len(cache.inputs) or any(not 2 <= i <= entry.n - 2 for i in indexes) \
                or indexes != sorted(set(indexes)):
            return f"series {shorten(label, 200)}: change points that cannot be in {entry.n} values"
    return ""


def permutations_for(alpha: float) -> int:
    """Permutations enough for `alpha`: the Monte Carlo p moves in steps of alpha / 20 (199 at least)."""
    return max(199, math.ceil(_STEPS_PER_ALPHA / alpha) - 1)


def smallest_permutation_p(n: int, tau: int) -> float:
    """The smallest p a permutation test of a split of n values at tau can give: 2 / C(n, tau)."""
    return min(1.0, 2 / math.comb(n, tau))


def permutation_length(alpha: float) -> int:
    """The fewest values a segment needs for the permutation test: the smallest p of its most even split is
    below alpha / 2. Shorter segments are tested by Student's t."""
    n = _MIN_VALUES
    while smallest_permutation_p(n, n // 2) > alpha / 2:
        n += 1
    return n


def _energies(d: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(split, statistic) maximizing E-divisive's Q, for each of a stack of distance matrices `d` (b x n x n):
    Q(tau) = m k / n (2 mean|between| - mean|within left| - mean|within right|), m = tau, k = n - tau, at
    least 2 values a side, from the matrices' 2-D prefix sums."""
    n = d.shape[-1]
    prefix = d.cumsum(axis=1).cumsum(axis=2)
    tau = np.arange(2, n - 1)
    left = prefix[:, tau - 1, tau - 1]                 # sum over the pairs left of the split
    rows = prefix[:, tau - 1, n - 1]                   # ... over the left values against all
    between = rows - left
    right = prefix[:, n - 1, n - 1][:, None] + left - 2 * rows
    m, k = tau.astype(float), (n - tau).astype(float)
    q = m * k / n * (2 * between / (m * k) - left / (m * (m - 1)) - right / (k * (k - 1)))
    best = np.argmax(q, axis=1)
    return tau[best], q[np.arange(len(q)), best]


def _permutation_p(d: np.ndarray, q: float, alpha: float, permutations: int, rng: np.random.Generator) -> float:
    """(exceedances + 1) / (permutations + 1), the permutations drawn in chunks; stopped as soon as p can no
    longer fall below `alpha` (then the p of the permutations drawn so far, which is >= alpha)."""
    n = len(d)
    chunk = max(1, min(_CHUNK, _MAX_GATHERED // (n * n)))
    threshold = q * (1 - 1e-9)    # the same split of the same values, summed in another order, ties
    exceed = done = 0
    while done < permutations:
        size = min(chunk, permutations - done)
        order = np.argsort(rng.random((size, n)), axis=1)
        exceed += int((_energies(d[order[:, :, None], order[:, None, :]])[1] >= threshold).sum())
        done += size
        if exceed + 1 >= alpha * (permutations + 1):
            return (exceed + 1) / (done + 1)
    return (exceed + 1) / (permutations + 1)


def _t_test_p(left: np.ndarray, right: np.ndarray, splits: int) -> float:
    """Student's two-sided t-test of the two sides' means, Bonferroni-adjusted over `splits` candidate splits.
    Every value equal within each side: 0 when the sides differ (the effect floor decided that), else 1."""
    from scipy import stats  # imported here: scipy takes a while

    m, k = len(left), len(right)
    diff = float(np.mean(right) - np.mean(left))
    squares = float(((left - left.mean()) ** 2).sum() + ((right - right.mean()) ** 2).sum())
    if squares <= 0:
        return 0.0 if diff != 0 else 1.0
    error = math.sqrt(squares / (m + k - 2) * (1 / m + 1 / k))
    return min(1.0, 2 * float(stats.t.sf(abs(diff) / error, m + k - 2)) * splits)


def _split(values: np.ndarray, alpha: float, permutations: int, min_relative: float, min_us: float,
           rng: np.random.Generator) -> tuple[int, float, str]:
    """(split, p, test) of the best split of one segment; split -1 when the segment is too short or the
    medians on its two sides differ by less than the smallest change that counts."""
    n = len(values)
    if n < _MIN_VALUES:
        return -1, 1.0, ""
    d = np.abs(np.subtract.outer(values, values))
    taus, qs = _energies(d[None])
    tau, q = int(taus[0]), float(qs[0])
    before, after = float(np.median(values[:tau])), float(np.median(values[tau:]))
    if abs(after - before) < max(min_relative * abs(before), min_us):
        return -1, 1.0, ""   # a real but negligible difference (or none): not a change worth naming
    if n >= permutation_length(alpha):
        return tau, _permutation_p(d, q, alpha, permutations, rng), PERMUTATION
    return tau, _t_test_p(values[:tau], values[tau:], n - 3), T_TEST


def _search(values: Sequence[float], *, alpha: float, permutations: int | None, min_relative: float,
            min_us: float, seed: int, start: int) -> list[tuple[int, float, str]]:
    """(index, p, test) of each change in `values` from `start` on (binary segmentation)."""
    rng = np.random.default_rng(seed)
    permutations = permutations or permutations_for(alpha)
    x = np.asarray(values, dtype=float)
    found: list[tuple[int, float, str]] = []
    segments = [(start, len(x))]
    while segments:
        a, b = segments.pop()
        tau, p, test = _split(x[a:b], alpha, permutations, min_relative, min_us, rng)
        if tau < 0 or p >= alpha:
            continue
        found.append((a + tau, p, test))
        segments += [(a, a + tau), (a + tau, b)]
    return sorted(found)


def change_points(values: Sequence[float], *, alpha: float = 0.01, permutations: int | None = None,
                  min_relative: float = 0.005, min_us: float = 0.0, seed: int = 0,
                  start: int = 0) -> list[tuple[int, float]]:
    """(index, p) of each change in `values` from `start` on (earlier indexes are taken as decided).
    `permutations`: None for enough for `alpha` (permutations_for)."""
    return [(i, p) for i, p, _ in _search(values, alpha=alpha, permutations=permutations,
                                          min_relative=min_relative, min_us=min_us, seed=seed, start=start)]


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


def analyse(baselines: Sequence[Baseline], names: Sequence[str], *, alpha: float = 0.01,
            permutations: int | None = None, min_relative: float = 0.005, quantum_ticks: float = 2.5,
            cache: HistoryCache | dict | None = None) -> tuple[History, dict]:
    """The history's change points, and the cache to keep for the next (appended) history. `permutations`:
    None for enough for `alpha` (permutations_for). `cache`: what read_cache read, or the dict an earlier
    analyse returned; one that cannot be used is not (History.cache_ignored says why)."""
    history = History(baselines=list(names), series=0)
    permutations = permutations or permutations_for(alpha)
    quantum = max((p.quantum_us for b in baselines for p in b.programs.values()), default=0.0)
    settings = {"method": _METHOD, "alpha": float(alpha), "permutations": int(permutations),
                "min_relative": float(min_relative), "min_us": float(quantum_ticks * quantum)}
    inputs = [input_digest(b) for b in baselines]
    old: dict[str, _CachedSeries] = {}
    if cache is not None:
        try:
            checked = cache if isinstance(cache, HistoryCache) else decode_cache(cache)
            history.cache_ignored = _unusable(checked, inputs, names)
        except HistoryCacheError as exc:
            checked, history.cache_ignored = None, exc.problem
        if checked is not None and not history.cache_ignored \
                and msgspec.structs.asdict(checked.settings) == settings:   # other settings: searched again
            old = checked.series
    kept: dict = {}
    too_few: list[str] = []
    short: list[int] = []
    for label, raw in sorted(_series(baselines).items()):
        present = [(i, v) for i, v in enumerate(raw) if v is not None]
        if len(present) < _MIN_VALUES:
            too_few.append(label)
            continue
        history.series += 1
        index = [i for i, _ in present]
        values = [v for _, v in present]
        if len(values) < permutation_length(alpha):
            short.append(len(values))
        start, known = 0, []
        prior = old.get(label)
        if prior and prior.n <= len(values) and prior.digest == _digest(values[:prior.n]):
            known = [tuple(c) for c in prior.changes]
            start = known[-1][0] if known else 0   # the appended values can only cut the last segment
            history.reused += 1
        found = known + _search(values, alpha=alpha, permutations=permutations, min_relative=min_relative,
                                min_us=quantum_ticks * quantum, seed=0, start=start)
        found = sorted(set(found))
        kept[label] = {"n": len(values), "digest": _digest(values), "changes": [list(c) for c in found]}
        cuts = [0] + [c for c, _, _ in found] + [len(values)]
        for k, (c, p, test) in enumerate(found):
            before = float(np.median(values[cuts[k]:c]))
            after = float(np.median(values[c:cuts[k + 2]]))
            history.change_points.append(ChangePoint(label, index[c], names[index[c]], round(before, 4),
                                                     round(after, 4), p, test))
    history.change_points.sort(key=lambda c: (c.index, c.series))
    history.notes = _notes(alpha, short, too_few)
    made = HistoryCache(version=CACHE_VERSION, inputs=inputs, settings=_Settings(**settings),
                        series={k: _CachedSeries(**v) for k, v in kept.items()}, digest="0" * 16)
    made.digest = _content_digest(made)
    return history, msgspec.to_builtins(made)


def _notes(alpha: float, short: list[int], too_few: list[str]) -> list[str]:
    """What the history could not test as asked: series too short for the permutation test to reach alpha
    (tested by Student's t instead), and series in too few baselines to be cut at all."""
    notes = []
    if short:
        n = min(short)
        notes.append(f"{len(short)} series of {n}{'' if max(short) == n else f'-{max(short)}'} baselines: too short "
                     f"for the permutation test to reach alpha {alpha:g} (the smallest p it can give {n} baselines "
                     f"is {smallest_permutation_p(n, n // 2):.2g}; it needs {permutation_length(alpha)}); their "
                     f"splits were tested by Student's t on the per-baseline medians (Bonferroni over the splits), "
                     f"which assumes normal noise")
    if too_few:
        shown = ", ".join(too_few[:3]) + (f" and {len(too_few) - 3} more" if len(too_few) > 3 else "")
        notes.append(f"{len(too_few)} series in fewer than {_MIN_VALUES} baselines, too short to cut (a change needs "
                     f"2 baselines on each side): not searched ({shown})")
    return notes


def as_dict(history: History) -> dict:
    return {"schema_version": 1, "baselines": history.baselines, "series": history.series,
            "reused_from_cache": history.reused,
            "change_points": [{**asdict(c), "relative": round(c.relative, 5)} for c in history.change_points],
            "notes": history.notes}
