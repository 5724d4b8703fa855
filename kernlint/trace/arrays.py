"""numpy helpers of the event table and what reads it: codes of distinct values, stable multi-key sorts,
searches, object arrays. Plain functions of arrays; nothing here knows what a column means."""
from __future__ import annotations

import numpy as np


def unique_codes(codes: np.ndarray, size: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """np.unique(codes, return_inverse=True) for non-negative integer codes below `size`: through a table of
    the codes present, where the range is small next to the rows (no sort of the rows)."""
    codes = np.asarray(codes)
    if size is None:
        size = int(codes.max()) + 1 if len(codes) else 0
    if codes.dtype.kind not in "iu" or size > 4 * len(codes) + 4096 or (len(codes) and int(codes.min()) < 0):
        uniques, inverse = np.unique(codes, return_inverse=True)
        return uniques, inverse.reshape(-1)
    present = np.zeros(size, dtype=bool)
    present[codes] = True
    uniques = np.flatnonzero(present)
    code_of = np.zeros(size, dtype=np.intp)
    code_of[uniques] = np.arange(len(uniques))
    return uniques.astype(codes.dtype, copy=False), code_of[codes]


def distinct_ints(values: np.ndarray) -> np.ndarray:
    """np.unique(values) for integers: sorted, each once (np.unique's plain form imports numpy.ma, 10 ms of
    a tiny trace's start-up)."""
    values = np.sort(np.asarray(values), kind="stable")
    if len(values) < 2:
        return values
    keep = np.empty(len(values), dtype=bool)
    keep[0] = True
    np.not_equal(values[1:], values[:-1], out=keep[1:])
    return values[keep]


def sorted_order(*keys: np.ndarray) -> np.ndarray:
    """np.lexsort(keys) (the last key primary, ties in row order), one stable argsort per key: the sort
    adapts to runs, so keys nearly in row order already (times of one trace) sort in about one pass, where
    lexsort's merge sorts do not. Small-integer keys (thread codes) take the radix sort."""
    order = None
    for key in keys:
        key = np.asarray(key)
        if key.dtype.kind in "iu" and len(key):
            low, high = int(key.min()), int(key.max())
            if low == high:   # one value (one thread): a stable sort leaves the order as it is
                continue
            if -(2 ** 15) <= low and high < 2 ** 15:
                key = key.astype(np.int16)
        step = np.argsort(key if order is None else key[order], kind="stable")
        order = step if order is None else order[step]
    return order if order is not None else np.arange(len(keys[0]) if keys else 0)


def search_sorted(values: np.ndarray, queries: np.ndarray, side: str) -> np.ndarray:
    """np.searchsorted(values, queries, side) for ascending `queries` too (NaN last, numpy's order): where
    the values are fewer, each value is searched among the queries instead, and the counts of values
    below each query are a running sum, so that the binary searches are of the shorter array."""
    if len(values) * 2 >= len(queries):
        return np.searchsorted(values, queries, side)
    # values[j] < q (side left) from the first query above values[j]; values[j] <= q (right) from the first
    # query at or above it.
    first = np.searchsorted(queries, values, "right" if side == "left" else "left")
    return np.cumsum(np.bincount(first, minlength=len(queries) + 1)[:len(queries)])


def distinct_in_order(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(distinct values in order of first appearance, the code of each value): for a few hundred values."""
    index: dict = {}
    codes = np.array([index.setdefault(v, len(index)) for v in values.tolist()], dtype=np.intp)
    return object_array(list(index)), codes


def object_array(values: list) -> np.ndarray:
    """`values` as a 1-D object array (np.array would make a 2-D array of a list of tuples)."""
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out


def compact(values: np.ndarray) -> np.ndarray:
    """The values in an array of their own: a slice of the loader's larger buffers would keep all of it."""
    base = values.base
    return values.copy() if base is not None and getattr(base, "nbytes", 0) > values.nbytes else values
