#!/usr/bin/env python3
"""Eager (host time included) cost of the reference kernels, against their anchors, in one run.

1. ``Fp8BlockLinear`` forward vs bf16 ``x @ w.t()`` at decode sizes: eager per call (N back-to-back calls,
   one synchronize, wall / N) and under CUDA-graph replay (device time); the layer also with the GEMM
   forced to cuBLAS (what it ran before: ``_scaled_mm`` at every M), eagerly and under graphs.
2. ``scale_1x128`` host time per call vs ``x.clone()`` and the 12 us target, and what each step of the
   launch path buys (old JIT path -> cached plan -> direct launcher -> no allocation), plus a trivial
   Triton kernel through the JIT and through the direct launcher.
3. The small-M Triton GEMM: tile / pipelining sweep at M=16 (graph replay, device time) against cuBLAS
   block-wise ``_scaled_mm``, and both GEMMs' eager cost.
"""
from __future__ import annotations

import sys
import traceback
from pathlib import Path

import torch

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))
from _timing import EAGER_CALLS, EAGER_REPS, REPS, eager_us, graph_median_ms  # noqa: E402

NKS = ((7168, 2048), (4096, 7168), (24576, 1536))
LINEAR_MS = (1, 16, 64)
CALLS_PER_GRAPH = 10
SCALE_TARGET_US = 12.0
LINEAR_TARGET_RATIO = 1.5
F8 = torch.float8_e4m3fn

try:
    import triton
    import triton.language as tl
except ImportError:  # CPU-only machines: main() says so and exits
    triton = None

if triton is not None:
    @triton.jit
    def trivial_kernel(ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(ptr + offs, 0.0, mask=offs < n)


def section(fn):
    try:
        fn()
    except Exception:  # one broken section must not hide the others' numbers
        traceback.print_exc()
    print(flush=True)


class forced_gemm:
    """Sets the layer's Triton-GEMM thresholds for the duration (0: cuBLAS at every M)."""

    def __init__(self, eager: int, capture: int):
        self.values = (eager, capture)

    def __enter__(self):
        from kernlint.reference import linear

        self.saved = (linear.TRITON_MAX_M, linear.TRITON_MAX_M_CAPTURE)
        linear.TRITON_MAX_M, linear.TRITON_MAX_M_CAPTURE = self.values

    def __exit__(self, *exc):
        from kernlint.reference import linear

        linear.TRITON_MAX_M, linear.TRITON_MAX_M_CAPTURE = self.saved


def linear_table():
    from kernlint.reference import Fp8BlockLinear

    print(f"1. Fp8BlockLinear forward vs bf16 x @ w.t(), eager: {EAGER_CALLS} back-to-back calls + sync, "
          f"median of {EAGER_REPS}; graph: device time, median of {REPS} replays x {CALLS_PER_GRAPH}")
    header = (f"{'M':>3s} {'N':>6s} {'K':>5s} | {'fp8 eager':>9s} {'bf16 eager':>10s} {'ratio':>6s} "
              f"{'<=1.5':>5s} {'fp8 cuBLAS':>10s} | {'fp8 graph':>9s} {'bf16 graph':>10s} {'ratio':>6s} "
              f"{'cuBLAS graph':>12s}")
    print(header)
    print("-" * len(header))
    for n, k in NKS:
        w = torch.randn(n, k, device="cuda") / k ** 0.5
        layer = Fp8BlockLinear.from_float(w)
        cublas_layer = Fp8BlockLinear.from_float(w)
        w_bf16 = w.to(torch.bfloat16)
        for m in LINEAR_MS:
            x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
            with torch.no_grad():
                fp8_us = eager_us(lambda: layer(x))
                bf16_us = eager_us(lambda: x @ w_bf16.t())
                fp8_graph = graph_median_ms(lambda: layer(x), CALLS_PER_GRAPH) * 1e3
                bf16_graph = graph_median_ms(lambda: x @ w_bf16.t(), CALLS_PER_GRAPH) * 1e3
                with forced_gemm(0, 0):  # warm-up and capture alike on cuBLAS
                    cublas_us = eager_us(lambda: cublas_layer(x), calls=100, reps=3)
                    cublas_graph = graph_median_ms(lambda: cublas_layer(x), CALLS_PER_GRAPH) * 1e3
            ratio = fp8_us / bf16_us
            print(f"{m:3d} {n:6d} {k:5d} | {fp8_us:9.1f} {bf16_us:10.1f} {ratio:6.2f} "
                  f"{'yes' if ratio <= LINEAR_TARGET_RATIO else 'NO':>5s} {cublas_us:10.1f} | "
                  f"{fp8_graph:9.2f} {bf16_graph:10.2f} {fp8_graph / bf16_graph:6.2f} {cublas_graph:12.2f}",
                  flush=True)


def scale_table():
    from kernlint.reference import scale_1x128
    from kernlint.reference._launch import FastKernel, current_stream
    from kernlint.reference._triton_quant import QuantPlan, scale_1x128_kernel, scale_1x128_triton
    from kernlint.reference.quant import DEFAULT_EPS, _check_group_shape

    print("2. scale_1x128 (bf16 -> e4m3, column-major fp32 scales), eager per call, host included "
          f"({EAGER_CALLS} back-to-back calls + sync, median of {EAGER_REPS})")
    header = (f"{'M':>5s} {'K':>5s} | {'scale_1x128 us':>14s} {'x.clone() us':>12s} {'vs clone':>8s} "
              f"{'vs 12 us':>8s} {'<=12':>5s}")
    print(header)
    print("-" * len(header))
    for m, k in ((16, 1536), (16, 2048), (16, 7168), (128, 7168), (4096, 7168)):
        x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        ours = eager_us(lambda: scale_1x128(x, column_major_scales=True))
        clone = eager_us(lambda: x.clone())
        print(f"{m:5d} {k:5d} | {ours:14.2f} {clone:12.2f} {ours / clone:8.2f} {ours / SCALE_TARGET_US:8.2f} "
              f"{'yes' if ours <= SCALE_TARGET_US else 'NO':>5s}", flush=True)

    m, k = 16, 7168
    x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    eps = DEFAULT_EPS

    def old_path():  # the code before this change: validate, reshape, two allocations, JIT launch
        kk = _check_group_shape(x)
        x2d = x.reshape(-1, kk)
        if x2d.stride(-1) != 1:
            x2d = x2d.contiguous()
        n_out = x2d.shape[0]
        q = torch.empty((n_out, kk), dtype=F8, device=x2d.device)
        s = torch.empty((kk // 128, n_out), dtype=torch.float32, device=x2d.device).t()
        scale_1x128_triton(x2d, q, s, eps, False)

    plan = QuantPlan(x, False, True, 1, F8)
    q0 = torch.empty(plan.q_shape, dtype=F8, device="cuda")
    s0 = torch.empty_strided(plan.s_shape, plan.s_strides, dtype=torch.float32, device="cuda")
    plan.launch_jit(x, q0, s0, eps)

    def planned_jit():  # cached plan, but the JIT's binding and key work on every launch
        q = torch.empty(plan.q_shape, dtype=F8, device=plan.device)
        s = torch.empty_strided(plan.s_shape, plan.s_strides, dtype=torch.float32, device=plan.device)
        scale_1x128_kernel[(plan.grid0, plan.n_groups)](
            x, q, s, plan.n_rows, plan.n_rows_out, plan.stride_xm, plan.k, plan.stride_sm, plan.stride_sg,
            eps, plan.fp8_max, BLOCK_M=plan.block_m, GROUP=128, UE8M0=False, num_warps=plan.num_warps)

    def launch_only():  # cached plan, direct launcher, outputs already allocated
        plan.launch(current_stream(0), x.data_ptr(), q0.data_ptr(), s0.data_ptr(), eps)

    def allocate_only():
        torch.empty(plan.q_shape, dtype=F8, device=plan.device)
        torch.empty_strided(plan.s_shape, plan.s_strides, dtype=torch.float32, device=plan.device)

    buf = torch.empty(1024, device="cuda")
    trivial = FastKernel.first_launch(trivial_kernel, (1,), (buf, 1024), {"BLOCK": 1024}, num_warps=4)
    rows = [
        ("old path: validate + reshape + 2 empties + JIT launch", old_path),
        ("cached plan + 2 empties + JIT launch", planned_jit),
        ("cached plan + 2 empties + direct launch (scale_1x128 now)",
         lambda: scale_1x128(x, column_major_scales=True)),
        ("  of which: torch.empty + torch.empty_strided", allocate_only),
        ("  of which: direct launch alone (outputs preallocated)", launch_only),
        ("custom op torch.ops.kernlint.scale_1x128 (dispatcher)",
         lambda: torch.ops.kernlint.scale_1x128(x, eps, False, True, 1, F8)),
        ("trivial Triton kernel, JIT launch", lambda: trivial_kernel[(1,)](buf, 1024, BLOCK=1024)),
        ("trivial Triton kernel, direct launch",
         lambda: trivial(1, 1, 1, current_stream(0), buf.data_ptr(), 1024)),
        ("x.clone()", lambda: x.clone()),
    ]
    print()
    print(f"scale_1x128 launch path, M={m} K={k}: what each step buys (eager per call, host included); "
          f"launcher's C entry called directly: {plan.kernel.direct}")
    header = f"{'variant':58s} {'us/call':>8s}"
    print(header)
    print("-" * len(header))
    for name, fn in rows:
        print(f"{name:58s} {eager_us(fn):8.2f}", flush=True)


def gemm_table():
    from kernlint.reference import scale_1x128
    from kernlint.reference._triton_gemm import block_scaled_mm_triton, gemm_config
    from kernlint.reference.linear import Fp8BlockLinear

    m = 16
    configs = [(16, bn, 4, st, sk) for bn in (32, 64, 128) for st in (3, 4, 6) for sk in (1, 4)]
    print(f"3. small-M GEMM at M={m}: Triton (BLOCK_M, BLOCK_N, warps, stages, SPLIT_K) sweep vs cuBLAS block-wise "
          f"_scaled_mm; graph device time, us")
    for n, k in NKS:
        w = torch.randn(n, k, device="cuda") / k ** 0.5
        layer = Fp8BlockLinear.from_float(w)
        w_q, w_s = layer.weight, layer.weight_scale
        x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        x_q, x_s = scale_1x128(x, column_major_scales=True)
        cublas = lambda: torch._scaled_mm(x_q, w_q.t(), scale_a=x_s, scale_b=w_s.t(),  # noqa: E731
                                          out_dtype=torch.bfloat16)
        cublas_graph = graph_median_ms(cublas, CALLS_PER_GRAPH) * 1e3
        default = gemm_config(m, n, k, 0)
        results = []
        for cfg in configs:
            try:
                t = graph_median_ms(lambda c=cfg: block_scaled_mm_triton(x_q, x_s, w_q, w_s, torch.bfloat16,
                                                                         None, config=c), CALLS_PER_GRAPH) * 1e3
            except Exception as exc:  # a config that does not compile or fit
                print(f"  config {cfg}: {type(exc).__name__}: {str(exc)[:120]}")
                continue
            results.append((t, cfg))
        results.sort()
        weight_bytes = n * k
        print(f"N={n} K={k}: cuBLAS {cublas_graph:.2f} us ({weight_bytes / cublas_graph / 1e6:.2f} TB/s of weight); "
              f"default config {default}")
        for t, cfg in results:
            mark = " <- default" if cfg == default else ""
            print(f"  {str(cfg):22s} {t:8.2f} us  {weight_bytes / t / 1e6:6.2f} TB/s  x cuBLAS {t / cublas_graph:5.2f}"
                  f"{mark}")
        tri_eager = eager_us(lambda: block_scaled_mm_triton(x_q, x_s, w_q, w_s, torch.bfloat16))
        cublas_eager = eager_us(cublas, calls=100, reps=3)
        print(f"  eager per call: Triton (default config) {tri_eager:.1f} us, cuBLAS _scaled_mm {cublas_eager:.1f} us",
              flush=True)


def main() -> int:
    if not torch.cuda.is_available():
        print("bench_eager: needs a CUDA GPU (none found); nothing measured.")
        return 0
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, triton {triton.__version__}")
    print()
    section(scale_table)
    section(linear_table)
    section(gemm_table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
