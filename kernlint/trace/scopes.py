"""Scopes: the structural unit a launch belongs to, so that "before" means something.

A trace from anywhere carries some of: record_function / NVTX ranges (annotations), nn.Module frames
(with_stack / with_modules) and plain Python frames (with_stack). The scope of an event is found like this:

1. The units enclosing an event are its annotations, nn.Module frames and user Python frames (frames from
   torch, triton and the standard library are skipped), innermost first.
2. A unit is *coarse* when it holds several units of work, decided from the trace itself: two or more
   GEMMs (counted by the top-level op, or the launch, that issued them), two or more nn.Modules side by
   side, or (for an anchored rule) more than one anchor. `attn(F)`, `execute_model` and `ProfilerStep#N`
   are coarse in real traces because of what they hold, not because of their names. Ranges that profilers
   and compilers wrap around whole steps (the names table's `profiler-container-range`: ProfilerStep#N,
   torch.compile's regions) are never a unit. The search stops at the innermost coarse unit: it and
   everything around it hold many layers.
3. Python frames inside the innermost nn.Module are its implementation, not units of their own: the
   module is the layer. Annotations and frames otherwise count alike, innermost first.
4. Of those units, innermost first, the scope of an anchor is the first one that does work of its own
   besides the anchor: a wrapper that only calls the quantization kernel is not the linear layer, but the
   module or frame that also launches the GEMM is. If none does, the innermost unit is the scope.
5. With Python frames only, that frame is widened to its caller while the caller holds no other anchor and
   no other unit that does work, is not `<module>`, and its own work before the anchor is only fills,
   copies and casts: the caller that prepares arguments (a placeholder scale) and calls a fused
   quantize-and-GEMM function is the layer. A caller that also adds a residual, or calls a norm or a helper
   that does work, stops the widening: kernlint then reports less rather than blame a neighbour.
   Structural units are never widened: the linear's module is the boundary.
6. Fallback, where the event has no unit below the coarse ones: the top-level op that launched it when that
   op is not coarse itself (a custom op wrapping the whole linear); else the anchor is *unscoped* and the
   rule says so instead of guessing.

Named scopes (a rule that names frames, modules or annotations) are matched directly: every unit whose
printed name matches is an instance, and instances nested inside another instance on the same thread are
merged into it.
"""
from __future__ import annotations

import contextlib
import re
import weakref
from bisect import bisect_left
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from kernlint.trace.arrays import distinct_ints, sorted_order, unique_codes
from kernlint.trace.kinds import DEVICE_KINDS, category_mask, is_kind, rows_of_kind
from kernlint.trace.names import (
    MODULE_PREFIX,
    is_compiler_machinery_frame,
    is_graph_launch,
    is_profiler_frame,
    named_pattern,
)
from kernlint.trace.patterns import compile_pattern
from kernlint.trace.table import EventTable

_CONTAINER = re.compile(named_pattern("profiler-container-range"))
_MODULE_PREFIX = MODULE_PREFIX

# What a caller may do before calling the fused quantize-and-GEMM function and still be the layer itself.
_PREPARATION = frozenset({"fill", "copy", "cast", "memset", "memcpy_dtod"})


# The kind of a synthetic scope: a thread's whole profiled window, for traces that name no scope a rule wants.
WINDOW = "window"


@dataclass(frozen=True)
class Scope:
    """One instance of a scope: a unit's interval on one host thread."""

    row: int            # the unit's row in the event table (-1 for a synthetic scope)
    kind: str           # annotation, module, frame, op, anchor
    name: str
    thread: str
    ts: float
    end: float

    @property
    def label(self) -> str:
        if self.kind == WINDOW:
            return f"the profiled window ({self.name})"
        return f"{self.kind} {self.name}"

    def holds(self, ts: float) -> bool:
        return self.ts <= ts < self.end


class ScopeIndex:
    """Precomputed per-thread arrays so that scope queries are searchsorted lookups."""

    def __init__(self, table: EventTable):
        # A weak reference: the table keeps its index (table.caches), and a strong one back would make a
        # cycle that only the cyclic collector frees, so that checked tables outlive their use.
        self._table = weakref.ref(table)
        f = table.columns
        self.columns = f
        self.kind = f["kind"]
        # Small-integer kind codes: comparing them is cheap where comparing the kind strings is not.
        self.kind_code, kinds = table.kind_codes()
        self._kind_codes = {k: i for i, k in enumerate(kinds.tolist())}
        self._names_of_kind: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        self._rows_by_thread: dict[tuple[int, str], tuple[np.ndarray, dict]] = {}
        self.memo: dict = {}   # per-index results of row queries (kernlint.trace.rows), keyed by the query
        self.name = f["name"]
        self.ts = f["ts"]
        self.end = f["end"]
        self.thread = f["thread"]
        self.annotation = f["annotation"]
        self.module = f["module"]
        self.user_frame = f["user_frame"]
        self.top_op = f["top_op"]
        self.parent_op = f["parent_op"]
        self.launcher = f["launcher"]
        self.launch_ts = f["launch_ts"]
        self.category = f["category"]
        self.does_work = f["does_work"]
        self.short_name = f["short_name"]
        self.op = f["op"]
        self.source = f["source"]
        device = self.rows_of(DEVICE_KINDS)
        # Replayed kernels attributed to captured launches (kernlint.trace.graphs) share their launch rows and
        # times replay after replay: they are looked up one replay at a time (in_replay), never with the
        # eager kernels. Replayed kernels left with their graph launch are looked up with the eager ones.
        self.replay = f["replay"] if "replay" in f else np.full(len(f), -1, dtype=np.int64)
        launched = device[self.launcher[device] >= 0]
        attributed = (self.replay[launched] >= 0) & (self.launcher[launched] != self.replay[launched])
        self._device_by_thread = self._by_thread(launched[~attributed], self.launch_ts)
        self._device_by_replay: dict[int, dict] = {}
        replayed = launched[attributed]
        if len(replayed):
            order = np.argsort(self.replay[replayed], kind="stable")
            replayed = replayed[order]
            cuts = np.flatnonzero(np.diff(self.replay[replayed])) + 1
            for part in np.split(replayed, cuts):
                self._device_by_replay[int(self.replay[part[0]])] = self._by_thread(part, self.launch_ts)
        self._current_replay = -1
        self._children: dict[int, list[int]] | None = None
        self._allocs_by_thread: dict[str, tuple[np.ndarray, np.ndarray]] | None = None
        ops = self.rows_of(("op",))
        self._work_ops_by_thread = self._by_thread(ops[self.does_work[ops].astype(bool)], self.ts)
        self._modules_by_thread = self._by_thread(self.rows_of(("module",)), self.ts)
        self._gemm_by_thread = self._gemm_owners()
        self._coarse: dict[int, bool] = {}
        self._coarse_decided = False
        self._units_cache: dict[tuple[int, int, int], list[Scope]] = {}
        self.frame_col = f["frame"]
        self._profiler_frames: dict[int, bool] = {}
        self._machinery_owner: dict[int, int] = {}

    @property
    def table(self) -> EventTable:
        table = self._table()
        if table is None:
            raise ReferenceError("the event table of this ScopeIndex is gone: keep the table while using its index")
        return table

    @classmethod
    def of(cls, table: EventTable) -> ScopeIndex:
        """The index of `table`, built once and kept with the table."""
        index = table.caches.scope_index
        if index is None:
            index = table.caches.scope_index = cls(table)
        return index

    def kind_code_of(self, kind: str) -> int:
        """The code of a kind in `kind_code` (-1 for a kind the table does not have)."""
        return self._kind_codes.get(kind, -1)

    def is_kind(self, *kinds: str) -> np.ndarray:
        """Whether each row is of one of `kinds`."""
        return is_kind(self.columns, *kinds)

    def rows_of(self, kinds: Iterable[str]) -> np.ndarray:
        """The rows of these kinds, in row order (computed once per table: kernlint.trace.kinds; read-only)."""
        return rows_of_kind(self.columns, *kinds)

    def names_of_kind(self, kind: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(rows of the kind, code of each row's name, the distinct names): a pattern is tested once per name."""
        found = self._names_of_kind.get(kind)
        if found is None:
            rows = self.rows_of((kind,))
            codes, names = self.columns.coded("name")
            # The distinct names of the kind: each is tested once.
            present, local = unique_codes(codes[rows], len(names))
            found = self._names_of_kind[kind] = (rows, local, names[present])
        return found

    def thread_code(self) -> np.ndarray:
        """Each row's thread as an integer that sorts like the thread text."""
        found = self.memo.get("thread-code")
        if found is None:
            codes, threads = self.columns.coded("thread")
            rank = np.empty(len(threads), dtype=np.int64)
            rank[np.argsort(threads, kind="stable")] = np.arange(len(threads))
            found = self.memo["thread-code"] = rank[codes]
        return found

    def name_codes(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(code of each row's name, the distinct names, whether each row is a module frame)."""
        found = self.memo.get("name-codes")
        if found is None:
            codes, uniques = self.columns.coded("name")
            is_module = np.zeros(len(self.name), dtype=bool)
            is_module[self.rows_of(("module",))] = True
            found = self.memo["name-codes"] = (codes, uniques, is_module)
        return found

    def _by_thread(self, rows: np.ndarray, key: np.ndarray) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        out: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        if not len(rows):
            return out
        # Group by thread code, then by key within a thread: one stable sort for all threads.
        codes = self.thread_code()[rows]
        order = sorted_order(key[rows], codes)
        rows, codes = rows[order], codes[order]
        cuts = np.flatnonzero(np.diff(codes)) + 1
        for sel in np.split(rows, cuts):
            out[self.thread[sel[0]]] = (key[sel], sel)
        return out

    def _gemm_owners(self) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """Per thread, the issue time and the owner of every GEMM: the top-level op that ran it (cuBLAS may
        launch two kernels for one matmul; they share an owner), or the launch itself where no op encloses it
        (a Triton GEMM called from Python)."""
        is_gemm = category_mask(self.columns, ("gemm",))
        gemm_ops = np.flatnonzero(self.is_kind("op") & is_gemm & self.does_work)
        gemm_kernels = np.flatnonzero(self.is_kind(*DEVICE_KINDS) & is_gemm & (self.launcher >= 0))
        rows = np.concatenate([gemm_ops, gemm_kernels])
        if not len(rows):
            return {}
        owner = np.where(self.top_op[rows] >= 0, self.top_op[rows], np.where(
            self.launcher[rows] >= 0, self.launcher[rows], rows))
        out: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        codes = self.thread_code()[rows]   # sorts like the thread text
        keys = self.launch_ts[rows]
        for code in distinct_ints(codes).tolist():
            sel = np.flatnonzero(codes == code)
            order = np.argsort(keys[sel], kind="stable")
            out[self.thread[rows[sel[0]]]] = (keys[sel][order], owner[sel][order])
        return out

    @staticmethod
    def _between(found, start: float, stop: float) -> np.ndarray:
        if found is None:
            return np.empty(0, dtype=np.int64)
        keys, rows = found
        return rows[keys.searchsorted(start, "left"):keys.searchsorted(stop, "left")]

    def in_profiler(self, row: int) -> bool:
        """Whether the event runs under the profiler's own Python frames (its stop synchronizes the device):
        the profiler's work, not the profiled program's. Needs stacks; False without them."""
        f = int(self.frame_col[row])
        seen = []
        verdict = False
        while f >= 0:
            known = self._profiler_frames.get(f)
            if known is not None:
                verdict = known
                break
            seen.append(f)
            if is_profiler_frame(str(self.name[f])):
                verdict = True
                break
            f = int(self.frame_col[f])
        for s in seen:
            self._profiler_frames[s] = verdict
        return verdict

    def in_machinery(self, row: int) -> bool:
        """Whether the event is set-up that no rule judges: the profiler's own work (in_profiler), or what
        torch's compiler and CUDA-graph machinery (`@compiler-machinery-frame`: inductor's cudagraph trees,
        torch.cuda.graph, Dynamo) issues itself: going up the event's Python frames, the first frame that is
        the program's own code or machinery is machinery, and no nn.Module opened inside that frame holds the
        event. The model run while a graph is recorded, a compiled graph's kernels and a replay (the graph
        launch and the kernels it runs) are the program's. Needs stacks; False without them."""
        if self.in_profiler(row):
            return True
        if self.replay[row] >= 0 or (self.kind[row] == "runtime" and is_graph_launch(str(self.name[row]))):
            return False
        f = int(self.frame_col[row])
        if f < 0:
            return False
        owner = self._machinery_frame(f)
        if owner < 0:
            return False
        module = int(self.module[row])
        return not (module >= 0 and self.ts[module] >= self.ts[owner])

    def _machinery_frame(self, frame: int) -> int:
        """From `frame` up: the first frame that is machinery (its row) before any frame of the program's
        own code; -1 when a program frame, or no machinery frame, comes first."""
        library = self.columns["library_frame"]
        seen = []
        found = -1
        f = frame
        while f >= 0:
            known = self._machinery_owner.get(f)
            if known is not None:
                found = known
                break
            seen.append(f)
            if is_compiler_machinery_frame(str(self.name[f])):
                found = f
                break
            if not library[f]:
                break
            f = int(self.frame_col[f])
        for s in seen:
            self._machinery_owner[s] = found
        return found

    # -- units ---------------------------------------------------------------------------------------------
    def is_container(self, row: int) -> bool:
        """A range that profilers and compilers wrap around whole steps: never a unit."""
        return self.kind[row] == "annotation" and _CONTAINER.search(self.name[row]) is not None

    def is_coarse(self, row: int) -> bool:
        """Whether a unit (annotation, module, frame, op) holds several units of work: two or more GEMMs, or
        two or more nn.Modules side by side; containers always are."""
        hit = self._coarse.get(row)
        if hit is None:
            if not self._coarse_decided:   # the first question: every module and range that can be, at once
                self._coarse_decided = True
                self._decide_coarse_units()
                hit = self._coarse.get(row)
            if hit is None:
                hit = self._coarse[row] = self.is_container(row) or self._holds_several_units(row)
        return hit

    def _decide_coarse_units(self) -> None:
        """is_coarse of the modules and ranges that arrays decide: containers; units whose interval holds
        GEMMs of two owners (the unit itself none of them); units with neither two owners nor two other
        modules inside. The others (a few) are left to _holds_several_units, one at a time."""
        units = self.rows_of(("module", "annotation"))
        if not len(units):
            return
        n = len(self.kind)
        container = np.zeros(n, dtype=bool)
        rows, codes, names_ = self.names_of_kind("annotation")
        if len(rows):
            hit = np.fromiter((_CONTAINER.search(x) is not None for x in names_.tolist()), bool, len(names_))
            container[rows[hit[codes]]] = True
        start, stop = self.ts[units], self.end[units]
        two_owners = np.zeros(len(units), dtype=bool)
        few_modules = np.zeros(len(units), dtype=bool)
        owner = np.zeros(n, dtype=bool)
        is_module = np.zeros(n, dtype=bool)
        is_module[self.rows_of(("module",))] = True
        codes = self.thread_code()[units]
        for code in distinct_ints(codes).tolist():   # a few threads
            sel = np.flatnonzero(codes == code)
            thread = self.thread[units[sel[0]]]
            if thread in self._gemm_by_thread:
                keys, owners = self._gemm_by_thread[thread]
                owner[owners] = True
                lo, hi = keys.searchsorted(start[sel], "left"), keys.searchsorted(stop[sel], "left")
                change = np.flatnonzero(owners[1:] != owners[:-1]) + 1   # where the next owner starts
                next_owner = np.append(change, len(owners))[np.searchsorted(change, lo, "right")]
                two_owners[sel] = (hi - lo >= 2) & (next_owner < hi)
            inside = np.zeros(len(sel), dtype=np.int64)
            if thread in self._modules_by_thread:
                keys = self._modules_by_thread[thread][0]
                inside = keys.searchsorted(stop[sel], "left") - keys.searchsorted(start[sel], "left")
            # A module lies in its own interval (when it has one): the others inside are fewer by one.
            few_modules[sel] = inside - (is_module[units[sel]] & (start[sel] < stop[sel])) < 2
        judged = np.isfinite(start) & np.isfinite(stop) & ~owner[units]
        coarse = container[units] | (judged & two_owners)
        decided = coarse | (judged & few_modules)
        self._coarse.update(zip(units[decided].tolist(), coarse[decided].tolist()))

    def _holds_several_units(self, row: int) -> bool:
        thread, start, stop = self.thread[row], float(self.ts[row]), float(self.end[row])
        if start != start or stop != stop:   # NaN: the arrays' binary search, which orders NaN last
            return self._holds_several_units_arrays(row)
        gemms, modules = self._unit_lists(thread)
        if gemms is not None:
            keys, owners, next_owner, owner_set = gemms
            lo, hi = bisect_left(keys, start), bisect_left(keys, stop)
            if hi - lo >= 2:   # two distinct owners besides the unit itself
                if row in owner_set:
                    others = [o for o in owners[lo:hi] if o != row]
                    if others and any(o != others[0] for o in others):
                        return True
                elif next_owner[lo] < hi:
                    return True
        if modules is not None:
            keys, rows, parents, parent_ts = modules
            side_by_side = 0
            for i in range(bisect_left(keys, start), bisect_left(keys, stop)):
                if rows[i] == row:
                    continue
                p = parents[i]
                if p >= 0 and p != row and start <= parent_ts[i] < stop:
                    continue  # nested in another module inside this unit
                side_by_side += 1
                if side_by_side >= 2:
                    return True
        return False

    def _holds_several_units_arrays(self, row: int) -> bool:
        thread, start, stop = self.thread[row], self.ts[row], self.end[row]
        owners = self._between(self._gemm_by_thread.get(thread), start, stop)
        if len(set(owners.tolist()) - {row}) >= 2:
            return True
        side_by_side = 0
        for m in self._between(self._modules_by_thread.get(thread), start, stop).tolist():
            if m == row:
                continue
            p = self.module[m]
            if p >= 0 and p != row and start <= self.ts[p] < stop:
                continue  # nested in another module inside this unit
            side_by_side += 1
            if side_by_side >= 2:
                return True
        return False

    def _unit_lists(self, thread: str) -> tuple[tuple | None, tuple | None]:
        """A thread's GEMMs (issue times, owners, where the next other owner starts, the owners) and modules
        (start times, rows, enclosing module and its start) as Python lists: a unit's test reads a few
        entries by binary search, where numpy's per-call cost is many times the work."""
        cache = self.memo.setdefault("unit-lists", {})
        found = cache.get(thread)
        if found is None:
            gemms = modules = None
            if thread in self._gemm_by_thread:
                keys, owners = self._gemm_by_thread[thread]
                change = np.flatnonzero(owners[1:] != owners[:-1]) + 1
                next_owner = np.append(change, len(owners))[np.searchsorted(change, np.arange(len(owners)),
                                                                            "right")]
                gemms = (keys.tolist(), owners.tolist(), next_owner.tolist(), set(owners.tolist()))
            if thread in self._modules_by_thread:
                keys, rows = self._modules_by_thread[thread]
                parents = self.module[rows]
                modules = (keys.tolist(), rows.tolist(), parents.tolist(), self.ts[parents].tolist())
            found = cache[thread] = (gemms, modules)
        return found

    def holds_coarse_unit(self, row: int) -> bool:
        """Whether a unit holds another unit (a module or a range, profiler and compiler containers included)
        that is coarse itself: it then spans several layers (a whole forward around a DDP range), however few
        modules it has side by side. A layer's own child linears are not coarse; an attention or MLP block is."""
        cache = self.memo.setdefault("holds-coarse-unit", {})
        found = cache.get(row)
        if found is None:
            units = self.memo.get("units-by-thread")
            if units is None:   # per thread: the units' starts, rows, ends, and where the coarse ones are
                units = self.memo["units-by-thread"] = {}
                for t, (keys, rows) in self._by_thread(self.rows_of(("module", "annotation")), self.ts).items():
                    listed = rows.tolist()
                    if listed and not self._coarse_decided:
                        self.is_coarse(listed[0])   # decides most of them at once
                    known = list(map(self._coarse.get, listed))
                    coarse = [i for i, (u, hit) in enumerate(zip(listed, known))
                              if (hit if hit is not None else self.is_coarse(u))]
                    units[t] = (keys.tolist(), listed, self.end[rows].tolist(), coarse)
            start, stop = float(self.ts[row]), float(self.end[row])
            listed = units.get(self.thread[row])
            found = False
            if listed is not None:
                keys, rows, ends, coarse = listed
                if start != start or stop != stop:   # NaN: the arrays' binary search, which orders NaN last
                    lo, hi = (int(np.asarray(keys).searchsorted(t, "left")) for t in (start, stop))
                else:
                    lo, hi = bisect_left(keys, start), bisect_left(keys, stop)
                # Only the coarse units inside are looked at.
                found = any(rows[i] != row and ends[i] <= stop
                            for i in coarse[bisect_left(coarse, lo):bisect_left(coarse, hi)])
            cache[row] = found
        return found

    def holds_coarse_units(self, rows: np.ndarray) -> np.ndarray:
        """holds_coarse_unit of each of `rows`: those with no coarse unit starting inside them are told by
        binary searches of all of them at once; the others one at a time."""
        out = np.zeros(len(rows), dtype=bool)
        if not len(rows):
            return out
        self.holds_coarse_unit(int(rows[0]))   # builds the per-thread lists
        units = self.memo["units-by-thread"]
        start, stop = self.ts[rows], self.end[rows]
        maybe = np.zeros(len(rows), dtype=bool)
        codes = self.thread_code()[rows]
        for code in distinct_ints(codes).tolist():   # a few threads
            sel = np.flatnonzero(codes == code)
            listed = units.get(self.thread[rows[sel[0]]])
            if listed is None:
                continue
            keys, coarse = np.asarray(listed[0]), np.asarray(listed[3], dtype=np.int64)
            if not len(coarse):
                continue
            lo, hi = keys.searchsorted(start[sel], "left"), keys.searchsorted(stop[sel], "left")
            first, last = coarse.searchsorted(lo, "left"), coarse.searchsorted(hi, "left")
            unit_rows, ends = np.asarray(listed[1], dtype=np.int64), np.asarray(listed[2])
            # The first coarse unit inside other than the unit itself is usually the answer; with none, the
            # answer is no.
            first = np.where(unit_rows[coarse[np.minimum(first, len(coarse) - 1)]] == rows[sel], first + 1, first)
            inside = first < last
            maybe[sel] = inside
            if inside.any():
                at = coarse[first[inside]]
                out[sel[inside]] = (unit_rows[at] != rows[sel[inside]]) & (ends[at] <= stop[sel[inside]])
        for i in np.flatnonzero(maybe & ~out).tolist():
            out[i] = self.holds_coarse_unit(int(rows[i]))
        return out

    def unit(self, row: int) -> Scope:
        kind = {"annotation": "annotation", "module": "module", "python": "frame", "op": "op"}.get(
            self.kind[row], str(self.kind[row]))
        name = self.name[row]
        if kind == "module" and name.startswith(_MODULE_PREFIX):
            name = name[len(_MODULE_PREFIX):]
        return Scope(row=row, kind=kind, name=name, thread=self.thread[row], ts=float(self.ts[row]),
                     end=float(self.end[row]))

    def _enclosing_rows(self, row: int) -> list[int]:
        """Every annotation, module and user frame enclosing `row`, innermost first."""
        rows = []
        for column in (self.annotation, self.module, self.user_frame):
            u = column[row]
            while u >= 0:
                rows.append(int(u))
                u = column[u]
        rows.sort(key=lambda u: (-self.ts[u], self.end[u]))
        return rows

    def _fine_rows(self, row: int) -> list[int]:
        """The enclosing units below the innermost coarse one, innermost first."""
        fine = []
        for u in self._enclosing_rows(row):
            if self.is_coarse(u):
                break
            fine.append(u)
        return fine

    def parent_unit(self, row: int) -> int:
        """The innermost unit (user frame, module, annotation) enclosing `row` below the coarse ones, or -1."""
        fine = self._fine_rows(row)
        return fine[0] if fine else -1

    def enclosing_units(self, row: int) -> list[Scope]:
        """Units enclosing `row`, innermost first, below the innermost coarse unit. Python frames inside the
        innermost nn.Module are its implementation, not units of their own: the module is the layer.
        Events issued from the same innermost range, module and frame share the answer (cached)."""
        key = (int(self.annotation[row]), int(self.module[row]), int(self.user_frame[row]))
        found = self._units_cache.get(key)
        if found is None:
            found = self._units_cache[key] = self._enclosing_units(row)
        return found

    def _enclosing_units(self, row: int) -> list[Scope]:
        fine = self._fine_rows(row)
        first_module = next((j for j, u in enumerate(fine) if self.kind[u] == "module"), 0)
        return [self.unit(u) for j, u in enumerate(fine) if j >= first_module or self.kind[u] != "python"]

    def _children_units(self, parent: int) -> list[int]:
        if self._children is None:
            children: dict[int, list[int]] = {}
            is_unit = self.is_kind("module", "annotation") | (self.is_kind("python") & ~self.columns["library_frame"])
            for r in np.flatnonzero(is_unit).tolist():
                if self.is_container(r):
                    continue
                children.setdefault(self.parent_unit(r), []).append(r)
            self._children = children
        return self._children.get(parent, [])

    # -- work inside an interval ----------------------------------------------------------------------------
    def device_events_between(self, thread: str, start: float, stop: float) -> np.ndarray:
        """Rows of device events launched from `thread` with start <= launch_ts < stop: eager ones, or inside
        `in_replay(r)` those of graph replay r attributed to its capture."""
        found = (self._device_by_thread if self._current_replay < 0
                 else self._device_by_replay.get(self._current_replay, {}))
        return self._between(found.get(thread), start, stop)

    @property
    def replays(self) -> list[int]:
        """Graph launches whose device events were attributed to a capture (rows, in row order)."""
        return sorted(self._device_by_replay)

    def problem_group(self, row: int) -> str | None:
        """What findings of several rules on one event share (their `group`: one problem): the outermost op the
        event ran in, by its thread and start; None outside any op."""
        top = int(self.top_op[row])
        return f"{self.thread[top]}@{float(self.ts[top])!r}" if top >= 0 else None

    def profiler_step(self, row: int) -> str | None:
        """The `ProfilerStep#N` range (the names table's `profiler-step-range`) the event was issued in, by its
        launch time; None outside every step or in a trace without steps."""
        spans = self.__dict__.get("_step_spans")
        if spans is None:
            steps = self.named_scopes(annotations=[named_pattern("profiler-step-range")])
            steps = sorted((s for s in steps if s.kind == "annotation"), key=lambda s: s.ts)
            spans = self._step_spans = (np.array([s.ts for s in steps], dtype=np.float64),
                                        [s.end for s in steps], [s.name for s in steps])
        starts, ends, names = spans
        t = float(self.launch_ts[row]) if row >= 0 else float("nan")
        i = int(starts.searchsorted(t, "right")) - 1 if len(starts) and np.isfinite(t) else -1
        return names[i] if i >= 0 and t < ends[i] else None

    def replay_number(self, replay: int) -> int:
        """1-based position of graph launch `replay` among the trace's graph launches that ran device events,
        in time order."""
        numbers = self.__dict__.get("_replay_numbers")
        if numbers is None:
            launches = distinct_ints(self.replay[self.replay >= 0])
            launches = launches[np.argsort(self.ts[launches], kind="stable")]
            numbers = self._replay_numbers = {int(g): i + 1 for i, g in enumerate(launches.tolist())}
        return numbers.get(int(replay), 0)

    @contextlib.contextmanager
    def in_replay(self, replay: int):
        """Device-event lookups (device_events_between, and the scoping that rests on it) see only the
        attributed device events of graph replay `replay` (a graph launch row) while inside."""
        previous, self._current_replay = self._current_replay, int(replay)
        try:
            yield self
        finally:
            self._current_replay = previous

    def allocs_between(self, thread: str, start: float, stop: float) -> np.ndarray:
        """Rows of allocations made on `thread` with start <= ts < stop."""
        if self._allocs_by_thread is None:
            self._allocs_by_thread = self._by_thread(np.flatnonzero(self.is_kind("alloc")), self.ts)
        return self._between(self._allocs_by_thread.get(thread), start, stop)

    def work_ops_between(self, thread: str, start: float, stop: float) -> np.ndarray:
        return self._between(self._work_ops_by_thread.get(thread), start, stop)

    def _other_work(self, unit: Scope, anchor: int, level: str) -> bool:
        if level == "kernel":
            rows = self.device_events_between(unit.thread, unit.ts, unit.end)
            return bool(np.any(rows != anchor))
        rows = self.work_ops_between(unit.thread, unit.ts, unit.end)
        a_ts, a_end = self.ts[anchor], self.end[anchor]
        inside_anchor = (self.ts[rows] >= a_ts) & (self.ts[rows] < a_end)
        around_anchor = (self.ts[rows] <= a_ts) & (self.end[rows] >= a_end)
        return bool(np.any(~inside_anchor & ~around_anchor))

    def _has_work(self, unit: Scope, level: str) -> bool:
        if level == "kernel":
            return len(self.device_events_between(unit.thread, unit.ts, unit.end)) > 0
        return len(self.work_ops_between(unit.thread, unit.ts, unit.end)) > 0

    def anchor_scope(self, anchor: int, level: str, anchors: AnchorSet | None = None) -> Scope:
        """The scope of an anchor event (a device event at kernel level; an op or range at op level).

        Innermost unit below the coarse ones that does work besides the anchor; a unit that holds another
        anchor is coarse for this rule. From a Python frame, widened to its caller while the caller holds no
        other anchor and no other working unit, and its own work before the anchor is argument preparation
        only (fills, copies, casts: a placeholder scale). Widening stops at an nn.Module or annotation and at
        `<module>`. With no unit at all: the top-level op when it holds one unit of work, else unscoped
        (kind "anchor").
        """
        host_row = int(self.launcher[anchor]) if level == "kernel" else anchor
        if host_row < 0:
            return self._fallback(anchor, level, anchors)
        units = self.enclosing_units(host_row)
        if anchors is not None:
            units = anchors.below_other_anchors(units)
        if not units:
            return self._fallback(anchor, level, anchors)
        i = next((j for j, unit in enumerate(units) if self._other_work(unit, anchor, level)), None)
        if i is None:
            return units[0]
        while units[i].kind == "frame" and i + 1 < len(units):
            parent = units[i + 1]
            if parent.kind == "frame" and parent.name.endswith(": <module>"):
                break
            working = [c for c in self._children_units(parent.row) if self._has_work(self.unit(c), level)]
            if working != [units[i].row]:
                break
            if not self._prepares_only(parent, units[i], anchor, level):
                break
            i += 1
        return units[i]

    def _prepares_only(self, parent: Scope, child: Scope, anchor: int, level: str) -> bool:
        """Whether what `parent` itself does before the anchor, outside `child`, is only fills, copies,
        casts (and memsets): preparing the arguments of the call that holds the anchor."""
        stop = self.launch_ts[anchor] if level == "kernel" else self.ts[anchor]
        if level == "kernel":
            rows = self.device_events_between(parent.thread, parent.ts, stop)
        else:
            rows = self.work_ops_between(parent.thread, parent.ts, stop)
        times = self.launch_ts[rows]
        own = rows[(times < child.ts) | (times >= child.end)]
        categories = set(self.category[own].tolist()) - {"view", "alloc"}
        return categories <= _PREPARATION

    def _fallback(self, anchor: int, level: str, anchors: AnchorSet | None) -> Scope:
        top = self.top_op[anchor]
        if top >= 0 and top != anchor:
            unit = self.unit(int(top))
            if not self.is_coarse(int(top)) and (anchors is None or anchors.count_in(unit) <= 1):
                return unit
        return Scope(row=-1, kind="anchor", name=str(self.name[anchor]), thread=self.thread[anchor],
                     ts=float(self.launch_ts[anchor]), end=float(self.launch_ts[anchor]))

    # -- named scopes ----------------------------------------------------------------------------------------
    def named_scopes(self, annotations: Iterable[str] = (), modules: Iterable[str] = (),
                     frames: Iterable[str] = (), ops: Iterable[str] = ()) -> list[Scope]:
        """Every unit whose printed name matches one of the patterns (re.search; modules without their
        `nn.Module: ` prefix), outermost instances only."""
        key = ("named-scopes", tuple(annotations), tuple(modules), tuple(frames), tuple(ops))
        found = self.memo.get(key)   # rules share their scopes: each set of patterns is matched once
        if found is None:
            found = self.memo[key] = self._named_scopes(*key[1:])
        return list(found)

    def _named_scopes(self, annotations: tuple, modules: tuple, frames: tuple, ops: tuple) -> list[Scope]:
        wanted: list[np.ndarray] = []
        for kind, patterns in (("annotation", annotations), ("module", modules), ("python", frames),
                               ("op", ops)):
            regexes = [compile_pattern(p) for p in patterns]
            if not regexes:
                continue
            rows, codes, uniques = self.names_of_kind(kind)
            hits = np.fromiter((any(rx.search(name[len(_MODULE_PREFIX):] if kind == "module" and name.startswith(
                _MODULE_PREFIX) else name) for rx in regexes) for name in uniques.tolist()), dtype=bool,
                count=len(uniques))
            if hits.any():
                wanted.append(rows[hits[codes]])
        w = np.concatenate(wanted).astype(np.int64) if wanted else np.empty(0, dtype=np.int64)
        unnested = self.table.derived.frame_tree.unnested
        if len(unnested) and len(w):   # calls left open to the recording's close span nothing they ran
            w = w[~np.isin(w, unnested)]
        order = w[sorted_order(-self.end[w], self.ts[w], self.thread_code()[w])] if len(w) else w
        out = [self.unit(r) for r in self._outermost(order)]
        return out + self._backward_parts(out)

    def _outermost(self, order: np.ndarray) -> list[int]:
        """Of rows sorted by (thread, ts, longest first), those not starting inside the last one taken on
        their thread: from each one taken, a binary search to the first row that starts at or after its end."""
        if not len(order):
            return []
        codes = self.thread_code()[order]
        starts, ends = self.ts[order], self.end[order]
        cuts = np.flatnonzero(np.diff(codes)) + 1
        taken: list[int] = []
        for lo, hi in zip([0, *cuts.tolist()], [*cuts.tolist(), len(order)]):
            seg = starts[lo:hi]
            if np.isnan(seg).any() or np.isnan(ends[lo:hi]).any():   # NaN never compares: one at a time
                last = None
                for i in range(lo, hi):
                    if last is not None and starts[i] < last:
                        continue
                    taken.append(i)
                    last = ends[i]
                continue
            i = lo
            while i < hi:
                taken.append(i)
                i = max(lo + int(seg.searchsorted(ends[i], "left")), i + 1)
        return order[taken].tolist()

    def autograd_threads(self) -> dict[str, str]:
        """{thread: process} of the threads that run autograd backward nodes (`@backward-node-op`). The
        engine runs a device's backward on its own thread; a training step's range is on the main thread."""
        found = self.memo.get("autograd-threads")
        if found is None:
            regex = compile_pattern(named_pattern("backward-node-op"))
            rows, codes, uniques = self.names_of_kind("op")
            hits = np.fromiter((regex.search(n) is not None for n in uniques.tolist()), bool, len(uniques))
            threads = {str(t) for t in self.thread[rows[hits[codes]]].tolist()} if hits.any() else set()
            found = self.memo["autograd-threads"] = {t: t.split(":", 1)[0] for t in threads}
        return found

    def _backward_parts(self, scopes: list[Scope]) -> list[Scope]:
        """For each range instance (a `ProfilerStep#N`, a `train_step` range), the same interval on the
        autograd threads of its process: the backward pass that ran inside the step is in the step. A thread's
        own instances of the scopes win where they overlap."""
        autograd = self.autograd_threads()
        if not autograd:
            return []
        own: dict[str, list[tuple[float, float]]] = {}
        for s in scopes:
            own.setdefault(s.thread, []).append((s.ts, s.end))
        parts = []
        for s in scopes:
            if s.kind != "annotation":
                continue
            process = str(s.thread).split(":", 1)[0]
            for thread, proc in autograd.items():
                if proc != process or thread == s.thread:
                    continue
                if any(b < s.end and s.ts < e for b, e in own.get(thread, ())):
                    continue
                parts.append(Scope(row=s.row, kind=s.kind, name=f"{s.name} (backward, autograd thread)",
                                   thread=thread, ts=s.ts, end=s.end))
        return parts

    def profiled_windows(self, setup_annotations: Iterable[str] = (), setup_frames: Iterable[str] = ()
                         ) -> list[Scope]:
        """Each host thread's whole profiled window (first to last host event of a thread that ran ops), as
        scope instances, minus the instances of the named set-up scopes (model loading, warm-up, capture):
        what a trace that names no hot scope still shows of the program's steps."""
        host = self.rows_of(("op", "runtime"))
        setup = self.named_scopes(setup_annotations, (), setup_frames) if (setup_annotations or setup_frames) \
            else []
        out: list[Scope] = []
        for thread in sorted({str(self.thread[r]) for r in host if self.kind[r] == "op"}):
            rows = host[self.thread[host] == thread]
            lo, hi = float(self.ts[rows].min()), float(self.end[rows].max()) + 1e-3
            cuts = sorted((s.ts, s.end) for s in setup if s.thread == thread)
            name = "no hot scope in the trace" + (f", thread {thread}" if thread else "")
            for start, stop in cuts:
                if start >= hi:
                    break
                if start > lo:
                    out.append(Scope(row=-1, kind=WINDOW, name=name, thread=thread, ts=lo, end=start))
                lo = max(lo, stop)
            if lo < hi:
                out.append(Scope(row=-1, kind=WINDOW, name=name, thread=thread, ts=lo, end=hi))
        return out

    def rows_in_scope(self, scope: Scope, rows: np.ndarray, key: str = "launch_ts") -> np.ndarray:
        """Those of `rows` that started (key="ts") or were issued (key="launch_ts") from the scope's thread
        inside its interval, in row order. The same `rows` array asked again is answered by binary search."""
        if not len(rows):
            return rows
        cache_key = (id(rows), key)
        found = self._rows_by_thread.get(cache_key)
        if found is None or found[0] is not rows:   # keep `rows` alive: its id is not reused while cached
            if len(self._rows_by_thread) >= 32:      # callers that pass a new array each time: stay bounded
                self._rows_by_thread.pop(next(iter(self._rows_by_thread)))
            times = self.ts if key == "ts" else self.launch_ts
            found = self._rows_by_thread[cache_key] = (rows, self._by_thread(np.asarray(rows, dtype=np.int64),
                                                                             times))
        inside = self._between(found[1].get(scope.thread), scope.ts, scope.end)
        return np.sort(inside)


class AnchorSet:
    """The anchors of one rule in one trace, per thread by issue time: how many a unit holds, by binary
    search, so that scoping n anchors takes n log n."""

    def __init__(self, index: ScopeIndex, rows: Sequence[int]):
        self.rows = list(rows)
        self._by_thread = index._by_thread(np.asarray(self.rows, dtype=np.int64), index.launch_ts)
        self._counts: dict[tuple[str, float, float], int] = {}
        self._cuts: dict[int, list[Scope]] = {}

    def count_in(self, unit: Scope) -> int:
        key = (unit.thread, unit.ts, unit.end)
        n = self._counts.get(key)
        if n is None:
            found = self._by_thread.get(unit.thread)
            if found is None:
                n = 0
            else:
                keys = found[0]
                n = int(keys.searchsorted(unit.end, "left") - keys.searchsorted(unit.ts, "left"))
            self._counts[key] = n
        return n

    def below_other_anchors(self, units: list[Scope]) -> list[Scope]:
        """The innermost units up to (not including) the first that holds another anchor: it is coarse
        for this rule. Anchors that share their units share the answer."""
        found = self._cuts.get(id(units))
        if found is None:
            cut = next((j for j, u in enumerate(units) if self.count_in(u) > 1), len(units))
            found = self._cuts[id(units)] = units[:cut]
        return found


def add_scope_column(table: EventTable) -> None:
    """Column `scope`: the label of the innermost unit (rules 1-3 of the module docstring) that each device
    event, op, runtime call and allocation was issued from; None where there is none."""
    index = ScopeIndex.of(table)
    kinds = index.kind
    labels = np.full(len(index.kind), None, dtype=object)
    cache: dict[tuple[int, int, int], str | None] = {}
    wanted = np.flatnonzero(index.is_kind("kernel", "memcpy", "memset", "op", "runtime", "alloc", "free"))
    for row in wanted.tolist():
        host = int(index.launcher[row]) if kinds[row] in DEVICE_KINDS else row
        if host < 0:
            continue
        key = (int(index.annotation[host]), int(index.module[host]), int(index.user_frame[host]))
        if key not in cache:
            units = index.enclosing_units(host)
            cache[key] = units[0].label if units else None
        labels[row] = cache[key]
    table.columns.set_object("scope", labels)  # None where there is none
