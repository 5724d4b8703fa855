"""Bits of the event table's `damage` column: which essential fields of an event could not be used.

BAD_<field>: the field was missing or unusable (ts not a number, dur of a complete event missing, negative
or not a number, pid/tid not an integer or a name, an id not a non-negative integer). AMBIGUOUS_LINK: a
device event whose correlation id two or more runtime/driver calls share, so that which one launched it is
unknown (it is left unlinked). FRAME_OUTSIDE_PARENT: a Python frame that does not lie inside (same thread,
same interval) the frame its `Python parent id` names, or whose parent id names no frame: the time nesting
of frames cannot be trusted. BAD_NAME: an event whose name is missing or not a string; BAD_CAT: a complete
event without a category. kernlint.trace.damage counts them.
"""
from __future__ import annotations

(BAD_TS, BAD_DUR, BAD_PID, BAD_TID, BAD_CORRELATION, BAD_EXTERNAL_ID, AMBIGUOUS_LINK, FRAME_OUTSIDE_PARENT,
 BAD_NAME, BAD_CAT) = (1 << i for i in range(10))
BAD_FIELD_BITS = {"ts": BAD_TS, "dur": BAD_DUR, "pid": BAD_PID, "tid": BAD_TID, "name": BAD_NAME, "cat": BAD_CAT,
                  "correlation": BAD_CORRELATION, "external_id": BAD_EXTERNAL_ID}
UNPLACED = BAD_TS | BAD_PID | BAD_TID   # events left out of interval nesting: when or on which thread is unknown
