"""The columns of an event table: one 1-D numpy array per column, all of one length.

kernlint's own code reads these (`EventTable.columns`); the pandas DataFrame of the Python API
(`EventTable.frame`) is made from them on first use, so that checking a trace never imports pandas.
"""
from __future__ import annotations

from collections.abc import Iterable

import numpy as np


class EventColumns:
    """Column name -> 1-D ndarray, all of `len(columns)` rows, in the order the columns were added.

    The arrays handed out are read-only: a check that changed one in place would change what every later
    check sees. A change is a new array put in the column's place (`columns[name] = values`)."""

    def __init__(self, length: int) -> None:
        self._length = int(length)
        self._arrays: dict[str, np.ndarray] = {}
        # Object columns the DataFrame keeps as objects (pandas would infer a string dtype, None made NaN).
        self.object_columns: set[str] = set()
        # name -> (the column array, code per row, distinct values): the column is values[codes].
        self._codes: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        self.version = 0   # counts changes: EventTable.frame makes its DataFrame again after one
        # (column, values) -> (whether each row's value is one of them, those rows): `mask` and `rows` compute
        # each once per column array (a column put in its place drops its entries).
        self._masks: dict[tuple[str, frozenset], tuple[np.ndarray, np.ndarray | None]] = {}

    def __len__(self) -> int:
        return self._length

    def __contains__(self, name: object) -> bool:
        return name in self._arrays

    def __getitem__(self, name: str) -> np.ndarray:
        return self._arrays[name]

    def __setitem__(self, name: str, values: np.ndarray) -> None:
        array = np.asarray(values)
        if array.ndim != 1 or len(array) != self._length:
            raise ValueError(f"column {name!r}: {array.shape} values for {self._length} rows")
        view = array.view()
        view.flags.writeable = False
        self._arrays[name] = view
        self.object_columns.discard(name)
        self._codes.pop(name, None)
        if self._masks:
            self._masks = {k: v for k, v in self._masks.items() if k[0] != name}
        self.version += 1

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self._arrays)

    def set_object(self, name: str, values: np.ndarray) -> None:
        """An object column that the DataFrame keeps as objects (None stays None)."""
        self[name] = values
        self.object_columns.add(name)

    def set_coded(self, name: str, codes: np.ndarray, values: np.ndarray, *, keep_object: bool = False) -> None:
        """Column `values[codes]`, keeping the codes (`values` distinct) for `coded`."""
        values = np.asarray(values)
        if keep_object:
            self.set_object(name, values[codes])
        else:
            self[name] = values[codes]
        codes = codes.view()
        codes.flags.writeable = False
        self._codes[name] = (self._arrays[name], codes, values)

    def coded(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """(code per row, distinct values) of a column: the codes it was set with, else made in order of
        first appearance (pandas.factorize's order) and kept while the column stays."""
        column = self._arrays[name]
        found = self._codes.get(name)
        if found is None or found[0] is not column:
            codes, values = factorize(column)
            codes.flags.writeable = False
            found = self._codes[name] = (column, codes, values)
        return found[1], found[2]

    def mask(self, name: str, values: Iterable) -> np.ndarray:
        """Whether each row's value of column `name` is one of `values`: through the column's codes (each
        distinct value looked at once, no compare per row), computed once while the column stays (the checks
        of a trace ask for the same kinds and categories again and again). Read-only."""
        key = (name, frozenset(values))
        found = self._masks.get(key)
        if found is None:
            codes, distinct = self.coded(name)
            wanted = key[1]
            lookup = np.zeros(len(distinct) + 1, dtype=bool)   # the last entry, never set, answers code -1
            lookup[[i for i, v in enumerate(distinct.tolist()) if v in wanted]] = True
            mask = lookup[codes]
            mask.flags.writeable = False
            found = self._masks[key] = (mask, None)
        return found[0]

    def rows(self, name: str, values: Iterable) -> np.ndarray:
        """The rows whose value of column `name` is one of `values`, ascending (`mask`'s rows; computed once
        while the column stays). Read-only."""
        key = (name, frozenset(values))
        found = self._masks.get(key)
        if found is None or found[1] is None:
            rows = np.flatnonzero(self.mask(name, key[1]))
            rows.flags.writeable = False
            found = self._masks[key] = (self._masks[key][0], rows)
        return found[1]

    def take(self, rows: np.ndarray) -> EventColumns:
        """The rows `rows` (positions, in that order) as columns of their own."""
        out = EventColumns(len(rows))
        for name, array in self._arrays.items():
            out[name] = array[rows]
        out.object_columns = set(self.object_columns)
        return out

    def copy(self) -> EventColumns:
        """A copy of every column; the codes go along."""
        out = EventColumns(self._length)
        for name, array in self._arrays.items():
            out[name] = array.copy()
            found = self._codes.get(name)
            if found is not None and found[0] is array:
                out._codes[name] = (out._arrays[name], found[1], found[2])
        out.object_columns = set(self.object_columns)
        return out


def factorize(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(code of each value, distinct values) in order of first appearance, as pandas.factorize gives them
    for values without NaN or None (pandas codes those -1; here each NaN is a value of its own). Through a
    dict: sorting Python objects costs far more."""
    seq = values.tolist()
    index = {v: i for i, v in enumerate(dict.fromkeys(seq))}
    codes = np.fromiter(map(index.__getitem__, seq), dtype=np.int64, count=len(seq))
    distinct = np.empty(len(index), dtype=values.dtype)
    distinct[:] = list(index)
    return codes, distinct

