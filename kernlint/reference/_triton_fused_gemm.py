"""FP8 block-scaled GEMM that quantizes its bf16/fp16 input A in 1x128 groups inside the main loop.
Imported only on CUDA.

Each program loads an A tile [BLOCK_M, 128] (one scale group per row), takes each row's amax, scales,
casts to e4m3 and feeds the tensor cores, so q and its scales never reach memory and one launch replaces
two. The quantization math is that of ``scale_1x128_kernel`` (multiply by the reciprocal, clamp), so the
FP8 operand is bit-identical to the two-step path. The cost: every program that shares an A tile
re-quantizes it (N / BLOCK_N times) and A is read as 16-bit (twice the bytes of FP8).
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernlint.reference._triton_gemm import grouped_tile

FP8_E4M3_MAX = 448.0
DEFAULT_EPS = 1e-10


@triton.jit
def fp8_quant_gemm_kernel(
    x_ptr, w_ptr, w_s_ptr, bias_ptr, out_ptr,
    M, N, K,
    stride_xm, stride_wn, stride_wsn, stride_wsg, stride_om,
    eps, fp8_max,
    HAS_BIAS: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    GROUP_M: tl.constexpr,
):
    pid_m, pid_n = grouped_tile(tl.program_id(0), M, N, BLOCK_M, BLOCK_N, GROUP_M)

    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, 128)
    m_ok = offs_m < M
    n_ok = offs_n < N

    x_ptrs = x_ptr + offs_m[:, None].to(tl.int64) * stride_xm + offs_k[None, :]
    w_ptrs = w_ptr + offs_n[None, :].to(tl.int64) * stride_wn + offs_k[:, None]
    w_s_ptrs = w_s_ptr + (offs_n // 128) * stride_wsn

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for kb in range(0, tl.cdiv(K, 128)):
        x = tl.load(x_ptrs, mask=m_ok[:, None], other=0.0).to(tl.float32)
        scale = tl.maximum(tl.max(tl.abs(x), axis=1), eps) / fp8_max
        a = tl.clamp(x * (1.0 / scale)[:, None], -fp8_max, fp8_max).to(w_ptr.dtype.element_ty)
        w = tl.load(w_ptrs, mask=n_ok[None, :], other=0.0)
        w_s = tl.load(w_s_ptrs + kb * stride_wsg, mask=n_ok, other=0.0)
        acc += tl.dot(a, w) * (scale[:, None] * w_s[None, :])
        x_ptrs += 128
        w_ptrs += 128

    if HAS_BIAS:
        acc += tl.load(bias_ptr + offs_n, mask=n_ok, other=0.0).to(tl.float32)[None, :]
    out_ptrs = out_ptr + offs_m[:, None].to(tl.int64) * stride_om + offs_n[None, :]
    tl.store(out_ptrs, acc.to(out_ptr.dtype.element_ty), mask=m_ok[:, None] & n_ok[None, :])


# (BLOCK_M, BLOCK_N, num_warps, num_stages). The default is the best of bench/bench_fused_gemm.py's sweep
# on the H200 at M=4096.
DEFAULT_CONFIG = (128, 128, 8, 4)
SWEEP_CONFIGS = ((128, 128, 8, 3), (128, 128, 8, 4), (128, 256, 8, 3), (64, 256, 4, 3))


def fp8_quant_gemm_triton(x2d: torch.Tensor, w_q: torch.Tensor, w_s: torch.Tensor, bias: torch.Tensor | None,
                          eps: float = DEFAULT_EPS, config: tuple[int, int, int, int] | None = None
                          ) -> torch.Tensor:
    """``x2d [M, K]`` (bf16/fp16, inner stride 1) times ``w_q [N, K]`` e4m3 (128x128 scales ``w_s``)."""
    m, k = x2d.shape
    n = w_q.shape[0]
    if x2d.stride(1) != 1:
        x2d = x2d.contiguous()
    if w_q.stride(1) != 1:
        w_q = w_q.contiguous()
    out = torch.empty((m, n), dtype=x2d.dtype, device=x2d.device)
    if m == 0 or n == 0:
        return out
    block_m, block_n, num_warps, num_stages = config or DEFAULT_CONFIG
    grid = (triton.cdiv(m, block_m) * triton.cdiv(n, block_n),)
    with torch.cuda.device(x2d.device):
        fp8_quant_gemm_kernel[grid](
            x2d, w_q, w_s, bias if bias is not None else out, out,
            m, n, k,
            x2d.stride(0), w_q.stride(0), w_s.stride(0), w_s.stride(1), out.stride(0),
            eps, float(torch.finfo(w_q.dtype).max),
            HAS_BIAS=bias is not None, BLOCK_M=block_m, BLOCK_N=block_n, GROUP_M=8,
            num_warps=num_warps, num_stages=num_stages,
        )
    return out
