"""Where a rule's anchors are: kernel-level ones where the trace has GPU events and a kernel matches, else
op-level ones (forbid-before-anchor, require-anchor)."""
from __future__ import annotations

import numpy as np

from kernlint.trace import names
from kernlint.trace.kinds import DEVICE_KINDS
from kernlint.trace.rows import drop_nested, rows_matching


def find_anchors(rule, table, index) -> tuple[str | None, np.ndarray]:
    """Kernel-level anchors where the trace has GPU events and a kernel matches; else op-level ones."""
    anchor = rule.spec.anchor
    if anchor.kernel and table.has_device_events:
        rows = rows_matching(index, DEVICE_KINDS, anchor.kernel)
        # Inductor names its kernels after the ops it fused: a name that merely contains the anchor's is not one.
        generated = rows_matching(index, DEVICE_KINDS, names.named_pattern("inductor-generated-kernel"))
        rows = np.setdiff1d(rows, generated, assume_unique=True) if len(generated) else rows
        if len(rows):
            return "kernel", rows
    if anchor.op:
        rows = drop_nested(index, rows_matching(index, ("op", "annotation"), anchor.op))
        if len(rows):
            return "op", rows
    return None, np.empty(0, dtype=np.int64)
