"""The event table's columns, built from a trace's decoded events (kernlint.trace.columns.RawColumns): kinds,
names and categories, damage flags, launch links, host nesting (kernlint.trace.nesting), the Python frame
tree (kernlint.trace.frames), what device events take from their launch, allocation dtypes
(kernlint.trace.alloc_dtypes), work flags and source lines. kernlint.trace.table.build_event_table makes the
EventTable of them; the columns are documented there."""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from kernlint.trace import names, nesting
from kernlint.trace.alloc_dtypes import allocation_dtypes_and_pairs
from kernlint.trace.arrays import compact, distinct_in_order, distinct_ints, object_array, unique_codes
from kernlint.trace.columns import OpArgsStore, RawColumns, _int_or
from kernlint.trace.damage_flags import (
    AMBIGUOUS_LINK,
    BAD_CAT,
    BAD_CORRELATION,
    BAD_DUR,
    BAD_EXTERNAL_ID,
    BAD_NAME,
    BAD_PID,
    BAD_TID,
    BAD_TS,
)
from kernlint.trace.event_columns import EventColumns
from kernlint.trace.frames import FrameTree, check_frame_tree, closed_after_parent, frame_parents
from kernlint.trace.kinds import CATEGORY_KIND, DEVICE_KINDS, KIND_CODE, KINDS, category_mask, is_kind

_STEP_RANGE = names.named_pattern("profiler-step-range")
_MODULE_PREFIX = names.MODULE_PREFIX
_KIND_VALUES = object_array(list(KINDS))


@dataclass(frozen=True)
class BuiltColumns:
    """A trace's table columns, with what the build found beside them (kept as EventTable.derived)."""

    columns: EventColumns
    op_args: OpArgsStore      # the shape arguments of the ops that recorded Input Dims
    frame_tree: FrameTree     # Python frames re-parented without damage


def build_columns(cols: RawColumns) -> BuiltColumns:
    """The table's columns from decoded events (at least one), links and nesting resolved. `cols` is emptied
    on the way (what was copied into the columns is dropped at once: the peak memory of a large trace)."""
    n = cols.n
    op_args = cols.op_args
    bad_name, name_codes, name_values = cols.text_codes("name")
    cats, bad_cat, cat_codes, cat_values = cols.text("cat")
    nbytes = cols.int_column("bytes")
    ts, bad_ts = cols.floats("ts")
    dur, bad_dur = cols.floats("dur")
    complete = cols.complete[:n]
    bad_dur = complete & (bad_dur | (dur < 0))   # an instant has no dur; a complete event must have one
    dur[~(dur >= 0)] = 0.0                        # NaN and negative -> 0: the event is no one's parent
    bad_pid, pid_codes, pid_values = cols.text_codes("pid")
    bad_tid, tid_codes, tid_values = cols.text_codes("tid")
    correlation, bad_corr = cols.id_column("correlation")
    external_id, bad_ext = cols.id_column("external_id")
    bad_cat &= complete   # instants without a category occur in real traces ("Record Window End")
    damage = np.zeros(n, dtype=np.uint16)
    for mask, bit in ((bad_ts, BAD_TS), (bad_dur, BAD_DUR), (bad_pid, BAD_PID), (bad_tid, BAD_TID),
                      (bad_corr, BAD_CORRELATION), (bad_ext, BAD_EXTERNAL_ID), (bad_name, BAD_NAME),
                      (bad_cat, BAD_CAT)):
        damage[mask] |= bit
    # "pid:tid" text, one string per distinct pair; codes in the order of the texts (ScopeIndex sorts by them).
    width = max(len(tid_values), 1)
    pairs, pair_codes = unique_codes(pid_codes.astype(np.int64) * width + tid_codes, len(pid_values) * width)
    pair_texts = [f"{pid_values[p // width]}:{tid_values[p % width]}" for p in pairs.tolist()]
    thread_values = np.empty(len(set(pair_texts)), dtype=object)
    thread_values[:] = sorted(set(pair_texts))
    text_code = {t: i for i, t in enumerate(thread_values.tolist())}
    thread_codes = np.array([text_code[t] for t in pair_texts], dtype=np.int32)[pair_codes.reshape(-1)]
    kind_codes = _kinds(name_codes, name_values, cat_codes, cat_values, nbytes)
    columns = EventColumns(n)
    columns.set_coded("kind", kind_codes, _KIND_VALUES)
    name_codes = compact(name_codes)
    columns.set_coded("name", name_codes, object_array(name_values))
    for name, values in (("cat", cats), ("ts", ts), ("dur", dur)):
        columns[name] = compact(values)
    columns.set_coded("pid", compact(pid_codes), object_array(pid_values))
    columns.set_coded("tid", compact(tid_codes), object_array(tid_values))
    columns.set_coded("thread", thread_codes, thread_values)
    for name, values in (
            ("correlation", correlation), ("external_id", external_id), ("stream", cols.int_column("stream")),
            ("device", cols.int_column("device")), ("device_type", cols.int_column("device_type")),
            ("addr", cols.int_column("addr")), ("bytes", nbytes), ("damage", damage),
            ("launch_kernel", cols.text("launch_kernel")[0]), ("graph_node", cols.id_column("graph_node")[0])):
        columns[name] = compact(values)
    del cats, ts, dur, correlation, external_id, nbytes, damage, complete
    cols.name = cols.cat = cols.pid = cols.tid = cols.ts = cols.dur = cols.complete = cols.launch_kernel = None
    cols.ints = {}
    for name in ("correlation", "external_id", "graph_node"):   # copied into the table; the frame ids stay
        cols.ids.pop(name)
    columns["end"] = columns["ts"] + columns["dur"]

    _name_columns(columns, name_codes, name_values)
    _link_launches(columns)
    python_ids, parent_ids = cols.id_values("python_id"), cols.id_values("python_parent_id")
    parents = frame_parents(columns, python_ids, parent_ids)
    late = closed_after_parent(columns, parents)
    nesting.nest_host_events(columns, name_codes, name_values, unnested=late)
    tree = check_frame_tree(columns, parents, late, python_ids, parent_ids)
    del python_ids, parent_ids, parents
    cols.ids.clear()
    _inherit_from_launcher(columns)
    allocation_dtypes_and_pairs(columns, op_args)
    _work_flags(columns)
    _sources(columns)
    return BuiltColumns(columns, _op_args_of_ops(columns, op_args), tree)


def _kinds(name_codes: np.ndarray, name_values: list[str], cat_codes: np.ndarray, cat_values: list[str],
           nbytes: np.ndarray) -> np.ndarray:
    """The kind of each event as its code into KINDS, from the category (case-insensitive), `[memory]`
    events and module frames; each distinct category and name is looked at once."""
    code = KIND_CODE
    kind_of_cat = np.array([code.get(CATEGORY_KIND.get(c.lower(), ""), -1) for c in cat_values] or [-1], dtype=np.int8)
    kinds = kind_of_cat[cat_codes] if len(cat_values) else np.full(len(cat_codes), -1, dtype=np.int8)
    unknown = kinds < 0
    is_memory_name = np.array([n == "[memory]" for n in name_values] or [False], dtype=bool)
    memory = unknown & is_memory_name[name_codes]
    kinds[memory] = np.where(nbytes[memory] < 0, code["free"], code["alloc"])
    kinds[unknown & ~memory] = code["other"]
    is_module_name = np.array([n.startswith(_MODULE_PREFIX) for n in name_values] or [False], dtype=bool)
    kinds[(kinds == code["python"]) & is_module_name[name_codes]] = code["module"]
    # Kineto before PyTorch 1.10 recorded record_function ranges as cpu_op: the profiler's own step range
    # (names table: profiler-step-range) is a range whatever its category says.
    step = re.compile(_STEP_RANGE)
    is_step = np.array([step.search(n) is not None for n in name_values] or [False], dtype=bool)
    kinds[(kinds == code["op"]) & is_step[name_codes]] = code["annotation"]
    return kinds


def _op_args_of_ops(columns: EventColumns, store: OpArgsStore | None) -> OpArgsStore:
    """The shape arguments of the ops that recorded Input Dims (a view of the loader's store)."""
    if store is None:
        return OpArgsStore(rows=np.empty(0, dtype=np.int64), offsets=np.zeros((0, 5), dtype=np.int64), blob=b"")
    is_op = is_kind(columns, "op")[store.rows]
    keep = is_op & store.has_dims()
    return OpArgsStore(rows=store.rows[keep], offsets=store.offsets[keep], blob=store.blob)


def _name_columns(columns: EventColumns, name_codes: np.ndarray, name_values: list[str]) -> None:
    """short_name and category, worked out once per distinct (kind, name)."""
    kind_codes, kind_values = columns.coded("kind")
    key = kind_codes.astype(np.int64) * max(len(name_values), 1) + name_codes
    pairs, inverse = unique_codes(key, len(kind_values) * max(len(name_values), 1))
    short = np.empty(len(pairs), dtype=object)
    category = np.empty(len(pairs), dtype=object)
    width = max(len(name_values), 1)
    for i, p in enumerate(pairs.tolist()):
        k, name = kind_values[p // width], name_values[p % width]
        short[i], category[i] = name, ""
        if k in DEVICE_KINDS:
            short[i] = names.short_kernel_name(name)
            category[i] = names.classify_kernel(name)
        elif k == "runtime":
            category[i] = names.classify_runtime(name)
        elif k == "op":
            category[i] = names.classify_op(name)
    columns["short_name"] = short[inverse]
    # Coded: the checks and damage counts ask for categories by code, not by a string compare per row.
    values, category_code = distinct_in_order(category)
    columns.set_coded("category", category_code[inverse], values)


def _link_launches(columns: EventColumns) -> None:
    """Device event -> the runtime/driver call with the same correlation id (exact equality of the ids).

    One call may launch several device events (cudaGraphLaunch replays a whole graph). A device event whose
    id two or more calls share (a damaged trace) is not linked to any of them: it is flagged
    AMBIGUOUS_LINK instead of silently taking the last call."""
    corr = columns["correlation"]
    call_rows = np.flatnonzero(is_kind(columns, "runtime") & (corr >= 0))
    ids, first, counts = np.unique(corr[call_rows], return_index=True, return_counts=True)
    launcher = np.full(len(columns), -1, dtype=np.int64)
    device_rows = np.flatnonzero(is_kind(columns, *DEVICE_KINDS) & (corr >= 0))
    if len(ids) and len(device_rows):
        at = np.minimum(np.searchsorted(ids, corr[device_rows]), len(ids) - 1)
        found = ids[at] == corr[device_rows]
        single = found & (counts[at] == 1)
        launcher[device_rows[single]] = call_rows[first[at[single]]]
        shared = device_rows[found & (counts[at] > 1)]
        if len(shared):
            damage = columns["damage"].copy()
            damage[shared] |= AMBIGUOUS_LINK
            columns["damage"] = damage
    columns["launcher"] = launcher


def _inherit_from_launcher(columns: EventColumns) -> None:
    """Device events take their host-side context from the call that launched them."""
    launcher = columns["launcher"]
    dev = np.flatnonzero(launcher >= 0)
    if not len(dev):
        return
    src = launcher[dev]
    for c in ("op", "top_op", "annotation", "module", "frame", "user_frame"):
        values = columns[c].copy()
        values[dev] = values[src]
        columns[c] = values
    thread_codes, threads = columns.coded("thread")
    thread_codes = thread_codes.copy()
    thread_codes[dev] = thread_codes[src]
    columns.set_coded("thread", thread_codes, threads)
    launch_ts = columns["launch_ts"].copy()
    launch_ts[dev] = launch_ts[src]
    columns["launch_ts"] = launch_ts
    # Device events on the same device share a device index: prefer the explicit arg, else the pid (read
    # once per distinct pid of those events).
    device = columns["device"].copy()
    pid_codes, pid_values = columns.coded("pid")
    no_device = np.flatnonzero(is_kind(columns, *DEVICE_KINDS) & (device < 0))
    if len(no_device):
        used, local = unique_codes(pid_codes[no_device], len(pid_values))
        device[no_device] = np.array([_int_or(v) for v in pid_values[used].tolist()], dtype=np.int64)[local]
    columns["device"] = device
    # A launch whose op was a dtype-changing copy is a cast; an otherwise unknown kernel launched through
    # the driver (cuLaunchKernel / cuLaunchKernelEx, as Triton does) is a Triton kernel. A call whose device
    # event blocks the host (a device-to-host copy into pageable memory) is a sync, whatever its name. Each
    # name is judged once; device rows are never launchers, so the rows' order does not matter.
    cat_codes, cat_values = columns.coded("category")
    cat_codes = cat_codes.copy()
    cat_values = cat_values.tolist()
    code = {c: i for i, c in enumerate(cat_values)}

    def code_of(category: str) -> int:
        if category not in code:
            code[category] = len(cat_values)
            cat_values.append(category)
        return code[category]

    name_codes, name_values = columns.coded("name")
    name_list = name_values.tolist()

    def by_name(rows: np.ndarray, test) -> np.ndarray:
        used, local = unique_codes(name_codes[rows], len(name_list))
        return np.array([bool(test(name_list[c])) for c in used.tolist()] or [False], dtype=bool)[local]

    other = code.get("other", -1)
    maybe_triton = dev[cat_codes[dev] == other] if other >= 0 else dev[:0]
    if len(maybe_triton):
        triton = maybe_triton[by_name(launcher[maybe_triton], names.is_triton_launch)]
        cat_codes[triton] = code_of("triton")
    if len(dev):
        syncing = src[by_name(dev, names.makes_launcher_sync)]
        cat_codes[syncing] = code_of("sync")
    copy = code.get("copy", -1)
    copies = dev[cat_codes[dev] == copy] if copy >= 0 else dev[:0]
    if len(copies):
        # Up the op chain from the launching op to the top op, all copies at once, a level per step.
        ops, top, parent = columns["op"], columns["top_op"], columns["parent_op"]
        is_cast = np.array([n in names.CASTING_OPS for n in name_list] or [False], dtype=bool)
        rows, op = copies, ops[copies]
        cast = np.zeros(len(columns), dtype=bool)
        while len(rows):
            live = op >= 0
            rows, op = rows[live], op[live]
            hit = is_cast[name_codes[op]]
            cast[rows[hit]] = True
            rows, op = rows[~hit], op[~hit]
            op = np.where(op != top[rows], parent[op], -1)
        cat_codes[cast] = code_of("cast")
    columns.set_coded("category", cat_codes, object_array(cat_values))


# Composite ops that only forward to a child: with no child below them they did nothing.
_FORWARDING_OPS = frozenset({"aten::contiguous", "aten::to", "aten::type_as", "aten::_to_copy", "aten::clone",
                             "aten::reshape", "aten::flatten", "aten::repeat_interleave"})


def _work_flags(columns: EventColumns) -> None:
    """Whether an op does work: device work on a GPU, compute on a CPU (not just allocation or views).

    An op in a working category does work; so does any op above a working op. A forwarding op
    (`contiguous`, `to`) with nothing below it was a no-op. Op-level (CPU) checks use this flag.
    """
    parent = columns["parent_op"]
    is_op = is_kind(columns, "op")
    op_rows = np.flatnonzero(is_op)
    has_child = np.zeros(len(columns), dtype=bool)
    child_parents = parent[op_rows]
    has_child[child_parents[child_parents >= 0]] = True
    name_codes, name_values = columns.coded("name")
    forwarding = np.array([n in _FORWARDING_OPS for n in name_values.tolist()] or [False], dtype=bool)
    seeds = is_op & ~category_mask(columns, ("alloc", "view")) & (has_child | ~forwarding[name_codes])
    # Every working op and every op above it: up the parent links a level at a time, stopping at ops
    # already marked (their own ancestors are marked through them).
    work = np.zeros(len(columns), dtype=bool)
    rows = np.flatnonzero(seeds)
    while len(rows):
        work[rows] = True
        rows = parent[rows]
        rows = rows[rows >= 0]
        rows = distinct_ints(rows[~work[rows]]) if len(rows) else rows
    columns["does_work"] = work


def _sources(columns: EventColumns) -> None:
    """`file.py:line` of each event's innermost user frame, worked out once per frame name."""
    user = columns["user_frame"]
    source = np.full(len(columns), None, dtype=object)
    rows = np.flatnonzero(user >= 0)
    name_codes, name_values = columns.coded("name")
    used, local = unique_codes(name_codes[user[rows]], len(name_values))
    texts = np.empty(len(used), dtype=object)
    for i, name in enumerate(name_values[used].tolist()):
        file, line, _func = names.frame_parts(name)
        texts[i] = f"{file}:{line}" if file else name
    source[rows] = texts[local]
    columns.set_object("source", source)   # None where there is no source
