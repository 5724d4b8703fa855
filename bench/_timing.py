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


def captured_graph(calls, warmup=None) -> torch.cuda.CUDAGraph:
    """A CUDA graph of ``calls`` (run in order), captured after ``warmup`` (default: the calls themselves) ran
    on a side stream, as capture requires (compiles and plans happen outside it); replayed once."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for call in calls if warmup is None else warmup:
            call()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for call in calls:
            call()
    graph.replay()
    torch.cuda.synchronize()
    return graph


def replay_median_ms(graph: torch.cuda.CUDAGraph, reps: int = REPS) -> float:
    """Median time of one replay of ``graph`` (CUDA events around it), over ``reps`` replays, ms."""
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def graph_median_ms(fn, calls_per_graph: int, reps: int = REPS) -> float:
    """Per-call time of ``fn`` replayed from a CUDA graph of ``calls_per_graph`` calls (median of ``reps``)."""
    graph = captured_graph([fn] * calls_per_graph, warmup=[fn] * 3)
    return replay_median_ms(graph, reps) / calls_per_graph


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
