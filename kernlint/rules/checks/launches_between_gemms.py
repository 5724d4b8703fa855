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

from collections import defaultdict

import msgspec
import numpy as np

from kernlint.rules.checks.base import CheckKind, CheckSpec, make_finding, register
from kernlint.rules.result import decided, not_applicable
from kernlint.trace.table import DEVICE_KINDS

_LISTED = 8   # launches named in a finding's message


class MaxLaunchesBetweenGemms(CheckSpec, tag="max-launches-between-gemms"):
    max: int
    device_categories: list[str] = msgspec.field(
        default_factory=lambda: ["elementwise", "copy", "cast", "fill", "memcpy_dtod"])
    op_categories: list[str] = msgspec.field(default_factory=lambda: ["elementwise", "copy", "cast", "fill"])


def validate(rule):
    if rule.spec.check.max < 0:
        return "max-launches-between-gemms: max must be 0 or more", ["check", "max"]
    return None


def _owner_chain(index, row: int, cache: dict | None = None) -> list[int]:
    """The units enclosing `row`, innermost first: modules and ranges, or Python frames where the trace has
    neither around it. Containers are left out. Events issued from the same range, module and frame share
    the answer (cached on the index's table, or in `cache`)."""
    if cache is None:
        cache = index.table.derived.setdefault("launches_between_gemms_owners", {})
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
        rows = np.flatnonzero((index.kind == "op") & (index.parent_op < 0) & index.does_work)
        key = index.ts
    by_thread: dict[tuple[str, int], list[int]] = defaultdict(list)
    for r in rows[np.argsort(key[rows], kind="stable")].tolist():
        by_thread[(index.thread[r], int(index.replay[r]))].append(r)
    return by_thread, skipped


def run(rule, table, index):
    spec = rule.spec.check
    level = "kernel" if table.has_device_events else "op"
    allowed = set(spec.device_categories if level == "kernel" else spec.op_categories)
    findings = []
    pairs = coarse_pairs = 0
    chains = index.table.derived.setdefault("launches_between_gemms_owners", {})
    category = index.category
    streams, skipped = _events(index, level)
    for rows in streams.values():
        last_gemm, last_owner, between, last_chain = -1, -1, [], []
        for r in rows:
            if category[r] == "gemm":
                owner = int(index.top_op[r]) if index.top_op[r] >= 0 else r
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
                        own = [e for e in between if category[e] in allowed
                               and next(iter(_owner_chain(index, e, chains)), -1) == common]
                        if len(own) > spec.max:
                            scope = index.unit(common)
                            listed = ", ".join(str(index.short_name[e]) for e in own[:_LISTED])
                            if len(own) > _LISTED:
                                listed += f", ... ({len(own) - _LISTED} more)"
                            findings.append(make_finding(
                                rule, index, own[spec.max], scope,
                                f"{len(own)} elementwise/copy launches between two GEMMs of {scope.label}, at "
                                f"most {spec.max} allowed: {listed}", None))
                last_gemm, last_owner, between, last_chain = r, owner, [], chain
            elif last_gemm >= 0:
                between.append(r)
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
