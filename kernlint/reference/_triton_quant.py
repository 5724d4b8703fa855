"""Triton kernel of the 1x128 activation quantization. Imported only on CUDA (CPU machines have no triton).

The kernel's Python name, ``scale_1x128_kernel``, is what traces show for it: rule KL001 anchors on it.
"""
from __future__ import annotations

import functools

import torch
import triton
import triton.language as tl

FP8_E4M3_MAX = 448.0
GROUP_SIZE = 128

@triton.jit
def scale_1x128_kernel(
    x_ptr, q_ptr, s_ptr,
    n_rows, n_rows_out,
    stride_xm, stride_qm, stride_sm, stride_sg,
    eps, fp8_max,
    BLOCK_M: tl.constexpr,
    GROUP: tl.constexpr,
    UE8M0: tl.constexpr,
):
    """One program quantizes a [BLOCK_M, 128] tile: one 128-wide group of BLOCK_M rows.

    Rows in [n_rows, n_rows_out) are padding: they read as zero, so they get q = 0 (and scale
    eps / fp8_max), which lets a GEMM that needs M % 4 == 0 skip a separate padding copy.
    """
    pid_m = tl.program_id(0)
    group = tl.program_id(1)
    rows = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)).to(tl.int64)
    cols = group * GROUP + tl.arange(0, GROUP)

    x = tl.load(x_ptr + rows[:, None] * stride_xm + cols[None, :],
                mask=rows[:, None] < n_rows, other=0.0).to(tl.float32)
    amax = tl.max(tl.abs(x), axis=1)
    scale = tl.maximum(amax, eps) / fp8_max
    if UE8M0:
        # Round the scale up to a power of two: add all-ones mantissa, keep the exponent bits.
        bits = scale.to(tl.int32, bitcast=True)
        scale = ((bits + 0x7FFFFF) & 0x7F800000).to(tl.float32, bitcast=True)
    # One reciprocal per row, then a multiply per element (a divide per element costs more).
    q = tl.clamp(x * (1.0 / scale)[:, None], -fp8_max, fp8_max)

    row_ok = rows < n_rows_out
    tl.store(q_ptr + rows[:, None] * stride_qm + cols[None, :],
             q.to(q_ptr.dtype.element_ty), mask=row_ok[:, None])
    tl.store(s_ptr + rows * stride_sm + group * stride_sg, scale, mask=row_ok)


@functools.cache
def _sm_count(device_index: int) -> int:
    return torch.cuda.get_device_properties(device_index).multi_processor_count


def _launch_shape(n_rows_out: int, n_groups: int, device_index: int) -> tuple[int, int]:
    """(BLOCK_M, num_warps): the tallest tile that still leaves >= 4 programs per SM.

    Small M (decode) gets 1-2 row tiles and one warp, so the few bytes spread over all SMs;
    large M gets 64-row tiles so each program moves 16 KiB.
    """
    min_programs = 4 * _sm_count(device_index)
    block_m = 1
    while block_m < 64 and triton.cdiv(n_rows_out, 2 * block_m) * n_groups >= min_programs:
        block_m *= 2
    num_warps = max(1, min(8, block_m * GROUP_SIZE // 256))
    return block_m, num_warps


def scale_1x128_triton(x2d: torch.Tensor, q: torch.Tensor, s: torch.Tensor, eps: float, ue8m0: bool) -> None:
    """Writes q [M_out, K] and s [M_out, K/128] (any strides) for x2d [M, K] (inner stride 1)."""
    n_rows, k = x2d.shape
    n_rows_out = q.shape[0]
    n_groups = k // GROUP_SIZE
    if n_rows_out == 0 or n_groups == 0:
        return
    block_m, num_warps = _launch_shape(n_rows_out, n_groups, x2d.device.index or 0)
    fp8_max = float(torch.finfo(q.dtype).max)
    grid = (triton.cdiv(n_rows_out, block_m), n_groups)
    scale_1x128_kernel[grid](
        x2d, q, s,
        n_rows, n_rows_out,
        x2d.stride(0), q.stride(0), s.stride(0), s.stride(1),
        eps, fp8_max,
        BLOCK_M=block_m, GROUP=GROUP_SIZE, UE8M0=ue8m0,
        num_warps=num_warps,
    )
