"""max-launches-between-gemms: a layer's own glue between two of its GEMMs stays within a launch budget.

For each pair of consecutive GEMMs issued from one host thread (kernel level: GEMM kernels, two kernels of
one matmul op counting once; op level, traces without device events: top-level GEMM ops), the *layer* is
the innermost nn.Module or record_function range that encloses both (the innermost Python frame where a
trace has neither); profiler and compiler containers (ProfilerStep#N, compiled-graph ranges) are never a
layer, nor is a unit that holds a coarse unit (kernlint.trace.scopes: one of two or more GEMMs or modules side
by side, such as an attention block): `## forward ##`, `DistributedDataParallel.forward` and pipeline ranges
hold whole layers. Counted are the launches between the two GEMMs whose own innermost unit is that layer, i.e. issued by
the layer's own code (inline, or from helper functions it calls), not by its child modules or ranges (a
norm or an activation module is a unit of its own), and whose category is listed (`device-categories` for
kernels, `op-categories` for top-level ops). More than `max` counted launches is a finding, at the first one
past the budget, naming the launches. Pairs without a common layer are not checked; a trace without two
GEMMs in one layer is not applicable.
"""
from __future__ import annotations

import msgspec
import numpy as np

from kernlint.rules.checks.base import CheckKind, CheckSpec, make_finding, register
from kernlint.rules.fields import DeviceCategories, OpCategories
from kernlint.rules.result import decided, not_applicable
from kernlint.trace.arrays import distinct_ints, sorted_order
from kernlint.trace.kinds import DEVICE_KINDS, category_mask
from kernlint.trace.table import TableMemo

_LISTED = 8   # launches named in a finding's message
# (annotation, module, user frame) of an event -> its owner chain (_owner_chain), kept with the table.
_OWNERS: TableMemo[dict[tuple[int, int, int], list[int]]] = TableMemo("launches-between-gemms owner chains")


class MaxLaunchesBetweenGemms(CheckSpec, tag="max-launches-between-gemms"):
    max: int
    device_categories: DeviceCategories = msgspec.field(
        default_factory=lambda: ["elementwise", "copy", "cast", "fill", "memcpy_dtod"])
    op_categories: OpCategories = msgspec.field(default_factory=lambda: ["elementwise", "copy", "cast", "fill"])


def validate(rule):
    if rule.spec.check.max < 0:
        return "max-launches-between-gemms: max must be 0 or more", ["check", "max"]
    return None


def _owner_chain(index, row: int, cache: dict | None = None) -> list[int]:
    """The units enclosing `row`, innermost first: modules and ranges, or Python frames where the trace has
    neither around it. Containers are left out. Events issued from the same range, module and frame share
    the answer (cached on the index's table, or in `cache`)."""
    if cache is None:
        cache = index.table.caches.memo(_OWNERS, dict)
    key = (int(index.annotation[row]), int(index.module[row]), int(index.user_frame[row]))
    found = cache.get(key)
    if found is None:
        found = cache[key] = _owner_rows(index, row)
    return found


def _owner_rows(index, row: int) -> list[int]:
    rows = []
    for column in (index.annotation, index.module):
        u = int(column[row])
        while u >= 0:
            if not index.is_container(u):
                rows.append(u)
            u = int(column[u])
    if not rows:
        u = int(index.user_frame[row])
        while u >= 0:
            rows.append(u)
            u = int(index.user_frame[u])
    rows.sort(key=lambda u: (-index.ts[u], index.end[u]))
    return rows


def _events(index, level: str):
    """Per thread, in issue order: the rows of the events the check looks at; and how many replayed kernels
    were left out. Kernels replayed from a CUDA graph and attributed to its capture are a stream of their own
    per replay (their captured launches are shared by every replay); replayed kernels no capture attributes
    sit in the graph launch's frame, where no layer can be told: they are left out."""
    skipped = 0
    if level == "kernel":
        rows = index.rows_of(DEVICE_KINDS)
        rows = rows[index.launcher[rows] >= 0]
        replay = index.replay[rows]
        unattributed = (replay >= 0) & (index.launcher[rows] == replay)
        skipped = int(unattributed.sum())
        rows = rows[~unattributed]
        key = index.launch_ts
    else:
        rows = np.flatnonzero(index.is_kind("op") & (index.parent_op < 0) & index.does_work)
        key = index.ts
    by_thread: dict[tuple[str, int], list[int]] = {}
    rows = rows[np.argsort(key[rows], kind="stable")]
    if not len(rows):
        return by_thread, skipped
    # Streams in the order their first event is issued; each stream's events in issue order.
    thread, replay = index.thread_code()[rows], index.replay[rows]
    perm = sorted_order(replay, thread)
    thread, replay = thread[perm], replay[perm]
    starts = np.flatnonzero(np.concatenate([[True], (thread[1:] != thread[:-1]) | (replay[1:] != replay[:-1])]))
    stops = np.append(starts[1:], len(rows))
    for g in np.argsort(perm[starts], kind="stable").tolist():
        stream = rows[perm[starts[g]:stops[g]]]
        first = int(stream[0])
        by_thread[(index.thread[first], int(index.replay[first]))] = stream.tolist()
    return by_thread, skipped


class _UnitTrees:
    """The range, module and frame trees of one index, containers left out, with the depth of each unit: the
    chains of _owner_chain as arrays (only where every chain is in unit order: _unit_trees)."""

    def __init__(self, index, container: np.ndarray):
        self.ts, self.end = index.ts, index.end
        n = len(self.ts)
        self.start: dict[str, np.ndarray] = {}    # per column: each unit's first unit up (itself, or above)
        self.parent: dict[str, np.ndarray] = {}   # the unit above, containers left out
        self.depth: dict[str, np.ndarray] = {}
        self.links = {c: getattr(index, c) for c in ("annotation", "module", "user_frame")}
        for column, links in self.links.items():
            skip = container if column != "user_frame" else np.zeros(n + 1, dtype=bool)
            nodes = _nodes(links)
            up = np.full(n + 1, -1, dtype=np.int64)   # index n (and so -1) stays -1
            x = nodes.copy()
            while True:   # past the containers
                passing = (x >= 0) & skip[x]
                if not passing.any():
                    break
                x[passing] = links[x[passing]]
            up[nodes] = x
            parent = np.full(n + 1, -1, dtype=np.int64)
            parent[nodes] = up[links[nodes]]
            depth = np.full(n + 1, -1, dtype=np.int64)
            depth[nodes] = 0
            above = parent[nodes]
            while (above >= 0).any():
                depth[nodes[above >= 0]] += 1
                above = parent[above]
            self.start[column], self.parent[column], self.depth[column] = up, parent, depth

    def _first(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        """Of two units (-1: none), the one earlier in unit order: latest start, then earliest end; x on a tie
        (the ranges' chain goes first into the stable sort)."""
        ts, end = self.ts, self.end
        both = (x >= 0) & (y >= 0)
        xs, ys = np.where(both, x, 0), np.where(both, y, 0)
        x_first = (ts[xs] > ts[ys]) | ((ts[xs] == ts[ys]) & (end[xs] <= end[ys]))
        return np.where(both, np.where(x_first, x, y), np.where(x >= 0, x, y))

    def _lowest_common(self, column: str, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        parent, depth = self.parent[column], self.depth[column]
        x, y = x.copy(), y.copy()
        none = (x < 0) | (y < 0)
        x[none] = y[none] = -1
        while True:   # to the same depth, then up together until they meet (at -1 where they do not)
            deeper_x, deeper_y = depth[x] > depth[y], depth[y] > depth[x]
            if not (deeper_x.any() or deeper_y.any()):
                break
            x[deeper_x] = parent[x[deeper_x]]
            y[deeper_y] = parent[y[deeper_y]]
        apart = x != y
        while apart.any():
            x[apart], y[apart] = parent[x[apart]], parent[y[apart]]
            apart = x != y
        return x

    def _starts(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return tuple(self.start[c][self.links[c][rows]] if c != "user_frame" else self.links[c][rows]
                     for c in ("annotation", "module", "user_frame"))

    def innermost(self, rows: np.ndarray) -> np.ndarray:
        """The first unit of each row's chain (-1 for an empty chain)."""
        a, m, f = self._starts(rows)
        return np.where((a >= 0) | (m >= 0), self._first(a, m), f)

    def common(self, x_rows: np.ndarray, y_rows: np.ndarray) -> np.ndarray:
        """The first unit of x's chain that is in y's chain (-1 for none)."""
        xa, xm, xf = self._starts(x_rows)
        ya, ym, yf = self._starts(y_rows)
        x_structural, y_structural = (xa >= 0) | (xm >= 0), (ya >= 0) | (ym >= 0)
        structural = self._first(self._lowest_common("annotation", xa, ya), self._lowest_common("module", xm, ym))
        frames = self._lowest_common("user_frame", xf, yf)
        return np.where(x_structural & y_structural, structural,
                        np.where(~x_structural & ~y_structural, frames, -1))


def _nodes(links: np.ndarray) -> np.ndarray:
    """The rows a link column points at, ascending (np.unique by a mask: no sort of the rows)."""
    present = np.zeros(len(links), dtype=bool)
    present[links[links >= 0]] = True
    return np.flatnonzero(present)


def _unit_trees(index) -> _UnitTrees | None:
    """The unit trees of the index, where every chain of units is in unit order already (each unit starts
    after the one above it, or with it and ends no later; no time is NaN): else None."""
    found = index.memo.get("launches-between-gemms-trees", False)
    if found is not False:
        return found
    ts, end = index.ts, index.end
    found = None
    ordered = True
    for column in ("annotation", "module", "user_frame"):
        links = getattr(index, column)
        nodes = _nodes(links)
        parent = links[nodes]
        has = parent >= 0
        u, p = nodes[has], parent[has]
        ordered &= bool(np.isfinite(ts[nodes]).all() and np.isfinite(end[nodes]).all()
                        and ((ts[u] > ts[p]) | ((ts[u] == ts[p]) & (end[u] <= end[p]))).all())
    if ordered:
        container = np.zeros(len(ts) + 1, dtype=bool)
        rows, codes, names_ = index.names_of_kind("annotation")
        if len(rows):   # is_container asked once per distinct range name
            first = np.full(len(names_), -1, dtype=np.int64)
            first[codes[::-1]] = rows[::-1]
            named = np.array([index.is_container(int(r)) if r >= 0 else False for r in first.tolist()], dtype=bool)
            container[rows[named[codes]]] = True
        found = _UnitTrees(index, container)
    index.memo["launches-between-gemms-trees"] = found
    return found


def _pairs_one_by_one(rule, index, streams, is_gemm, listed_category, trees=None):
    """(findings, pairs checked, pairs in a coarse unit), GEMM by GEMM: the definition (`trees` unused:
    the signature of _pairs_by_arrays)."""
    spec = rule.spec.check
    findings = []
    pairs = coarse_pairs = 0
    chains = index.table.caches.memo(_OWNERS, dict)
    for rows in streams.values():
        last_gemm, last_owner, between, last_chain = -1, -1, [], []
        tops = index.top_op[rows].tolist()
        for r, gemm, top in zip(rows, is_gemm[rows].tolist(), tops):
            if gemm:
                owner = top if top >= 0 else r
                if last_gemm >= 0 and owner == last_owner:
                    continue        # a second kernel of the same matmul
                chain = _owner_chain(index, r, chains)
                if last_gemm >= 0:
                    a, b = last_chain, chain
                    in_b = set(b)
                    common = next((u for u in a if u in in_b), -1)
                    if common >= 0 and index.holds_coarse_unit(common):
                        coarse_pairs += 1   # the two GEMMs meet in a unit of several layers, not in a layer
                        common = -1
                    if common >= 0:
                        pairs += 1
                        own = [e for e in between if listed_category[e]
                               and next(iter(_owner_chain(index, e, chains)), -1) == common]
                        if len(own) > spec.max:
                            findings.append(_finding(rule, index, common, own))
                last_gemm, last_owner, between, last_chain = r, owner, [], chain
            elif last_gemm >= 0:
                between.append(r)
    return findings, pairs, coarse_pairs


def _finding(rule, index, common: int, own: list[int]):
    spec = rule.spec.check
    scope = index.unit(common)
    listed = ", ".join(str(index.short_name[e]) for e in own[:_LISTED])
    if len(own) > _LISTED:
        listed += f", ... ({len(own) - _LISTED} more)"
    return make_finding(rule, index, own[spec.max], scope,
                        f"{len(own)} elementwise/copy launches between two GEMMs of {scope.label}, at "
                        f"most {spec.max} allowed: {listed}", None)


def _pairs_by_arrays(rule, index, streams, is_gemm, listed_category, trees):
    """_pairs_one_by_one for all GEMM pairs at once, where every unit chain is in unit order (_unit_trees):
    a chain is then its innermost unit and the units above it, the common unit of two chains the innermost
    of the lowest common range and the lowest common module (or of the frames), and an event's own unit the
    innermost of its range and module."""
    spec = rule.spec.check
    lists = list(streams.values())
    if not lists:
        return [], 0, 0
    events = np.fromiter((r for rows in lists for r in rows), dtype=np.int64, count=sum(map(len, lists)))
    stream = np.repeat(np.arange(len(lists)), [len(rows) for rows in lists])
    gemm_at = np.flatnonzero(is_gemm[events])
    top = index.top_op[events[gemm_at]]
    owner = np.where(top >= 0, top, events[gemm_at])
    # A GEMM whose owner is the previous GEMM's (a second kernel of one matmul) is passed over.
    taken = np.ones(len(gemm_at), dtype=bool)
    taken[1:] = (owner[1:] != owner[:-1]) | (stream[gemm_at[1:]] != stream[gemm_at[:-1]])
    at = gemm_at[taken]
    pair = np.flatnonzero(stream[at[1:]] == stream[at[:-1]])   # pair k: GEMMs at[k] and at[k + 1]
    if not len(pair):
        return [], 0, 0
    common = np.full(len(at) - 1, -1, dtype=np.int64)
    common[pair] = trees.common(events[at[pair]], events[at[pair + 1]])
    units = distinct_ints(common[common >= 0])
    coarse = np.zeros(len(index.ts) + 1, dtype=bool)
    coarse[units] = index.holds_coarse_units(units)
    in_coarse = (common >= 0) & coarse[common]
    common[in_coarse] = -1   # the two GEMMs meet in a unit of several layers, not in a layer
    # Each listed launch between the GEMMs of a pair, issued by that pair's common unit itself.
    between = np.flatnonzero(listed_category[events] & ~is_gemm[events])
    k = np.searchsorted(at, between) - 1
    ok = (k >= 0) & (k < len(common))
    between, k = between[ok], k[ok]
    ok = (stream[at[k + 1]] == stream[between]) & (common[k] >= 0)
    between, k = between[ok], k[ok]
    own = trees.innermost(events[between]) == common[k]
    between, k = between[own], k[own]
    counts = np.bincount(k, minlength=len(common))
    findings = []
    for p in np.flatnonzero(counts > spec.max).tolist():
        lo, hi = np.searchsorted(k, p, "left"), np.searchsorted(k, p, "right")
        findings.append(_finding(rule, index, int(common[p]), events[between[lo:hi]].tolist()))
    return findings, int(np.count_nonzero(common >= 0)), int(np.count_nonzero(in_coarse))


def run(rule, table, index):
    spec = rule.spec.check
    level = "kernel" if table.has_device_events else "op"
    allowed = set(spec.device_categories if level == "kernel" else spec.op_categories)
    is_gemm = category_mask(index.columns, ("gemm",))
    listed_category = category_mask(index.columns, allowed)
    streams, skipped = _events(index, level)
    trees = _unit_trees(index)
    walk = _pairs_by_arrays if trees is not None else _pairs_one_by_one
    findings, pairs, coarse_pairs = walk(rule, index, streams, is_gemm, listed_category, trees)
    notes = []
    if skipped:
        notes.append(f"{skipped} kernel(s) replayed from CUDA graphs with no capture to attribute them were not "
                     "checked (no layer can be told from the graph launch alone)")
    if coarse_pairs:
        notes.append(f"{coarse_pairs} GEMM pair(s) whose innermost common unit holds whole layers (a forward, a "
                     "DDP or pipeline range) were not checked: that unit is not a layer")
    note = "; ".join(notes) or None
    if not pairs:
        return not_applicable(rule, "no two consecutive GEMMs issued from one layer (module, range or frame)"
                              + (f"; {note}" if note else ""))
    return decided(rule, findings, level, pairs, note)


register(CheckKind(
    type="max-launches-between-gemms", spec=MaxLaunchesBetweenGemms, run=run, validate=validate,
    summary="At most `max` launches of the listed categories that a layer's own code issues between two "
            "consecutive GEMMs of that layer."))
