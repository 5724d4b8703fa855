"""Triton block-scaled FP8 GEMM: the fallback where cuBLAS block-wise ``torch._scaled_mm`` is unavailable.

``out[M, N] = (A * scale_a) @ (W * scale_w).T (+ bias)``, A fp8 [M, K] with 1x128 scales [M, K/128],
W fp8 [N, K] with 128x128 scales [ceil(N/128), K/128]. Imported only on CUDA.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def fp8_block_scaled_gemm_kernel(
    a_ptr, a_s_ptr, w_ptr, w_s_ptr, bias_ptr, out_ptr,
    M, N, K,
    stride_am, stride_asm, stride_asg,
    stride_wn, stride_wsn, stride_wsg,
    stride_om,
    HAS_BIAS: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
):
    # Grouped program order: GROUP_M row tiles share each W column tile while it is in L2.
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    pids_per_group = GROUP_M * num_pid_n
    first_m = (pid // pids_per_group) * GROUP_M
    group_rows = tl.minimum(num_pid_m - first_m, GROUP_M)
    pid_m = first_m + (pid % pids_per_group) % group_rows
    pid_n = (pid % pids_per_group) // group_rows

    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    m_ok = offs_m < M
    n_ok = offs_n < N

    a_ptrs = a_ptr + offs_m[:, None].to(tl.int64) * stride_am + offs_k[None, :]
    w_ptrs = w_ptr + offs_n[None, :].to(tl.int64) * stride_wn + offs_k[:, None]
    a_s_ptrs = a_s_ptr + offs_m * stride_asm
    # BLOCK_N divides 128, so one weight-scale block column covers the whole tile.
    w_s_ptrs = w_s_ptr + ((pid_n * BLOCK_N) // 128) * stride_wsn

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for kb in range(0, tl.cdiv(K, BLOCK_K)):
        a = tl.load(a_ptrs, mask=m_ok[:, None], other=0.0)
        w = tl.load(w_ptrs, mask=n_ok[None, :], other=0.0)
        a_s = tl.load(a_s_ptrs + kb * stride_asg, mask=m_ok, other=0.0)
        w_s = tl.load(w_s_ptrs + kb * stride_wsg)
        acc += tl.dot(a, w) * (a_s[:, None] * w_s)
        a_ptrs += BLOCK_K
        w_ptrs += BLOCK_K

    if HAS_BIAS:
        acc += tl.load(bias_ptr + offs_n, mask=n_ok, other=0.0).to(tl.float32)[None, :]
    out_ptrs = out_ptr + offs_m[:, None].to(tl.int64) * stride_om + offs_n[None, :]
    tl.store(out_ptrs, acc.to(out_ptr.dtype.element_ty), mask=m_ok[:, None] & n_ok[None, :])


def block_scaled_mm_triton(a_q: torch.Tensor, a_s: torch.Tensor, w_q: torch.Tensor, w_s: torch.Tensor,
                           out_dtype: torch.dtype, bias: torch.Tensor | None = None) -> torch.Tensor:
    """``a_q [M, K]`` (1x128 scales ``a_s``, any strides) times ``w_q [N, K]`` (128x128 scales ``w_s``)."""
    m, k = a_q.shape
    n = w_q.shape[0]
    if a_q.stride(1) != 1:
        a_q = a_q.contiguous()
    if w_q.stride(1) != 1:
        w_q = w_q.contiguous()
    out = torch.empty((m, n), dtype=out_dtype, device=a_q.device)
    # Small M (decode): 64-row tiles waste less; large M: 128x128 tiles, 8 warps.
    block_m = 64 if m <= 64 else 128
    num_warps = 4 if block_m == 64 else 8
    block_n = 128
    grid = (triton.cdiv(m, block_m) * triton.cdiv(n, block_n),)
    fp8_block_scaled_gemm_kernel[grid](
        a_q, a_s, w_q, w_s, bias if bias is not None else out, out,
        m, n, k,
        a_q.stride(0), a_s.stride(0), a_s.stride(1),
        w_q.stride(0), w_s.stride(0), w_s.stride(1),
        out.stride(0),
        HAS_BIAS=bias is not None,
        BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=128, GROUP_M=8,
        num_warps=num_warps, num_stages=4,
    )
    return out
