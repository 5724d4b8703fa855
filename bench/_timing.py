"""Shared GPU timing for the bench scripts: per-call time from CUDA-graph replays (launch overhead out)."""
from __future__ import annotations

import statistics

import torch

REPS = 20


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
