"""CUDA-graph attribution: what checking a replay trace with its capture trace costs, against the replay alone.

Pairs (fixtures/external, fixtures/traces/gpu-graphs):
  - TraceLens vLLM piecewise (MI300X): graph_execution (25 replays, 361 kernels) + graph_capture_rank_0
    (25 captures; 32 MB of JSON, 110K Python frames);
  - graph-decoder new_ones (H200): replay (3 replays, 204 kernels) + capture (2 captures);
  - xDiT-style (H200, capture and replay in one trace, each capture one GEMM longer than its replays: aligned).

For each, in this process, best of --repeat: `load_trace(replay)` (the anchor), `load_trace(replay,
captures=[capture])` (merge + attribution), and `load_trace(capture)` alone (what loading the capture costs by
itself), then the share of replayed kernels and device time attributed. Then pairing by content
(`pair_captures` on the four traces of two graph configurations, fixtures/traces/graph-pairing), and the
alignment alone at xDiT's sizes (kernlint.trace.graph_align: 993- and 1,566-kernel graphs, a GEMM fewer than
their captures; 200 replays against 40 captures of similar length, named kernels (ROCm) and unnamed launches
(CUDA, the op's category only)). Prints tables; asserts nothing.

Usage: python bench/bench_graph_attribution.py [--repeat 3]
"""
from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from kernlint.trace.graphs import graph_replays  # noqa: E402
from kernlint.trace.load import load_trace  # noqa: E402

EXTERNAL = REPO / "fixtures" / "external"
GRAPHS = REPO / "fixtures" / "traces" / "gpu-graphs"
PAIRING = REPO / "fixtures" / "traces" / "graph-pairing"
VLLM = (EXTERNAL / "tracelens__vllm_piecewise__graph_execution.json.gz",
        EXTERNAL / "tracelens__vllm_piecewise__graph_capture_rank_0.1773709679453551615.pt.trace.json.gz")
PAIRS = {
    "vLLM piecewise (TraceLens)": VLLM,
    "graph-decoder new_ones (H200)": (GRAPHS / "graph-new-ones-replay.pt.trace.json.gz",
                                      GRAPHS / "graph-new-ones-capture.pt.trace.json.gz"),
    "xDiT-style, in one trace (H200)": (GRAPHS / "graph-new-ones-xdit-style.pt.trace.json.gz", None),
}


def best(fn, repeat: int) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return min(times), out


def _loads(repeat: int) -> None:
    print(f"{'pair':32} {'replay alone s':>14} {'with capture s':>14} {'ratio':>6} {'capture alone s':>15} "
          f"{'kernels':>8} {'attributed':>10} {'device time':>11}")
    for name, (replay, capture) in PAIRS.items():
        if not replay.exists():
            print(f"{name:32} (missing {replay.name})")
            continue
        captures = [capture] if capture else []
        alone, _ = best(lambda: load_trace(replay), repeat)
        merged, table = best(lambda: load_trace(replay, captures=captures), repeat)
        cap, _ = best(lambda: load_trace(capture), repeat) if capture else (float("nan"), None)
        g = graph_replays(table)
        print(f"{name:32} {alone:14.3f} {merged:14.3f} {merged / alone:6.2f} {cap:15.3f} {g.kernels:8d} "
              f"{100 * g.attributed_kernels / g.kernels:9.1f}% {100 * g.attributed_device_us / g.device_us:10.1f}%")


def _pairing(repeat: int) -> None:
    from kernlint.trace.pairing import pair_captures

    files = [*VLLM, *sorted(PAIRING.glob("*.json.gz"))]
    if not all(f.exists() for f in files):
        return
    took, pairing = best(lambda: pair_captures(files, 1 << 31), repeat)
    print(f"\npairing by content, 4 traces (2 replay, 2 capture): {took:.3f} s; "
          f"{len(pairing.captures)} replay trace(s) paired")


def _alignment(repeat: int) -> None:
    try:
        from kernlint.trace.graph_align import KernelTokens, LaunchTokens, Vocabulary, align, default_max_edits
    except ImportError:   # before issue 36: exact matching only
        return
    rng = random.Random(36)
    kinds = [f"kernel_{i}" for i in range(60)]
    print(f"\n{'alignment (xDiT sizes)':32} {'graph':>6} {'captures':>8} {'replays':>7} "
          f"{'all s':>7} {'per replay ms':>13} {'matched':>8}")
    for size in (993, 1566):
        for named in (True, False):
            vocab = Vocabulary()
            graphs = []
            for _ in range(40):   # 40 captures: sizes around the graph's (a batch size each)
                n = size + rng.randint(-30, 30)
                graphs.append([rng.choice(kinds) for _ in range(n)])
            target = graphs[7]
            launches = [LaunchTokens.make(["kernel"] * len(g), g if named else [""] * len(g),
                                          ["gemm" if k.endswith("7") else None for k in g], vocab) for g in graphs]
            replayed = target[:-1]   # the capture minus its last launch (xDiT: its last GEMM)
            kernels = KernelTokens.make(["kernel"] * len(replayed), replayed,
                                        ["gemm" if k.endswith("7") else "other" for k in replayed], vocab)

            def match_all():
                cache = {}
                found = None
                for _ in range(200):   # replays of one graph share the answer (kernlint.trace.graphs caches it)
                    key = kernels.key()
                    if key not in cache:
                        fewest, hit = None, None
                        for a in launches:
                            limit = default_max_edits(len(a), len(kernels))
                            got = align(a, kernels, limit if fewest is None else min(limit, fewest))
                            if got is not None and (fewest is None or got.edits < fewest):
                                fewest, hit = got.edits, got
                        cache[key] = hit
                    found = cache[key]
                return found

            total, found = best(match_all, repeat)
            print(f"{'named' if named else 'unnamed (CUDA)':32} {size:6d} {len(launches):8d} {200:7d} "
                  f"{total:7.3f} {1000 * total / 200:13.3f} {found.matched if found else 0:8d}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    _loads(args.repeat)
    _pairing(args.repeat)
    _alignment(args.repeat)
    return 0


if __name__ == "__main__":
    sys.exit(main())
