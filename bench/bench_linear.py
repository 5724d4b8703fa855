#!/usr/bin/env python3
"""The whole ``Fp8BlockLinear`` forward (quant + block-scaled GEMM) vs block-wise ``torch._scaled_mm``
alone on pre-quantized input vs a bf16 matmul, in TFLOP/s.

Model: "GEMM alone + the quant kernel's bytes at 3 TB/s"; ``fwd/model`` is our forward's time over the
model's (1.00 = on the model, above = slower). ``kernels`` counts the device kernels one forward
launches (torch.profiler). Time: median of 20 replays of a CUDA graph holding 10 calls, per call.
"""
from __future__ import annotations

import sys
from pathlib import Path

import torch

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))
from _timing import REPS, graph_median_ms  # noqa: E402

MS = (16, 128, 4096)
NKS = ((7168, 2048), (4096, 7168), (24576, 1536))
CALLS_PER_GRAPH = 10
QUANT_MODEL_BYTES_PER_S = 3e12


def kernels_per_call(fn) -> list[str]:
    fn()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                            torch.profiler.ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    return [e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]


def main() -> int:
    if not torch.cuda.is_available():
        print("bench_linear: needs a CUDA GPU (none found); nothing measured.")
        return 0
    from kernlint.reference import Fp8BlockLinear, gemm_backend_choices, scale_1x128

    print(f"Fp8BlockLinear forward vs block-wise _scaled_mm alone vs bf16 mm, {torch.cuda.get_device_name()}, "
          f"torch {torch.__version__}; per call, median of {REPS} graph replays x {CALLS_PER_GRAPH}")
    header = (f"{'M':>5s} {'N':>6s} {'K':>5s} {'fwd us':>8s} {'fwd TF/s':>9s} {'gemm us':>8s} {'gemm TF/s':>10s} "
              f"{'bf16 us':>8s} {'bf16 TF/s':>10s} {'model us':>9s} {'fwd/model':>10s} {'kernels':>8s}")
    print(header)
    print("-" * len(header))
    kernel_names = {}
    for n, k in NKS:
        w = torch.randn(n, k, device="cuda") / k ** 0.5
        layer = Fp8BlockLinear.from_float(w)
        w_bf16 = w.to(torch.bfloat16)
        for m in MS:
            x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
            x_q, x_s = scale_1x128(x, column_major_scales=True, pad_rows_to=4)
            flops = 2 * m * n * k
            with torch.no_grad():
                fwd_ms = graph_median_ms(lambda: layer(x), CALLS_PER_GRAPH)
                gemm_ms = graph_median_ms(lambda: torch._scaled_mm(
                    x_q, layer.weight.t(), scale_a=x_s, scale_b=layer.weight_scale.t(), out_dtype=torch.bfloat16),
                    CALLS_PER_GRAPH)
                bf16_ms = graph_median_ms(lambda: x @ w_bf16.t(), CALLS_PER_GRAPH)
                names = kernels_per_call(lambda: layer(x))
            kernel_names[(m, n, k)] = names
            quant_bytes = m * k * 2 + m * k + m * (k // 128) * 4
            model_ms = gemm_ms + quant_bytes / QUANT_MODEL_BYTES_PER_S * 1e3
            print(f"{m:5d} {n:6d} {k:5d} {fwd_ms * 1e3:8.2f} {flops / fwd_ms / 1e9:9.1f} "
                  f"{gemm_ms * 1e3:8.2f} {flops / gemm_ms / 1e9:10.1f} {bf16_ms * 1e3:8.2f} "
                  f"{flops / bf16_ms / 1e9:10.1f} {model_ms * 1e3:9.2f} {fwd_ms / model_ms:10.2f} {len(names):8d}")
    print()
    print(f"GEMM backend chosen (device, out dtype, bias): {gemm_backend_choices()}")
    for shape, names in kernel_names.items():
        print(f"kernels of one forward at M,N,K={shape}: {names}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
