"""Kinds and categories of events: what the `kind` column holds, which trace categories make which kind,
and masks of the rows of some kinds or categories.

The masks come from the columns' own memo (`EventColumns.mask`): each (kinds) or (categories) asked of a
table is computed once while its column stays, however many checks, damage counts and summaries ask again.
"""
from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from kernlint.trace.event_columns import EventColumns

KINDS = ("kernel", "memcpy", "memset", "runtime", "op", "annotation", "gpu_annotation", "python", "module",
         "alloc", "free", "other")
DEVICE_KINDS = frozenset({"kernel", "memcpy", "memset"})
KIND_CODE = {k: i for i, k in enumerate(KINDS)}   # code of each kind in a loaded table's kind column

CATEGORY_KIND = {
    "kernel": "kernel",
    "gpu_memcpy": "memcpy", "memcpy": "memcpy",
    "gpu_memset": "memset", "memset": "memset",
    "cuda_runtime": "runtime", "cuda_driver": "runtime", "runtime": "runtime", "driver": "runtime",
    # Other devices' runtimes (kineto's names): their calls are runtime calls, even where no table line
    # names them (an MTIA trace records no CUDA or HIP runtime, but a runtime all the same).
    "xpu_runtime": "runtime", "xpu_driver": "runtime", "mtia_runtime": "runtime",
    "privateuse1_runtime": "runtime", "privateuse1_driver": "runtime",
    "cpu_op": "op", "operator": "op",
    "user_annotation": "annotation", "nvtx": "annotation",
    "gpu_user_annotation": "gpu_annotation",
    "python_function": "python", "python": "python",
}
# The categories of runtime and driver calls (what the capture-trace merge and the pairing scan for).
RUNTIME_CATEGORIES = tuple(c for c, k in CATEGORY_KIND.items() if k == "runtime")


def is_kind(columns: EventColumns, *kinds: str) -> np.ndarray:
    """Whether each row is of one of `kinds` (read-only; computed once per kind column and kinds)."""
    return columns.mask("kind", kinds)


def rows_of_kind(columns: EventColumns, *kinds: str) -> np.ndarray:
    """The rows of `kinds`, ascending (read-only; computed once per kind column and kinds)."""
    return columns.rows("kind", kinds)


def has_kind(columns: EventColumns, kinds: Iterable[str]) -> bool:
    """Whether any row is of one of `kinds`."""
    return bool(len(columns.rows("kind", kinds)))


def category_mask(columns: EventColumns, categories: Iterable[str]) -> np.ndarray:
    """Whether each row's category is one of `categories` (read-only; computed once per category column and
    categories)."""
    return columns.mask("category", categories)
