"""Quantize-in-GEMM (issue 12's moonshot): one kernel that quantizes A in 1x128 groups on the fly and runs
the block-scaled FP8 GEMM. Opt-in, not what ``Fp8BlockLinear`` runs: at M=4096 on the H200 it did not beat
``scale_1x128`` + cuBLAS block-wise ``_scaled_mm`` (bench/results/h200-eager.txt), and its trace has no
``scale_1x128_kernel`` for rule KL001 to anchor on.
"""
from __future__ import annotations

import torch

from kernlint.reference.linear import block_scaled_mm
from kernlint.reference.quant import DEFAULT_EPS, _check_group_shape, scale_1x128

__all__ = ["fp8_quant_gemm"]

_compiling = torch.compiler.is_compiling


def fp8_quant_gemm(x: torch.Tensor, w_q: torch.Tensor, w_s: torch.Tensor,
                   bias: torch.Tensor | None = None) -> torch.Tensor:
    """``x [..., K]`` (bf16/fp16) -> ``[..., N]`` in ``x.dtype``: x quantized in 1x128 groups (as
    :func:`scale_1x128`) times ``w_q [N, K]`` e4m3 with 128x128 scales ``w_s``, plus ``bias``.

    CUDA: one Triton kernel (A's FP8 values and scales never reach memory). CPU: the two-step math.
    Under ``torch.compile``: the custom op ``torch.ops.kernlint.fp8_quant_gemm``.
    """
    lead = x.shape[:-1]
    if _compiling():
        out = torch.ops.kernlint.fp8_quant_gemm(x, w_q, w_s, bias)
    else:
        out = _fp8_quant_gemm_eager(x, w_q, w_s, bias)
    return out.view(*lead, w_q.shape[0])


def _fp8_quant_gemm_eager(x, w_q, w_s, bias):
    k = _check_group_shape(x)
    x2d = x.reshape(-1, k)
    if x2d.is_cuda:
        from kernlint.reference._triton_fused_gemm import fp8_quant_gemm_triton

        return fp8_quant_gemm_triton(x2d, w_q, w_s, bias, DEFAULT_EPS)
    x_q, x_s = scale_1x128(x2d)
    return block_scaled_mm(x_q, x_s, w_q, w_s, x.dtype, bias)
