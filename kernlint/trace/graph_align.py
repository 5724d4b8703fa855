"""Aligning a CUDA-graph replay's device events with a capture's launches (kernlint.trace.graphs, .pairing).

A capture recorded M launches, in issue order; a replay ran N device events, in the order they ran. They are
the same graph when the sequences fit one to one (`exact`), when they do after reordering (a graph of
several streams), or when they fit up to a few launches added or missing (`aligned`: xDiT's capture traces
hold one GEMM more than their replays). A launch fits a device event when it is the same kind of device
work (kernel, memcpy, memset) and, where the launch names its kernel (ROCm's `kernel` argument), the same
kernel; where only the launching op says what it is, a kernel of a compatible category (a fill op launches a
fill kernel; a GEMM op a GEMM kernel). That is a predicate, not an equality: the alignment is the longest
common subsequence under it.

Cost: the sequences are coded once as integer arrays (`LaunchTokens`, `KernelTokens`), so that whether the
launches fit the events along a whole diagonal of the edit grid is one numpy expression. The alignment is
Myers' O(ND) greedy algorithm with edits bounded by `max_edits` (default: a tenth of the longer sequence,
at least 4, at most 64): at most (max_edits + 1)^2 / 2 diagonal steps in Python, each snake (a run of fitting
pairs) one look-up in that diagonal's precomputed run lengths. A pair that needs more edits is not aligned.
Thousands of kernels against tens of captures cost milliseconds; replays of one graph share a cache key.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kernlint.trace import names

KIND_CODES = {"kernel": 0, "memcpy": 1, "memset": 2}
_CATEGORY_BIT = {c: 1 << i for i, c in enumerate(names.DEVICE_CATEGORIES)}
# Launching-op categories precise enough to check a kernel against (the kernel categories they may launch);
# other ops (views, custom ops, "other") fit any kernel.
CHECKED_OP_CATEGORIES = {"fill": ("fill", "memset"), "gemm": ("gemm",), "quant": ("quant",),
                         "reduce": ("reduce",), "rng": ("rng",), "comm": ("comm",)}
_ALLOWED_MASK = {op: sum(_CATEGORY_BIT[c] for c in cats) for op, cats in CHECKED_OP_CATEGORIES.items()}
MAX_EDITS_CAP = 64


def category_bit(category: str) -> int:
    return _CATEGORY_BIT.get(category, 0)


def allowed_mask(op_category: str | None) -> int:
    """The kernel categories a launch under an op of this category may run, as a bit mask; 0: any."""
    return _ALLOWED_MASK.get(op_category, 0) if op_category else 0


def launch_kind(runtime_name: str) -> str:
    if "Memset" in runtime_name:
        return "memset"
    if "Memcpy" in runtime_name:
        return "memcpy"
    return "kernel"


class Vocabulary:
    """Kernel names as integer codes, shared by the launches and the device events compared."""

    def __init__(self) -> None:
        self._codes: dict[str, int] = {}

    def code(self, name: str) -> int:
        found = self._codes.get(name)
        if found is None:
            found = self._codes[name] = len(self._codes)
        return found


@dataclass(frozen=True)
class LaunchTokens:
    """A capture's launches: kind code, kernel name code (-1: the launch does not name it), allowed kernel
    categories (bit mask; 0: any)."""

    kind: np.ndarray
    kernel: np.ndarray
    allowed: np.ndarray

    def __len__(self) -> int:
        return len(self.kind)

    @classmethod
    def make(cls, kinds: list[str], kernels: list[str], op_categories: list[str | None],
             vocab: Vocabulary) -> LaunchTokens:
        return cls(np.array([KIND_CODES.get(k, 0) for k in kinds], dtype=np.int8),
                   np.array([vocab.code(k) if k else -1 for k in kernels], dtype=np.int64),
                   np.array([allowed_mask(c) for c in op_categories], dtype=np.int64))


@dataclass(frozen=True)
class KernelTokens:
    """A replay's device events: kind code, name code, category bit."""

    kind: np.ndarray
    name: np.ndarray
    category: np.ndarray

    def __len__(self) -> int:
        return len(self.kind)

    @classmethod
    def make(cls, kinds: list[str], kernel_names: list[str], categories: list[str], vocab: Vocabulary) -> KernelTokens:
        return cls(np.array([KIND_CODES.get(k, 0) for k in kinds], dtype=np.int8),
                   np.array([vocab.code(n) for n in kernel_names], dtype=np.int64),
                   np.array([category_bit(c) for c in categories], dtype=np.int64))

    def key(self) -> bytes:
        """Equal for replays of one graph: the cache key of their alignments."""
        return self.kind.tobytes() + self.name.tobytes() + self.category.tobytes()


def fits(a: LaunchTokens, b: KernelTokens, ai: np.ndarray, bi: np.ndarray) -> np.ndarray:
    """Whether launch a[ai[j]] fits device event b[bi[j]], for every j."""
    kernel = a.kernel[ai]
    allowed = a.allowed[ai]
    same_kind = a.kind[ai] == b.kind[bi]
    by_name = kernel == b.name[bi]
    by_category = (allowed == 0) | ((allowed & b.category[bi]) != 0)
    return same_kind & np.where(kernel >= 0, by_name, by_category)


@dataclass(frozen=True)
class Alignment:
    """Which launch each device event of the replay is (`launch[i]`: an index into the capture's launches, -1
    for an event no launch fits), how many fit, how many edits (launches plus events left over) it took, and
    how: `exact` (in order, one to one), `reordered` (one to one, in another order: several streams),
    `aligned` (up to `edits` launches added or missing)."""

    launch: np.ndarray
    matched: int
    edits: int
    how: str

    @property
    def share(self) -> float:
        return self.matched / len(self.launch) if len(self.launch) else 0.0


def default_max_edits(m: int, n: int) -> int:
    return max(4, min(MAX_EDITS_CAP, -(-max(m, n) // 10)))


def align(a: LaunchTokens, b: KernelTokens, max_edits: int | None = None) -> Alignment | None:
    """The best alignment of the capture's launches `a` with the replay's device events `b`, or None when none
    fits with at most `max_edits` edits (or half of the events stay unmatched)."""
    m, n = len(a), len(b)
    if not n or not m:
        return None
    if max_edits is None:
        max_edits = default_max_edits(m, n)
    if abs(m - n) > max_edits or _fewest_edits(a, b) > max_edits:
        return None
    if m == n:
        idx = np.arange(n)
        ok = fits(a, b, idx, idx)
        if ok.all():
            return Alignment(idx.copy(), n, 0, "exact")
        reordered = _reordered(a, b)
        if reordered is not None:
            return Alignment(reordered, n, 0, "reordered")
    found = _myers(a, b, max_edits)
    if found is None:
        return None
    launch, matched = found
    if 2 * matched < n:
        return None
    return Alignment(launch, matched, m + n - 2 * matched, "aligned")


def _fewest_edits(a: LaunchTokens, b: KernelTokens) -> int:
    """A lower bound of the edits, from counts alone: per kind, the surplus of one side; where every launch
    names its kernel, per name."""
    kinds = len(KIND_CODES)
    bound = int(np.abs(np.bincount(a.kind, minlength=kinds) - np.bincount(b.kind, minlength=kinds)).sum())
    if len(a.kernel) and (a.kernel >= 0).all():
        size = int(max(a.kernel.max(), b.name.max())) + 1
        bound = max(bound, int(np.abs(np.bincount(a.kernel, minlength=size) - np.bincount(b.name, minlength=size))
                               .sum()))
    return bound


def _reordered(a: LaunchTokens, b: KernelTokens) -> np.ndarray | None:
    """Several streams: replay order differs from capture order. Each launch, in capture order, takes the first
    unused device event that fits; None when one finds none."""
    n = len(b)
    # The same work in another order has the same kinds and, for the launches that name their kernel, the
    # same names: a cheap test before the quadratic one.
    if not np.array_equal(np.sort(a.kind), np.sort(b.kind)):
        return None
    named = a.kernel[a.kernel >= 0]
    if len(named):
        wanted, count = np.unique(named, return_counts=True)
        have = np.array([np.count_nonzero(b.name == w) for w in wanted.tolist()])
        if np.any(have < count):
            return None
    out = np.full(n, -1, dtype=np.int64)
    free = np.ones(n, dtype=bool)
    everything = np.arange(n)
    for j in range(len(a)):
        ok = free & fits(a, b, np.full(n, j), everything)
        hit = int(np.argmax(ok))
        if not ok[hit]:
            return None
        out[hit] = j
        free[hit] = False
    return out


class _Diagonals:
    """Per diagonal k of the edit grid (x: launch index, y = x - k: event index), how many consecutive pairs
    fit from each x on: computed once per diagonal, on first use."""

    def __init__(self, a: LaunchTokens, b: KernelTokens):
        self.a, self.b = a, b
        self.m, self.n = len(a), len(b)
        self._runs: dict[int, tuple[int, np.ndarray]] = {}

    def run(self, k: int, x: int) -> int:
        found = self._runs.get(k)
        if found is None:
            x0, x1 = max(0, k), min(self.m, self.n + k)
            if x1 <= x0:
                found = (x0, np.zeros(0, dtype=np.int64))
            else:
                xs = np.arange(x0, x1)
                ok = fits(self.a, self.b, xs, xs - k)
                # runs[i]: from i on, how many fit before the first that does not.
                stop = np.where(ok, len(ok), np.arange(len(ok)))
                first_stop = np.minimum.accumulate(stop[::-1])[::-1]
                found = (x0, first_stop - np.arange(len(ok)))
            self._runs[k] = found
        x0, runs = found
        i = x - x0
        return int(runs[i]) if 0 <= i < len(runs) else 0


def _myers(a: LaunchTokens, b: KernelTokens, max_edits: int) -> tuple[np.ndarray, int] | None:
    """Myers' greedy shortest edit script under the fit predicate, at most `max_edits` edits: (launch index
    per event or -1, number matched), or None."""
    m, n = len(a), len(b)
    diagonals = _Diagonals(a, b)
    target = m - n
    trace: list[dict[int, int]] = []
    previous: dict[int, int] = {}
    for d in range(max_edits + 1):
        current: dict[int, int] = {}
        for k in range(-d, d + 1, 2):
            x = _start(previous, k, d, m, n)
            if x is None:
                continue
            y = x - k
            if y < 0 or y > n or x > m:
                continue
            if x < m and y < n:
                x += diagonals.run(k, x)
            current[k] = x
            if k == target and x >= m:
                trace.append(current)
                return _path(trace, diagonals, m, n)
        trace.append(current)
        previous = current
    return None


def _start(previous: dict[int, int], k: int, d: int, m: int, n: int) -> int | None:
    """Where a d-path on diagonal k starts its snake: one edit from the furthest (d-1)-path on k+1 (an event
    left over: y + 1) or on k-1 (a launch left over: x + 1), whichever reaches further inside the grid."""
    if d == 0:
        return 0
    down = previous.get(k + 1)
    right = previous.get(k - 1)
    best = None
    if down is not None and down - k <= n:
        best = down
    if right is not None and right + 1 <= m and (best is None or right + 1 > best):
        best = right + 1
    return best


def _path(trace: list[dict[int, int]], diagonals: _Diagonals, m: int, n: int) -> tuple[np.ndarray, int]:
    launch = np.full(n, -1, dtype=np.int64)
    matched = 0
    k = m - n
    for d in range(len(trace) - 1, -1, -1):
        end = trace[d][k]
        if d == 0:
            start, previous_k = 0, None
        else:
            start = _start(trace[d - 1], k, d, m, n)
            # _start takes the move from k + 1 unless the one from k - 1 reaches strictly further.
            down = trace[d - 1].get(k + 1)
            previous_k = k + 1 if down is not None and down == start and down - k <= n else k - 1
        for x in range(start, end):
            launch[x - k] = x
            matched += 1
        if previous_k is None:
            break
        k = previous_k
    return launch, matched
