"""invariant-recompute: a chain of ops built from constants only, recomputed with the same output sizes.

What a trace can show. Kineto records no tensor identities that link one op's output to the next op's input,
so data flow is inferred from order: a *constant chain* is a run of consecutive top-level ops on one host
thread, issued from one unit (the innermost nn.Module or record_function range; the Python frame where
there is neither), that starts with a `sources` op (a factory whose output depends only on its arguments:
`arange`, `ones`, `full`, ...) and continues with `ops` (pure arithmetic, transcendental, join, view, cast
ops). Any other op (a GEMM, a reduction, a random op, a sync), a change of unit, or the end of the unit ends
the chain. A chain with fewer than `min-ops` working ops (views do not count) is ignored: `arange` feeding
an embedding lookup is not a recompute.

A chain's signature is its working ops' names and the bytes each allocated (output sizes). A signature seen
two or more times in the trace (in two steps, two calls of a module, two layers) is work that depends only
on constants and was done again: one finding per signature, at its second occurrence, saying how often it
ran. The check is decided only where a recompute could show: the trace holds two or more profiler steps, or
a module class or range that runs two or more times; otherwise it is not applicable (a single forward's
first computation looks the same as a recompute).
"""
from __future__ import annotations

import re
from collections import defaultdict

import numpy as np

from kernlint.rules.checks.base import CheckKind, CheckSpec, make_finding, register
from kernlint.rules.fields import Pattern
from kernlint.rules.result import decided, not_applicable
from kernlint.trace.names import NAMED_PATTERNS, without_module_prefix
from kernlint.trace.patterns import PatternError, compile_pattern

_INSTANCE_SUFFIX = re.compile(r"_\d+$")


class InvariantRecompute(CheckSpec, tag="invariant-recompute"):
    sources: Pattern
    ops: Pattern
    min_ops: int = 3


def _pattern(text: str):
    """A rule's pattern (the loader has expanded `@name` entries of the names table)."""
    return compile_pattern(text)


def validate(rule):
    c = rule.spec.check
    if c.min_ops < 2:
        return "invariant-recompute: min-ops must be at least 2 (a source and one op on it)", ["check", "min-ops"]
    for key, value in (("sources", c.sources), ("ops", c.ops)):
        try:
            _pattern(value)
        except PatternError as exc:
            return f"invariant-recompute: {key}: {str(exc).strip(chr(34))}", ["check", key]
    return None


def _repeated_unit(index) -> str | None:
    """Why a recompute could show in this trace (a repeated step, module class or range), or None."""
    steps = compile_pattern(NAMED_PATTERNS["profiler-step-range"])
    names: dict[str, int] = defaultdict(int)
    step_count = 0
    for kind in ("module", "annotation"):   # each distinct name judged once, counted by its rows
        rows, codes, uniques = index.names_of_kind(kind)
        if not len(rows):
            continue
        counts = np.bincount(codes, minlength=len(uniques)).tolist()
        first = np.full(len(uniques), -1, dtype=np.int64)
        first[codes[::-1]] = rows[::-1]   # a row of each name: containers are told by kind and name
        for name, count, row in zip(uniques.tolist(), counts, first.tolist()):
            if not count:
                continue
            name = without_module_prefix(str(name)) if kind == "module" else str(name)
            if kind == "annotation" and steps.search(name):
                step_count += count
                continue
            if index.is_container(row):
                continue
            names[(kind, _INSTANCE_SUFFIX.sub("", name))] += count
    if step_count >= 2:
        return f"{step_count} profiler steps"
    repeated = sorted(n for (_, n), c in names.items() if c >= 2)
    return f"{repeated[0]} runs more than once" if repeated else None


def _chains(index, sources, ops):
    """Constant chains: lists of top-level op rows, per thread in time order."""
    top = np.flatnonzero(index.is_kind("op") & (index.parent_op < 0))
    top = top[np.argsort(index.ts[top], kind="stable")]
    by_thread: dict[str, list[int]] = defaultdict(list)   # positions in `top`
    for i, thread in enumerate(index.thread[top].tolist()):
        by_thread[thread].append(i)
    # Each distinct name's role (source, op or neither) judged once; the rows' units and times as lists.
    codes, uniques = index.columns.coded("name")
    present, local = np.unique(codes[top], return_inverse=True)
    verdict = ["source" if sources.search(n) else "op" if ops.search(n) else "" for n in map(str, uniques[present])]
    role = [verdict[i] for i in local.reshape(-1).tolist()]
    m, a, f = index.module[top], index.annotation[top], index.user_frame[top]
    structural = (m >= 0) | (a >= 0)   # a row's unit: (module, range), else its frame
    unit = list(zip(np.where(structural, m, -1).tolist(), np.where(structural, a, -2 - f).tolist()))
    ts, end, rows_of = index.ts[top].tolist(), index.end[top].tolist(), top.tolist()
    for positions in by_thread.values():
        chain: list[int] = []
        for i in positions:
            kind = role[i]
            if chain and kind and unit[i] == unit[chain[0]] and ts[i] >= end[chain[-1]]:
                chain.append(i)
                continue
            if chain:
                yield [rows_of[j] for j in chain]
            chain = [i] if kind == "source" else []
        if chain:
            yield [rows_of[j] for j in chain]


def _signature(index, chain: list[int]) -> tuple:
    frame_bytes = index.columns["bytes"]
    sig = []
    for r in chain:
        if not index.does_work[r]:
            continue
        allocs = index.allocs_between(index.thread[r], index.ts[r], index.end[r])
        sig.append((str(index.name[r]), int(frame_bytes[allocs].clip(min=0).sum()) if len(allocs) else 0))
    return tuple(sig)


def _scope(index, row: int):
    units = index.enclosing_units(row)
    if units:
        return units[0]
    for column in (index.module, index.annotation, index.user_frame):
        if column[row] >= 0:
            return index.unit(int(column[row]))
    return index.unit(row)


def run(rule, table, index):
    spec = rule.spec.check
    why = _repeated_unit(index)
    if why is None:
        return not_applicable(rule, "no step, module class or range runs twice in this trace: a recompute "
                                    "cannot be told from a first computation")
    sources, ops = _pattern(spec.sources), _pattern(spec.ops)
    seen: dict[tuple, list[list[int]]] = defaultdict(list)
    for chain in _chains(index, sources, ops):
        sig = _signature(index, chain)
        if len(sig) >= spec.min_ops and len({name for name, _ in sig}) >= 2:
            seen[sig].append(chain)
    if not seen:   # nothing to judge is not a pass
        return not_applicable(rule, f"no chain of {spec.min_ops} or more ops built only from constants "
                                    f"({why})", absent=True)
    findings = []
    for sig, chains in seen.items():
        if len(chains) < 2:
            continue
        row = chains[1][0]
        names = " -> ".join(n.removeprefix("aten::") for n, _ in sig)
        total = sum(b for _, b in sig)
        findings.append(make_finding(
            rule, index, row, _scope(index, row),
            f"constant-only chain {names} ({len(sig)} ops, {total} bytes of output) computed {len(chains)} "
            f"times with the same sizes; compute it once and reuse it", None))
    return decided(rule, findings, "op", len(seen), note=f"repetition seen: {why}")


register(CheckKind(
    type="invariant-recompute", spec=InvariantRecompute, run=run, validate=validate,
    summary="A chain of ops that starts at a constant factory (`sources`) and continues with pure ops (`ops`), "
            "at least `min-ops` working ops, computed two or more times with the same output sizes."))
