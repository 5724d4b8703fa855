"""Row queries over a ScopeIndex: which events match a pattern, a filter, a set of scopes.

Semantics the rule language documents (docs/rule-language.md):
- A pattern is a regular expression searched (re.search) in the name as printed: modules without their
  `nn.Module: ` prefix.
- Of nested ops, the outermost one that matches counts; the ops it runs internally do not count again,
  unless a check asks for nested ops.
- Category "*" means every working category: any device event, an op that does device work (or compute
  on a CPU trace), a runtime call that launches or copies. Python frames, modules, ranges and allocations
  are never "working".
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from kernlint.trace.kinds import DEVICE_KINDS, category_mask
from kernlint.trace.names import without_module_prefix
from kernlint.trace.patterns import compile_pattern
from kernlint.trace.scopes import Scope, ScopeIndex

# Runtime calls that put work on the device, as opposed to syncs, allocations and queries.
WORKING_RUNTIME_CATEGORIES = frozenset({"launch", "memcpy_call"})
HOST_KINDS = ("op", "runtime", "annotation", "module", "python")


def compiled(pattern: str):
    return compile_pattern(pattern)


def display_name(index: ScopeIndex, row: int) -> str:
    name = str(index.name[row])
    if index.kind[row] == "module":
        return without_module_prefix(name)
    return name


def rows_matching(index: ScopeIndex, kinds: Iterable[str], pattern: str) -> np.ndarray:
    """Rows of these kinds whose printed name matches `pattern` (each distinct name is tested once)."""
    regex = compiled(pattern)
    out = []
    for kind in set(kinds):
        rows, codes, uniques = index.names_of_kind(kind)
        if not len(rows):
            continue
        printed = (without_module_prefix(n) if kind == "module" else n
                   for n in uniques.tolist())
        hits = np.fromiter((regex.search(n) is not None for n in printed), dtype=bool, count=len(uniques))
        out.append(rows[hits[codes]])
    return np.sort(np.concatenate(out)).astype(np.int64) if out else np.array([], dtype=np.int64)


def drop_nested(index: ScopeIndex, rows: np.ndarray) -> np.ndarray:
    """Ranges nested in another listed range on the same thread count once (the outer one)."""
    if len(rows) < 2:
        return rows
    order = sorted(rows.tolist(), key=lambda r: (index.thread[r], index.ts[r], -index.end[r]))
    kept: list[int] = []
    for r in order:
        if kept and index.thread[kept[-1]] == index.thread[r] and index.ts[r] < index.end[kept[-1]]:
            continue
        kept.append(r)
    return np.array(kept, dtype=np.int64)


def outermost(index: ScopeIndex, rows: Sequence[int]) -> list[int]:
    """Of candidate ops and runtime calls, those with no candidate op above them (report `new_ones`, not
    its `fill_`; `aten::item`, not the `cudaStreamSynchronize` inside it). Other kinds pass as they are."""
    chosen = set(rows)
    parent = index.parent_op
    out = []
    for r in rows:
        if index.kind[r] not in ("op", "runtime"):
            out.append(r)
            continue
        p = parent[r]
        while p >= 0 and p not in chosen:
            p = parent[p]
        if p < 0:
            out.append(r)
    return out


def inside_any(index: ScopeIndex, scopes: Sequence[Scope], rows: Iterable[int]) -> list[int]:
    """Those rows issued (launch_ts) from inside one of `scopes`, on the scope's thread. Scopes on one
    thread must not overlap (named_scopes merges nested instances), so each row is one binary search."""
    by_thread: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for thread in {s.thread for s in scopes}:
        mine = sorted((s for s in scopes if s.thread == thread), key=lambda s: s.ts)
        by_thread[thread] = (np.array([s.ts for s in mine]), np.array([s.end for s in mine]))
    key = index.launch_ts
    out = []
    for r in rows:
        found = by_thread.get(index.thread[r])
        if found is None:
            continue
        starts, ends = found
        i = int(np.searchsorted(starts, key[r], "right")) - 1
        if i >= 0 and key[r] < ends[i]:
            out.append(r)
    return out


def is_working(index: ScopeIndex, row: int) -> bool:
    kind = index.kind[row]
    if kind in DEVICE_KINDS:
        return True
    if kind == "op":
        return bool(index.does_work[row])
    if kind == "runtime":
        return index.category[row] in WORKING_RUNTIME_CATEGORIES
    return False


@dataclass(frozen=True)
class EventFilter:
    """Which events a check looks at: kinds, name patterns, device and host categories (all must hold)."""

    kinds: tuple[str, ...] = ()
    names: tuple[str, ...] = ()
    device_categories: tuple[str, ...] = ()
    op_categories: tuple[str, ...] = ()

    @classmethod
    def of(cls, spec) -> EventFilter:
        return cls(tuple(getattr(spec, "kinds", ())), tuple(getattr(spec, "names", ())),
                   tuple(getattr(spec, "device_categories", ())), tuple(getattr(spec, "op_categories", ())))

    def mask(self, index: ScopeIndex) -> np.ndarray:
        """Whether each row of the table passes the filter (computed once per index and filter)."""
        found = index.memo.get(("event-filter", self))
        if found is not None:
            return found
        n = len(index.kind)
        ok = np.ones(n, dtype=bool)
        if self.kinds:
            ok[:] = False
            ok[index.rows_of(self.kinds)] = True
        if self.names:
            codes, uniques, is_module = index.name_codes()
            regexes = [compiled(p) for p in self.names]
            plain = np.fromiter((any(rx.search(u) for rx in regexes) for u in uniques.tolist()), bool, len(uniques))
            stripped = np.fromiter((any(rx.search(without_module_prefix(u))
                                        for rx in regexes) for u in uniques.tolist()), bool, len(uniques))
            ok &= np.where(is_module, stripped[codes], plain[codes])
        if self.device_categories or self.op_categories:
            device = np.zeros(n, dtype=bool)
            device[index.rows_of(DEVICE_KINDS)] = True
            working = device.copy()
            working[index.rows_of(("op",))] = index.does_work[index.rows_of(("op",))].astype(bool)
            runtime = index.rows_of(("runtime",))
            working[runtime] = category_mask(index.columns, WORKING_RUNTIME_CATEGORIES)[runtime]
            allowed = np.zeros(n, dtype=bool)
            for rows_mask, categories in ((device, self.device_categories), (~device, self.op_categories)):
                hit = category_mask(index.columns, [c for c in categories if c != "*"])
                if "*" in categories:
                    hit = hit | working   # not in place: the category mask is the table's, read-only
                allowed |= rows_mask & hit
            ok &= allowed
        ok.flags.writeable = False
        index.memo[("event-filter", self)] = ok
        return ok

    def __call__(self, index: ScopeIndex, row: int) -> bool:
        kind = index.kind[row]
        if self.kinds and kind not in self.kinds:
            return False
        if self.names and not any(compiled(p).search(display_name(index, row)) for p in self.names):
            return False
        if self.device_categories or self.op_categories:
            allowed = self.device_categories if kind in DEVICE_KINDS else self.op_categories
            if not category_ok(index, row, allowed):
                return False
        return True


def category_ok(index: ScopeIndex, row: int, allowed: Sequence[str]) -> bool:
    if "*" in allowed and is_working(index, row):
        return True
    return index.category[row] in allowed
