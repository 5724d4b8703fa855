#!/usr/bin/env python3
"""``scale_1x128_kernel`` alone (bf16 in; fp8 out; float32 column-major scales): effective bandwidth
(bytes read + bytes written) / time, against a torch device copy moving the same number of bytes,
measured in the same run.

Time: median of 20 replays of a CUDA graph holding 20 launches (no CPU launch overhead), per launch.
Small sizes sit in the 60 MB L2; the copy anchor of the same bytes does too.
"""
from __future__ import annotations

import sys
from pathlib import Path

import torch

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))
from _timing import REPS, graph_median_ms  # noqa: E402

MS = (16, 128, 4096)
KS = (1536, 2048, 7168)
CALLS_PER_GRAPH = 20


def main() -> int:
    if not torch.cuda.is_available():
        print("bench_quant: needs a CUDA GPU (none found); nothing measured.")
        return 0
    from kernlint.reference import scale_1x128

    print(f"scale_1x128_kernel, bf16 -> e4m3 + fp32 column-major scales, {torch.cuda.get_device_name()}, "
          f"torch {torch.__version__}; per launch, median of {REPS} graph replays x {CALLS_PER_GRAPH}")
    header = (f"{'M':>5s} {'K':>5s} {'bytes':>10s} {'quant us':>9s} {'quant GB/s':>11s} "
              f"{'copy us':>8s} {'copy GB/s':>10s} {'quant/copy':>11s}")
    print(header)
    print("-" * len(header))
    for m in MS:
        for k in KS:
            x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
            moved = m * k * 2 + m * k + m * (k // 128) * 4
            quant_ms = graph_median_ms(lambda: scale_1x128(x, column_major_scales=True), CALLS_PER_GRAPH)
            src = torch.empty(moved // 2, dtype=torch.uint8, device="cuda")
            dst = torch.empty_like(src)
            copy_ms = graph_median_ms(lambda: dst.copy_(src), CALLS_PER_GRAPH)
            quant_bw = moved / quant_ms / 1e6
            copy_bw = 2 * src.numel() / copy_ms / 1e6
            print(f"{m:5d} {k:5d} {moved:10d} {quant_ms * 1e3:9.2f} {quant_bw:11.0f} "
                  f"{copy_ms * 1e3:8.2f} {copy_bw:10.0f} {quant_bw / copy_bw:11.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
