"""CUDA-graph attribution: what checking a replay trace with its capture trace costs, against the replay alone.

Pairs (fixtures/external, fixtures/traces/gpu-graphs):
  - TraceLens vLLM piecewise (MI300X): graph_execution (25 replays, 361 kernels) + graph_capture_rank_0
    (25 captures; 32 MB of JSON, 110K Python frames);
  - graph-decoder new_ones (H200): replay (3 replays, 204 kernels) + capture (2 captures).

For each pair, in this process, best of --repeat: `load_trace(replay)` (the anchor), `load_trace(replay,
captures=[capture])` (merge + attribution), and `load_trace(capture)` alone (what loading the capture costs by
itself), then the share of replayed kernels and device time attributed. Prints a table; asserts nothing.

Usage: python bench/bench_graph_attribution.py [--repeat 3]
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from kernlint.trace.graphs import graph_replays  # noqa: E402
from kernlint.trace.load import load_trace  # noqa: E402

EXTERNAL = REPO / "fixtures" / "external"
GRAPHS = REPO / "fixtures" / "traces" / "gpu-graphs"
PAIRS = {
    "vLLM piecewise (TraceLens)": (EXTERNAL / "tracelens__vllm_piecewise__graph_execution.json.gz",
                                   EXTERNAL / "tracelens__vllm_piecewise__graph_capture_rank_0.1773709679453551615"
                                              ".pt.trace.json.gz"),
    "graph-decoder new_ones (H200)": (GRAPHS / "graph-new-ones-replay.pt.trace.json.gz",
                                      GRAPHS / "graph-new-ones-capture.pt.trace.json.gz"),
}


def best(fn, repeat: int) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return min(times), out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    print(f"{'pair':32} {'replay alone s':>14} {'with capture s':>14} {'ratio':>6} {'capture alone s':>15} "
          f"{'kernels':>8} {'attributed':>10} {'device time':>11}")
    for name, (replay, capture) in PAIRS.items():
        alone, _ = best(lambda: load_trace(replay), args.repeat)
        merged, table = best(lambda: load_trace(replay, captures=[capture]), args.repeat)
        cap, _ = best(lambda: load_trace(capture), args.repeat)
        g = graph_replays(table)
        print(f"{name:32} {alone:14.3f} {merged:14.3f} {merged / alone:6.2f} {cap:15.3f} {g.kernels:8d} "
              f"{100 * g.attributed_kernels / g.kernels:9.1f}% {100 * g.attributed_device_us / g.device_us:10.1f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
