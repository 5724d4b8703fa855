"""What allocations hold: the dtype of each `[memory]` allocation (from the op that made it: a factory op's
dtype argument, else its first input's type, else the nearest op above it that says), its device, and the
pairing of each allocation with its free by device and address (the table's `dtype`, `device`, `paired`)."""
from __future__ import annotations

import numpy as np

from kernlint.trace.arrays import object_array, sorted_order
from kernlint.trace.columns import OpArgsStore
from kernlint.trace.dtypes import HOST_DEVICE_TYPE_CODES, dtype_from_code, dtype_from_input_type
from kernlint.trace.event_columns import EventColumns
from kernlint.trace.kinds import is_kind
from kernlint.trace.schema import raw_list

# Which `Concrete Inputs` position holds the dtype, for factory ops whose output an allocation is.
_DTYPE_ARG_POSITION = {
    "aten::empty": 1, "aten::empty_strided": 2, "aten::empty_like": 1, "aten::new_empty": 2,
    "aten::new_empty_strided": 3, "aten::zeros": 1, "aten::ones": 1, "aten::full": 2, "aten::zeros_like": 1,
    "aten::ones_like": 1, "aten::full_like": 2, "aten::new_zeros": 2, "aten::new_ones": 2,
    "aten::new_full": 3, "aten::_to_copy": 1, "aten::empty_permuted": 2, "aten::randn": 1, "aten::rand": 1,
}


def allocation_dtypes_and_pairs(columns: EventColumns, store: OpArgsStore | None) -> None:
    """dtype of each allocation from its enclosing op; alloc <-> free pairing by device and address."""
    n = len(columns)
    dtype = np.full(n, "", dtype=object)
    is_alloc = is_kind(columns, "alloc")
    alloc_rows = np.flatnonzero(is_alloc)
    if len(alloc_rows):   # once per allocating op
        owners, owner_of = np.unique(columns["op"][alloc_rows], return_inverse=True)
        found = _op_output_dtypes(owners, columns["name"], store, columns["parent_op"])
        dtype[alloc_rows] = object_array([d or "" for d in found])[owner_of.reshape(-1)]
    # Memory events: device index from Device Id for any accelerator (CUDA 1, HIP 6, XPU 12, MPS 13, MTIA 19,
    # ...), -1 for host memory (Device Type 0). The codes are c10's DeviceType (kernlint.trace.dtypes).
    device = columns["device"].copy()
    dev_type = columns["device_type"]
    mem = np.flatnonzero(is_alloc | is_kind(columns, "free"))
    device[mem] = np.where(np.isin(dev_type[mem], list(HOST_DEVICE_TYPE_CODES)), -1, device[mem])
    columns["device"] = device
    paired = np.full(n, -1, dtype=np.int64)
    addr = columns["addr"]
    ts = columns["ts"]
    mem = mem[np.isfinite(ts[mem])]  # an allocation with no usable time cannot be paired
    # In time order, each (device, address) is open from an alloc to the next free: a free pairs with the
    # event just before it on its address when that is an alloc (a later alloc replaces an open one).
    mem = mem[np.argsort(ts[mem], kind="stable")]
    mem = mem[sorted_order(addr[mem], device[mem])]   # by address, each address's events in time order
    if len(mem) > 1:
        same = (device[mem[1:]] == device[mem[:-1]]) & (addr[mem[1:]] == addr[mem[:-1]])
        pair = same & ~is_alloc[mem[1:]] & is_alloc[mem[:-1]]
        frees, allocs = mem[1:][pair], mem[:-1][pair]
        paired[allocs] = frees
        paired[frees] = allocs
        dtype[frees] = dtype[allocs]
    columns["dtype"] = dtype
    columns["paired"] = paired


def _op_output_dtypes(ops: np.ndarray, names_, store: OpArgsStore | None, parent) -> list[str | None]:
    """_op_output_dtype of each of `ops` (distinct, ascending): the ops' own arguments found in one search and
    each form of them decoded once; a walk up the parents only from the ops whose own arguments say nothing."""
    by_args: dict[tuple, str | None] = {}
    own: list[str | None] = [None] * len(ops)
    if store is not None and len(store.rows) and len(ops):
        at = np.minimum(np.searchsorted(store.rows, ops), len(store.rows) - 1)
        hit = np.flatnonzero(store.rows[at] == ops)
        blob = store.blob
        offsets = store.offsets[at[hit]]
        # Ops repeat: a form is the name with Input type and Concrete Inputs (adjacent in the buffer). The
        # forms are told apart by dicts and maps, not a Python loop per op.
        both = list(map(blob.__getitem__, map(slice, offsets[:, 1].tolist(), offsets[:, 3].tolist())))
        forms = list(zip(names_[ops[hit]].tolist(), both, (offsets[:, 2] - offsets[:, 1]).tolist()))
        first = dict(zip(reversed(forms), range(len(forms) - 1, -1, -1)))   # each form's first op
        decoded = {}
        for form, i in first.items():
            name, (o0, o1, o2, o3, o4) = form[0], offsets[i].tolist()
            decoded[form] = by_args[(name, blob[o2:o3], blob[o1:o2])] = _dtype_from_args(
                name, (blob[o0:o1], blob[o1:o2], blob[o2:o3], blob[o3:o4]))
        for i, found in zip(hit.tolist(), map(decoded.__getitem__, forms)):
            own[i] = found
    if all(own):
        return own
    memo = {op: found for op, found in zip(ops.tolist(), own) if found}
    return [found or _op_output_dtype(op, names_, store, parent, memo, by_args)
            for found, op in zip(own, ops.tolist())]


def _op_output_dtype(op: int, names_, store: OpArgsStore | None, parent, memo: dict, by_args: dict) -> str | None:
    """Best guess of the dtype an op allocates: the dtype argument of a factory op, else its first input's."""
    start, seen = op, []
    found = None
    while op >= 0:
        if op in memo:
            found = memo[op]
            break
        seen.append(op)
        found = _own_output_dtype(op, names_[op], store, by_args)
        if found:
            break
        op = parent[op]
    for o in seen:   # what the walk found from each op it passed is what a walk from there would find
        memo[o] = found
    return memo.get(start, found)


def _own_output_dtype(op: int, name: str, store: OpArgsStore | None, seen: dict) -> str | None:
    fields = store.fields(op) if store is not None else None
    if not fields:
        return None
    key = (name, fields[OpArgsStore.CONCRETE], fields[OpArgsStore.TYPES])   # ops repeat: decode each form once
    if key not in seen:
        seen[key] = _dtype_from_args(name, fields)
    return seen[key]


def _dtype_from_args(name: str, fields) -> str | None:
    pos = _DTYPE_ARG_POSITION.get(name)
    if pos is not None:
        ci = raw_list(fields[OpArgsStore.CONCRETE])
        if pos < len(ci):
            found = dtype_from_code(ci[pos])
            if found:
                return found
    if pos is not None or not name.startswith("aten::empty"):
        for t in raw_list(fields[OpArgsStore.TYPES]):
            found = dtype_from_input_type(t) if isinstance(t, str) else None
            if found:
                return found
    return None
