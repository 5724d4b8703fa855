#!/usr/bin/env python3
"""Quantize-in-GEMM (one Triton kernel) against "GEMM alone plus quant": ``scale_1x128`` + cuBLAS
block-wise ``torch._scaled_mm``, at M=4096 for the DeepSeek-V3 shapes of bench/results/h200-final.txt.

All device time from CUDA-graph replays (median of 20 replays x 5 calls), in the same run: the two-step
path (both kernels in one graph), each of its kernels alone, the fused kernel over a small tile sweep,
and our unfused Triton GEMM on pre-quantized input (how far Triton's block-scaled loop is from cuBLAS
before any quantization is added). ``err`` is the fused output's relative error against the two-step
output (both quantize A the same way, so only accumulation order differs).
"""
from __future__ import annotations

import sys
import traceback
from pathlib import Path

import torch

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))
from _timing import REPS, graph_median_ms  # noqa: E402

M = 4096
NKS = ((7168, 2048), (4096, 7168), (24576, 1536))
CALLS_PER_GRAPH = 5


def main() -> int:
    if not torch.cuda.is_available():
        print("bench_fused_gemm: needs a CUDA GPU (none found); nothing measured.")
        return 0
    from kernlint.reference import Fp8BlockLinear, scale_1x128
    from kernlint.reference._triton_fused_gemm import DEFAULT_CONFIG, SWEEP_CONFIGS, fp8_quant_gemm_triton
    from kernlint.reference._triton_gemm import block_scaled_mm_triton

    print(f"quantize-in-GEMM vs scale_1x128 + cuBLAS block-wise _scaled_mm, M={M}, {torch.cuda.get_device_name()}, "
          f"torch {torch.__version__}; device time, median of {REPS} graph replays x {CALLS_PER_GRAPH}")
    header = (f"{'N':>6s} {'K':>5s} | {'quant us':>8s} {'gemm us':>8s} {'two-step us':>11s} {'TF/s':>6s} | "
              f"{'fused us':>8s} {'TF/s':>6s} {'fused/two-step':>14s} {'err':>8s} {'best config':>20s} | "
              f"{'triton gemm us':>14s}")
    print(header)
    print("-" * len(header))
    summary = []
    for n, k in NKS:
        try:
            w = torch.randn(n, k, device="cuda") / k ** 0.5
            layer = Fp8BlockLinear.from_float(w)
            w_q, w_s = layer.weight, layer.weight_scale
            x = torch.randn(M, k, device="cuda", dtype=torch.bfloat16)
            x_q, x_s = scale_1x128(x, column_major_scales=True)

            def two_step():
                q, s = scale_1x128(x, column_major_scales=True)
                return torch._scaled_mm(q, w_q.t(), scale_a=s, scale_b=w_s.t(), out_dtype=torch.bfloat16)

            flops = 2 * M * n * k
            quant_us = graph_median_ms(lambda: scale_1x128(x, column_major_scales=True), CALLS_PER_GRAPH) * 1e3
            gemm_us = graph_median_ms(lambda: torch._scaled_mm(
                x_q, w_q.t(), scale_a=x_s, scale_b=w_s.t(), out_dtype=torch.bfloat16), CALLS_PER_GRAPH) * 1e3
            two_us = graph_median_ms(two_step, CALLS_PER_GRAPH) * 1e3
            reference = two_step().float()
            sweep = []
            for cfg in SWEEP_CONFIGS:
                try:
                    t = graph_median_ms(lambda c=cfg: fp8_quant_gemm_triton(x, w_q, w_s, None, config=c),
                                        CALLS_PER_GRAPH) * 1e3
                except Exception as exc:  # a config that does not compile or fit in shared memory
                    print(f"  config {cfg}: {type(exc).__name__}: {str(exc)[:120]}")
                    continue
                sweep.append((t, cfg))
            sweep.sort()
            best_us, best_cfg = sweep[0]
            fused = fp8_quant_gemm_triton(x, w_q, w_s, None, config=best_cfg).float()
            err = ((fused - reference).norm() / reference.norm()).item()
            tri_us = graph_median_ms(lambda: block_scaled_mm_triton(x_q, x_s, w_q, w_s, torch.bfloat16),
                                     CALLS_PER_GRAPH) * 1e3
            print(f"{n:6d} {k:5d} | {quant_us:8.2f} {gemm_us:8.2f} {two_us:11.2f} {flops / two_us / 1e6:6.0f} | "
                  f"{best_us:8.2f} {flops / best_us / 1e6:6.0f} {best_us / two_us:14.2f} {err:8.1e} "
                  f"{str(best_cfg):>20s} | {tri_us:14.2f}", flush=True)
            for t, cfg in sweep:
                mark = " <- default" if cfg == DEFAULT_CONFIG else ""
                print(f"    fused {str(cfg):20s} {t:8.2f} us {flops / t / 1e6:6.0f} TF/s{mark}")
            summary.append(best_us / two_us)
        except Exception:
            traceback.print_exc()
    if summary:
        wins = sum(r < 1 for r in summary)
        ratios = ", ".join(f"{r:.2f}" for r in summary)
        print(f"fused beats two-step on {wins} of {len(summary)} shapes (fused / two-step: {ratios})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
