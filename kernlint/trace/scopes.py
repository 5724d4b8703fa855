"""Scopes: the structural unit a launch belongs to, so that "before" means something.

A trace from anywhere carries some of: record_function / NVTX ranges (annotations), nn.Module frames
(with_stack / with_modules) and plain Python frames (with_stack). The scope of an event is found like this:

1. Structural units are the annotations and nn.Module frames enclosing the event. A *coarse* annotation
   (a range around a whole step or forward, such as `execute_model` or `ProfilerStep#3`; see
   COARSE_ANNOTATIONS) is not a unit: it holds many layers, and it is the floor of the search.
2. Where no structural unit lies below the coarse range, the units are the user Python frames enclosing
   the event below it (frames from torch, triton and the standard library are skipped).
3. Of those units, innermost first, the scope of an anchor is the first one that does work of its own
   besides the anchor: a wrapper that only calls the quantization kernel is not the linear layer, but the
   module or frame that also launches the GEMM is. If none does, the innermost unit is the scope.
4. With Python frames only, that frame is widened to its caller while the caller holds no other anchor and
   no other unit that does work, is not `<module>`, and its own work before the anchor is only fills,
   copies and casts: the caller that prepares arguments (a placeholder scale) and calls a fused
   quantize-and-GEMM function is the layer. A caller that also adds a residual, or calls a norm or a helper
   that does work, stops the widening: kernlint then reports less rather than blame a neighbour.
   Structural units are never widened: the linear's module is the boundary.
5. Fallback, where the event has no unit at all: the top-level op that launched it (for a fused op, the
   op itself), else the anchor alone.

Named scopes (a rule that names frames, modules or annotations) are matched directly: every unit whose name
matches is an instance, and instances nested inside another instance on the same thread are merged into it.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np

from kernlint.trace.table import DEVICE_KINDS, EventTable

COARSE_ANNOTATIONS: tuple[str, ...] = (
    r"ProfilerStep#\d+",
    r"execute_model.*",
    r".*model_runner.*",
    r"(?i:forward|model_forward|decode_step|prefill_step|engine_step|step)",
    r"## .* ##",                               # torch.compile: "## Call CompiledFxGraph ... ##"
    r"Torch-Compiled Region.*", r"CompiledFunction.*", r"TorchDynamo Cache Lookup",
)


# What a caller may do before calling the fused quantize-and-GEMM function and still be the layer itself.
_PREPARATION = frozenset({"fill", "copy", "cast", "memset", "memcpy_dtod"})


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
        return f"{self.kind} {self.name}"

    def holds(self, ts: float) -> bool:
        return self.ts <= ts < self.end


class ScopeIndex:
    """Precomputed per-thread arrays so that scope queries are searchsorted lookups."""

    def __init__(self, table: EventTable, coarse: Sequence[str] = COARSE_ANNOTATIONS):
        self.table = table
        f = table.frame
        self.frame = f
        self._coarse = [re.compile(p) for p in coarse]
        self.kind = f["kind"].to_numpy().astype(object)
        self.name = f["name"].to_numpy()
        self.ts = f["ts"].to_numpy()
        self.end = f["end"].to_numpy()
        self.thread = f["thread"].to_numpy()
        self.annotation = f["annotation"].to_numpy()
        self.module = f["module"].to_numpy()
        self.user_frame = f["user_frame"].to_numpy()
        self.top_op = f["top_op"].to_numpy()
        self.launch_ts = f["launch_ts"].to_numpy()
        self.category = f["category"].to_numpy()
        self._device_by_thread = self._by_thread(np.flatnonzero(
            np.isin(self.kind, list(DEVICE_KINDS)) & (f["launcher"].to_numpy() >= 0)), self.launch_ts)
        self._children: dict[int, list[int]] | None = None
        self._work_ops_by_thread = self._by_thread(np.flatnonzero(
            (self.kind == "op") & f["does_work"].to_numpy()), self.ts)

    @classmethod
    def of(cls, table: EventTable, coarse: Sequence[str] = COARSE_ANNOTATIONS) -> "ScopeIndex":
        """The index of `table` for these coarse patterns, built once and kept with the table."""
        key = ("scope_index", tuple(coarse))
        index = table.derived.get(key)
        if index is None:
            index = table.derived[key] = cls(table, coarse)
        return index

    def _by_thread(self, rows: np.ndarray, key: np.ndarray) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        out: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        if not len(rows):
            return out
        threads = self.thread[rows]
        for t in np.unique(threads):
            sel = rows[threads == t]
            sel = sel[np.argsort(key[sel], kind="stable")]
            out[t] = (key[sel], sel)
        return out

    # -- units ---------------------------------------------------------------------------------------------
    def is_coarse(self, row: int) -> bool:
        return self.kind[row] == "annotation" and any(c.fullmatch(self.name[row]) for c in self._coarse)

    def unit(self, row: int) -> Scope:
        kind = {"annotation": "annotation", "module": "module", "python": "frame", "op": "op"}.get(
            self.kind[row], str(self.kind[row]))
        name = self.name[row]
        if kind == "module" and name.startswith("nn.Module: "):
            name = name[len("nn.Module: "):]
        return Scope(row=row, kind=kind, name=name, thread=self.thread[row], ts=float(self.ts[row]),
                     end=float(self.end[row]))

    def _coarse_start(self, row: int) -> float:
        """Start of the innermost coarse annotation enclosing `row` (-inf if none)."""
        a = self.annotation[row]
        while a >= 0:
            if self.is_coarse(a):
                return float(self.ts[a])
            a = self.annotation[a]
        return -np.inf

    def parent_unit(self, row: int) -> int:
        """The innermost unit (user frame, module, non-coarse annotation) enclosing `row`, or -1."""
        best, best_ts = -1, -np.inf
        a = self.annotation[row]
        while a >= 0 and self.is_coarse(a):
            a = self.annotation[a]
        for u in (self.user_frame[row], self.module[row], a):
            if u >= 0 and self.ts[u] > best_ts:
                best, best_ts = int(u), self.ts[u]
        return best

    def enclosing_units(self, row: int) -> list[Scope]:
        """Units enclosing `row`, innermost first: the nn.Modules and non-coarse annotations below the
        innermost coarse annotation; where there are none, the user Python frames below it."""
        floor = self._coarse_start(row)
        structural: list[int] = []
        a = self.annotation[row]
        while a >= 0:
            if not self.is_coarse(a) and self.ts[a] >= floor:
                structural.append(int(a))
            a = self.annotation[a]
        m = self.module[row]
        while m >= 0 and self.ts[m] >= floor:
            structural.append(int(m))
            m = self.module[m]
        if structural:
            structural.sort(key=lambda u: (-self.ts[u], self.end[u]))
            return [self.unit(u) for u in structural]
        frames = []
        f = self.user_frame[row]
        while f >= 0 and self.ts[f] >= floor:
            frames.append(self.unit(int(f)))
            f = self.user_frame[f]
        return frames

    def _children_units(self, parent: int) -> list[int]:
        if self._children is None:
            children: dict[int, list[int]] = {}
            f = self.frame
            is_unit = np.isin(self.kind, ["module", "annotation"]) | (
                (self.kind == "python") & ~f["library_frame"].to_numpy())
            for r in np.flatnonzero(is_unit).tolist():
                if self.kind[r] == "annotation" and self.is_coarse(r):
                    continue
                children.setdefault(self.parent_unit(r), []).append(r)
            self._children = children
        return self._children.get(parent, [])

    # -- work inside an interval ----------------------------------------------------------------------------
    def device_events_between(self, thread: str, start: float, stop: float) -> np.ndarray:
        """Rows of device events launched from `thread` with start <= launch_ts < stop."""
        found = self._device_by_thread.get(thread)
        if found is None:
            return np.empty(0, dtype=np.int64)
        keys, rows = found
        return rows[np.searchsorted(keys, start, "left"):np.searchsorted(keys, stop, "left")]

    def work_ops_between(self, thread: str, start: float, stop: float) -> np.ndarray:
        found = self._work_ops_by_thread.get(thread)
        if found is None:
            return np.empty(0, dtype=np.int64)
        keys, rows = found
        return rows[np.searchsorted(keys, start, "left"):np.searchsorted(keys, stop, "left")]

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

    def anchor_scope(self, anchor: int, level: str, anchors: Sequence[int] = ()) -> Scope:
        """The scope of an anchor event (a device event at kernel level; an op or range at op level).

        Innermost unit that does work besides the anchor; from a Python frame, widened to its caller while
        the caller holds no other anchor and no other working unit, and its own work before the anchor is
        argument preparation only (fills, copies, casts: a placeholder scale). Such a caller, which prepares
        arguments and calls the fused quantize-and-GEMM function, is the layer itself; a caller that also
        adds a residual or calls a norm is not. Widening stops at an nn.Module or annotation, at `<module>`
        and at the coarse range.
        """
        host_row = int(self.frame.at[anchor, "launcher"]) if level == "kernel" else anchor
        if host_row < 0:
            return self._fallback(anchor, level)
        units = self.enclosing_units(host_row)
        if not units:
            return self._fallback(anchor, level)
        i = next((j for j, unit in enumerate(units) if self._other_work(unit, anchor, level)), None)
        if i is None:
            return units[0]
        key = self.launch_ts
        others = [a for a in anchors if a != anchor]
        while units[i].kind == "frame" and i + 1 < len(units):
            parent = units[i + 1]
            if parent.kind == "frame" and parent.name.endswith(": <module>"):
                break
            if any(self.thread[a] == parent.thread and parent.holds(key[a]) for a in others):
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

    def _fallback(self, anchor: int, level: str) -> Scope:
        top = self.top_op[anchor]
        if top >= 0 and top != anchor:
            return self.unit(int(top))
        return Scope(row=-1, kind="anchor", name=str(self.name[anchor]), thread=self.thread[anchor],
                     ts=float(self.launch_ts[anchor]), end=float(self.launch_ts[anchor]))

    # -- named scopes ----------------------------------------------------------------------------------------
    def named_scopes(self, annotations: Iterable[str] = (), modules: Iterable[str] = (),
                     frames: Iterable[str] = (), ops: Iterable[str] = ()) -> list[Scope]:
        """Every unit whose name matches one of the patterns (re.search), outermost instances only."""
        wanted: list[int] = []
        for kind, patterns in (("annotation", annotations), ("module", modules), ("python", frames),
                               ("op", ops)):
            patterns = list(patterns)
            if not patterns:
                continue
            regexes = [re.compile(p) for p in patterns]
            rows = np.flatnonzero(self.kind == kind)
            wanted.extend(int(r) for r in rows if any(rx.search(self.name[r]) for rx in regexes))
        wanted.sort(key=lambda r: (self.thread[r], self.ts[r], -self.end[r]))
        out: list[Scope] = []
        for r in wanted:
            last = out[-1] if out else None
            if last is not None and last.thread == self.thread[r] and self.ts[r] < last.end:
                continue  # nested in an instance already taken
            out.append(self.unit(r))
        return out

    def rows_in_scope(self, scope: Scope, rows: np.ndarray, key: str = "launch_ts") -> np.ndarray:
        """Those of `rows` that started (key="ts") or were issued (key="launch_ts") from the scope's thread
        inside its interval."""
        if not len(rows):
            return rows
        times = (self.ts if key == "ts" else self.launch_ts)[rows]
        keep = (self.thread[rows] == scope.thread) & (times >= scope.ts) & (times < scope.end)
        return rows[keep]


def add_scope_column(table: EventTable, coarse: Sequence[str] = COARSE_ANNOTATIONS) -> None:
    """Column `scope`: the label of the innermost unit (rule 1-2 of the module docstring) that each device
    event, op, runtime call and allocation was issued from; None where there is none."""
    index = ScopeIndex.of(table, coarse)
    f = table.frame
    kinds = index.kind
    launcher = f["launcher"].to_numpy()
    labels = np.full(len(f), None, dtype=object)
    cache: dict[tuple[int, int, int], str | None] = {}
    wanted = np.flatnonzero(np.isin(kinds, ["kernel", "memcpy", "memset", "op", "runtime", "alloc", "free"]))
    for row in wanted.tolist():
        host = int(launcher[row]) if kinds[row] in DEVICE_KINDS else row
        if host < 0:
            continue
        key = (int(index.annotation[host]), int(index.module[host]), int(index.user_frame[host]))
        if key not in cache:
            units = index.enclosing_units(host)
            cache[key] = units[0].label if units else None
        labels[row] = cache[key]
    f["scope"] = labels
