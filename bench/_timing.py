"""Shared GPU timing for the bench scripts.

``graph_median_ms``: per-call device time from CUDA-graph replays (launch overhead out).
``eager_us``: per-call time of back-to-back eager calls, host included: N calls, one synchronize at the
end, wall clock / N (whichever of host or device is slower sets it).
"""
from __future__ import annotations

import statistics
import time

import torch

REPS = 20
EAGER_CALLS = 300
EAGER_REPS = 7


def graph_median_ms(fn, calls_per_graph: int, reps: int = REPS) -> float:
    """Per-call time of ``fn`` replayed from a CUDA graph of ``calls_per_graph`` calls (median of ``reps``)."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):  # warm up on a side stream, as graph capture requires
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls_per_graph):
            fn()
    graph.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / calls_per_graph)
    return statistics.median(times)


def eager_us(fn, calls: int = EAGER_CALLS, reps: int = EAGER_REPS, warmup: int = 20) -> float:
    """Per-call wall time in us of ``calls`` back-to-back eager calls plus one final synchronize (median of
    ``reps``); host time included."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
        times.append((time.perf_counter() - start) / calls)
    return statistics.median(times) * 1e6
