"""The first trace source: kineto's Chrome-trace JSON (torch.profiler, plain or gzipped).

Its reading is kernlint.trace.load's (bounded reading, the streamed event array, capture merging and
PyTorch's graph evidence); this module only declares it. It pairs capture traces with replay traces
(kernlint.trace.pairing) and merges them (`captures=`, `outside_captures=`).
"""
from __future__ import annotations

from kernlint.trace import load
from kernlint.trace.sources import TraceSource, register

_JSON_START = (b"{", b"[")


def sniff(head: bytes) -> bool:
    """A JSON object or array (after a byte-order mark and white space): kineto's, or no trace at all (its
    reading then says why)."""
    return head.lstrip(b"\xef\xbb\xbf \t\r\n")[:1] in _JSON_START


KINETO = register(TraceSource(
    name="kineto",
    summary="torch.profiler / kineto Chrome-trace JSON (.json, .json.gz)",
    suffixes=load.JSON_SUFFIXES,
    sniff=sniff,
    read=load.read_kineto_trace,
    recognize=load.sniff_trace,
    pairs_captures=True,
    merges_captures=True,
))
