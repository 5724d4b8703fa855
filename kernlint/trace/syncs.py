"""When an op that reads device values on the host (names-table category `sync_op`) is a device sync.

`aten::item` / `_local_scalar_dense` (and the ops that call them) stall the host only when the value is on a
device. The trace says so in two ways:
- where it records a device runtime (CUDA, HIP, or another device's runtime category), by what runs under the
  op: a synchronize or a device copy (runtime categories `sync`, `memcpy_call`), or a device-to-host copy on the
  device launched while it ran (an MTIA `aten::equal` waits on two DMAs whose runtime calls no table names).
  An item with none under it read a CPU tensor: the value lifted by `x[mask] = 0.5`, a 0-dim scalar argument,
  MTIA host code;
- where it records none (a CPU-only run, or a run recorded with CPU activity only), it cannot; the op counts,
  unless it is a scalar read (`@scalar-read-op`) under an op that is not itself a sync: `aten::mul` given a
  0-dim tensor argument reads that CPU scalar on any device.
Kineto records no device per input, so a CPU-only trace cannot tell a device tensor's `.item()` from a CPU
tensor's: there the op is counted (the audit on a CPU stands in for the GPU run).
"""
from __future__ import annotations

import numpy as np

from kernlint.trace import names
from kernlint.trace.patterns import compile_pattern
from kernlint.trace.scopes import ScopeIndex

SYNC_OP_CATEGORY = "sync_op"
# Calls that show a device read under the op: a synchronize or blocking copy, or any device copy (a trace
# without device events cannot say which copies block; an item's copy is its device-to-host read).
EVIDENCE_CALL_CATEGORIES = frozenset({"sync", "memcpy_call"})


def records_device_runtime(index: ScopeIndex) -> bool:
    return len(index.rows_of(("runtime",))) > 0


def _copies_to_host(index: ScopeIndex, op: int) -> bool:
    """Whether a device-to-host copy was launched while the op ran (by a runtime call the names table does not
    know as a copy: MTIA's DMAs under `aten::equal`)."""
    rows = index.device_events_between(index.thread[op], float(index.ts[op]), float(index.end[op]))
    return bool(len(rows)) and bool(np.any(np.char.startswith(index.category[rows].astype(str), "memcpy_dtoh")))


def unconfirmed_sync_ops(index: ScopeIndex) -> np.ndarray:
    """A mask over the table's rows: the sync ops that the trace shows not to be device syncs."""
    found = index.memo.get("unconfirmed-sync-ops")
    if found is not None:
        return found
    n = len(index.kind)
    mask = np.zeros(n, dtype=bool)
    ops = index.rows_of(("op",))
    candidates = ops[index.category[ops] == SYNC_OP_CATEGORY] if len(ops) else ops
    if len(candidates):
        if records_device_runtime(index):
            calls = index.rows_of(("runtime",))
            calls = calls[np.isin(index.category[calls], list(EVIDENCE_CALL_CATEGORIES))]
            by_thread: dict[object, np.ndarray] = {}
            for thread in set(index.thread[calls].tolist()):
                mine = calls[index.thread[calls] == thread]
                by_thread[thread] = np.sort(index.ts[mine].astype(float))
            for r in candidates.tolist():
                starts = by_thread.get(index.thread[r])
                if starts is None:
                    mask[r] = not _copies_to_host(index, r)
                    continue
                i = int(np.searchsorted(starts, index.ts[r], "left"))
                mask[r] = not (i < len(starts) and starts[i] < index.end[r]) and not _copies_to_host(index, r)
        else:
            scalar_read = compile_pattern(names.named_pattern("scalar-read-op"))
            for r in candidates.tolist():
                if not scalar_read.search(str(index.name[r])):
                    continue
                parent = int(index.parent_op[r])
                while parent >= 0 and scalar_read.search(str(index.name[parent])):
                    parent = int(index.parent_op[parent])
                mask[r] = parent >= 0 and index.category[parent] != SYNC_OP_CATEGORY
    mask.flags.writeable = False
    index.memo["unconfirmed-sync-ops"] = mask
    return mask
