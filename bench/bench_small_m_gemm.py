#!/usr/bin/env python3
"""Decode-size FP8 block-scaled GEMM (issue 26, item 3): ours against the anchors, side by side.

For each (N, K) of the issue and M = 1, 16, 64, under CUDA-graph replay:
  * kernel device time (torch.profiler, median over the replays) of our Triton GEMM, of cuBLAS block-wise
    ``torch._scaled_mm`` (M padded to 4, as the layer pads) and of a bf16 ``x @ w.t()``;
  * the time to read the FP8 weight at HBM bandwidth (``--hbm-tbps``, 4.8 TB/s on the H200) and our
    achieved weight bandwidth.
Two weight residencies: "cold" cycles through enough weight copies that none is in L2 when it is read
(as in a model, where every layer has its own weight); "warm" reads one weight again and again (it stays
in the 50 MB L2 of an H200, so it can beat HBM).

Then the whole FP8 layer (``Fp8BlockLinear``: quant kernel + GEMM) against bf16 ``x @ w.t()``: per-call
time under graphs (cold, CUDA events over the graph) and eagerly (host included), and at M = 4096 the
layer's GEMM against cuBLAS block-wise.

    python bench/bench_small_m_gemm.py            # the tables
    python bench/bench_small_m_gemm.py --sweep    # the config sweep behind gemm_config's constants
"""
from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import torch

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))
sys.path.insert(0, str(REPO_ROOT / "bench"))
from _timing import captured_graph, eager_us, replay_median_ms  # noqa: E402

NKS = ((7168, 2048), (4096, 7168), (24576, 1536), (8192, 2048), (2048, 4096), (7168, 7168))
MS = (1, 16, 64)
REPLAYS = 20


def stream_read_kernel():
    """A Triton kernel that only reads: each program loads 16 KB and writes one int (the read floor with a
    kernel launch, for the same bytes as the weight)."""
    import triton
    import triton.language as tl

    @triton.jit
    def read_kernel(src_ptr, out_ptr, numel, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        values = tl.load(src_ptr + offs, mask=offs < numel, other=0)
        tl.store(out_ptr + tl.program_id(0), tl.sum(values, axis=0))

    def read(src: torch.Tensor, out: torch.Tensor) -> None:
        words = src.view(torch.int32)
        block = 4096
        read_kernel[(triton.cdiv(words.numel(), block),)](words, out, words.numel(), BLOCK=block)

    return read


def copies_for_cold(weight_bytes: int) -> int:
    """Enough copies that the ones read in between evict a weight from L2 before it is read again."""
    l2 = getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 50 << 20)
    return max(2, -(-3 * l2 // weight_bytes))


def kernel_us(calls, replays: int = REPLAYS) -> dict[str, float]:
    """Median device time per kernel name of the graph of ``calls``, over ``replays`` replays."""
    graph = captured_graph(calls)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(replays):
            graph.replay()
        torch.cuda.synchronize()
    times: dict[str, list[float]] = {}
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            times.setdefault(e.name, []).append(e.time_range.elapsed_us())
    return {name: statistics.median(t) for name, t in times.items()}


def graph_call_us(calls, replays: int = REPLAYS) -> float:
    """Per-call time from CUDA events around whole replays (kernels and the gaps between them)."""
    return replay_median_ms(captured_graph(calls), replays) * 1e3 / len(calls)


def total_us(times: dict[str, float], skip: tuple[str, ...] = ()) -> float:
    return sum(t for name, t in times.items() if not any(s in name for s in skip))


class Shape:
    """Weights (FP8 with scales, and bf16) for one (N, K), in as many copies as a cold read needs."""

    def __init__(self, n: int, k: int, cold: bool):
        from kernlint.reference import Fp8BlockLinear

        self.n, self.k = n, k
        w = torch.randn(n, k, device="cuda") / k ** 0.5
        self.layers = [Fp8BlockLinear.from_float(w) for _ in range(copies_for_cold(n * k) if cold else 1)]
        self.w_bf16 = [w.to(torch.bfloat16) for _ in range(copies_for_cold(2 * n * k) if cold else 1)]


def gemm_table(hbm_tbps: float, cold: bool) -> None:
    from kernlint.reference import scale_1x128
    from kernlint.reference._triton_gemm import block_scaled_mm_triton, gemm_config

    print(f"GEMM kernel device time under CUDA-graph replay, us (median of {REPLAYS} replays; weights "
          f"{'cold: a copy per call, L2 evicted in between' if cold else 'warm: one weight, L2-resident'})")
    header = (f"{'M':>3s} {'N':>6s} {'K':>5s} | {'weight@HBM':>10s} {'read-only':>9s} {'ours':>7s} {'TB/s':>5s} "
              f"{'/HBM':>5s} {'/read-only':>10s} | {'cuBLAS bw':>9s} {'bf16':>7s} | {'ours/cuBLAS':>11s} "
              f"{'ours/bf16':>9s} | config")
    read = stream_read_kernel()
    print(header)
    print("-" * len(header))
    for n, k in NKS:
        shape = Shape(n, k, cold)
        read_us = n * k / (hbm_tbps * 1e6)
        sink = torch.empty(n * k // (4 * 4096) + 1, dtype=torch.int32, device="cuda")
        read_only = total_us(kernel_us([lambda L=L: read(L.weight, sink) for L in shape.layers]))
        for m in MS:
            x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
            x_q, x_s = scale_1x128(x, column_major_scales=True, pad_rows_to=1)
            x_q4, x_s4 = scale_1x128(x, column_major_scales=True, pad_rows_to=4)
            ours = kernel_us([lambda L=L: block_scaled_mm_triton(x_q, x_s, L.weight, L.weight_scale, torch.bfloat16)
                              for L in shape.layers])
            cublas = kernel_us([lambda L=L: torch._scaled_mm(x_q4, L.weight.t(), scale_a=x_s4,
                                                             scale_b=L.weight_scale.t(), out_dtype=torch.bfloat16)
                                for L in shape.layers])
            bf16 = kernel_us([lambda w=w: x @ w.t() for w in shape.w_bf16])
            t_ours, t_cublas, t_bf16 = total_us(ours), total_us(cublas), total_us(bf16)
            print(f"{m:3d} {n:6d} {k:5d} | {read_us:10.2f} {read_only:9.2f} {t_ours:7.2f} {n * k / t_ours / 1e6:5.2f} "
                  f"{t_ours / read_us:5.2f} {t_ours / read_only:10.2f} | {t_cublas:9.2f} {t_bf16:7.2f} | "
                  f"{t_ours / t_cublas:11.2f} "
                  f"{t_ours / t_bf16:9.2f} | {gemm_config(m, n, k, 0)}", flush=True)
        del shape
        torch.cuda.empty_cache()


def layer_table() -> None:
    print("FP8 layer (Fp8BlockLinear: scale_1x128 + GEMM) vs bf16 x @ w.t(), per call, us. graph: CUDA events "
          "over a replayed graph of one call per weight copy (cold); eager: back-to-back calls, host included")
    header = (f"{'M':>4s} {'N':>6s} {'K':>5s} | {'fp8 graph':>9s} {'bf16 graph':>10s} {'bf16/fp8':>8s} | "
              f"{'fp8 eager':>9s} {'bf16 eager':>10s} {'bf16/fp8':>8s}")
    print(header)
    print("-" * len(header))
    with torch.no_grad():
        for n, k in NKS:
            shape = Shape(n, k, cold=True)
            for m in (1, 16, 64):
                x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
                fp8_g = graph_call_us([lambda L=L: L(x) for L in shape.layers])
                bf16_g = graph_call_us([lambda w=w: x @ w.t() for w in shape.w_bf16])
                layer, w = shape.layers[0], shape.w_bf16[0]
                fp8_e = eager_us(lambda: layer(x))
                if m == 16:
                    plans = [p for p in layer._cuda_plans.values() if hasattr(p, "gemm")]
                    print("  plans: " + "; ".join(f"gemm {p.gemm.config} direct C launch "
                                                   f"{p.gemm.kernel is not None and p.gemm.kernel.direct}"
                                                   for p in plans))
                bf16_e = eager_us(lambda: x @ w.t())
                print(f"{m:4d} {n:6d} {k:5d} | {fp8_g:9.2f} {bf16_g:10.2f} {bf16_g / fp8_g:8.2f} | "
                      f"{fp8_e:9.2f} {bf16_e:10.2f} {bf16_e / fp8_e:8.2f}", flush=True)
            del shape
            torch.cuda.empty_cache()


def host_ab_table() -> None:
    """Eager host cost of the split: one layer planned with split K, one with K unsplit, measured in turns."""
    from kernlint.reference import Fp8BlockLinear, _triton_gemm

    rounds = 7
    print(f"eager per call at M = 16, host included (300 back-to-back calls + sync), us: the layer with split K "
          f"(default) and with K unsplit, measured in turns, median of {rounds} rounds; bf16 x @ w.t() alongside")
    header = f"{'N':>6s} {'K':>5s} | {'split':>6s} {'unsplit':>7s} {'split/unsplit':>13s} | {'bf16':>6s}"
    print(header)
    print("-" * len(header))
    with torch.no_grad():
        for n, k in NKS:
            w = torch.randn(n, k, device="cuda") / k ** 0.5
            split_layer, unsplit_layer = Fp8BlockLinear.from_float(w), Fp8BlockLinear.from_float(w)
            w_bf16 = w.to(torch.bfloat16)
            x = torch.randn(16, k, device="cuda", dtype=torch.bfloat16)
            split_layer(x)
            saved = dict(_triton_gemm.PROGRAMS_PER_SM)
            _triton_gemm.PROGRAMS_PER_SM.update(dict.fromkeys(saved, 0))
            unsplit_layer(x)   # planned now: K unsplit
            _triton_gemm.PROGRAMS_PER_SM.update(saved)
            split_us, unsplit_us, bf16_us = [], [], []
            for _ in range(rounds):
                split_us.append(eager_us(lambda: split_layer(x), reps=1))
                unsplit_us.append(eager_us(lambda: unsplit_layer(x), reps=1))
                bf16_us.append(eager_us(lambda: x @ w_bf16.t(), reps=1))
            a, b, c = (statistics.median(t) for t in (split_us, unsplit_us, bf16_us))
            print(f"{n:6d} {k:5d} | {a:6.2f} {b:7.2f} {a / b:13.2f} | {c:6.2f}", flush=True)


def large_m_table() -> None:
    from kernlint.reference import Fp8BlockLinear, scale_1x128

    print("M = 4096: the layer's GEMM (cuBLAS block-wise above M = 64) vs _scaled_mm called directly, "
          "kernel device time, us")
    m = 4096
    for n, k in NKS[:3]:
        layer = Fp8BlockLinear.from_float(torch.randn(n, k, device="cuda") / k ** 0.5)
        x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        x_q, x_s = scale_1x128(x, column_major_scales=True, pad_rows_to=4)
        with torch.no_grad():
            ours = kernel_us([lambda: layer(x)], replays=10)
        direct = kernel_us([lambda: torch._scaled_mm(x_q, layer.weight.t(), scale_a=x_s,
                                                     scale_b=layer.weight_scale.t(), out_dtype=torch.bfloat16)],
                           replays=10)
        t_ours, t_direct = total_us(ours, skip=("scale_1x128",)), total_us(direct)
        print(f"  N={n} K={k}: layer GEMM {t_ours:.1f} us ({2 * m * n * k / t_ours / 1e6:.0f} TFLOP/s), "
              f"_scaled_mm {t_direct:.1f} us, ratio {t_ours / t_direct:.2f}", flush=True)


def sweep(hbm_tbps: float, ms: tuple[int, ...]) -> None:
    from kernlint.reference import scale_1x128
    from kernlint.reference._triton_gemm import block_scaled_mm_triton, gemm_config

    print("config sweep (cold weights, kernel device time, us): best five per (M, N, K) and the default")
    for n, k in NKS:
        shape = Shape(n, k, cold=True)
        read_us = n * k / (hbm_tbps * 1e6)
        for m in ms:
            x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
            x_q, x_s = scale_1x128(x, column_major_scales=True, pad_rows_to=1)
            default = gemm_config(m, n, k, 0)
            block_ms = (16,) if m <= 16 else (32, 64)
            configs = {(bm, bn, warps, 3, sk) for bm in block_ms for bn in (32, 64) for warps in (4, 8)
                       for sk in (1, 2, 4, 8) if sk <= k // 128}
            configs.add(default)
            results = []
            for cfg in sorted(configs):
                try:
                    t = total_us(kernel_us([lambda L=L, c=cfg: block_scaled_mm_triton(
                        x_q, x_s, L.weight, L.weight_scale, torch.bfloat16, config=c) for L in shape.layers],
                        replays=5))
                except Exception as exc:   # a config that does not compile or fit
                    print(f"  {cfg}: {type(exc).__name__}: {str(exc)[:100]}")
                    continue
                results.append((t, cfg))
            results.sort()
            best = results[0][0]
            line = ", ".join(f"{cfg} {t:.2f}" for t, cfg in results[:5])
            t_default = next(t for t, cfg in results if cfg == default)
            print(f"M={m} N={n} K={k} read {read_us:.2f}: {line}; default {default} {t_default:.2f} "
                  f"({t_default / best:.2f}x best)", flush=True)
        del shape
        torch.cuda.empty_cache()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sweep", action="store_true", help="the config sweep instead of the tables")
    parser.add_argument("--hbm-tbps", type=float, default=4.8, help="HBM bandwidth for the weight-read column")
    parser.add_argument("--only", choices=("gemm", "layer", "host", "large"), help="one table")
    parser.add_argument("--sweep-ms", default="16,64", help="the M values the sweep tries (comma-separated)")
    parser.add_argument("--no-pdl", action="store_true",
                        help="no programmatic dependent launch (quant and GEMM one after the other): its A/B")
    parser.add_argument("--no-split-k", action="store_true",
                        help="K never split (gemm_config's split-K off): the A/B of the split")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("bench_small_m_gemm: needs a CUDA GPU (none found); nothing measured.")
        return 0
    import triton

    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, triton {triton.__version__}")
    if args.no_pdl:
        from kernlint.reference import _launch

        _launch.USE_PDL = False
        print("programmatic dependent launch off")
    if args.no_split_k:
        from kernlint.reference import _triton_gemm

        _triton_gemm.PROGRAMS_PER_SM = dict.fromkeys(_triton_gemm.PROGRAMS_PER_SM, 0)
        print("split-K off")
    if args.sweep:
        sweep(args.hbm_tbps, tuple(int(m) for m in args.sweep_ms.split(",")))
        return 0
    if args.only in (None, "gemm"):
        gemm_table(args.hbm_tbps, cold=True)
        print()
        gemm_table(args.hbm_tbps, cold=False)
        print()
    if args.only in (None, "layer"):
        layer_table()
        print()
    if args.only in (None, "host"):
        host_ab_table()
        print()
    if args.only in (None, "large"):
        large_m_table()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
