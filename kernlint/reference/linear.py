"""FP8 block-scaled linear layer (DeepSeek-V3 style: 1x128 activation groups, 128x128 weight blocks).

Two forward paths, as in vLLM:
  (a) ``quantize_in_gemm=False``: the layer quantizes (:func:`scale_1x128`) and then calls the block-scaled
      GEMM (:func:`block_scaled_mm`);
  (b) ``quantize_in_gemm=True`` (default): the layer calls :func:`fp8_blockscale_gemm`, which quantizes
      internally. Like TensorRT-LLM's ``fp8_blockscale_gemm`` it takes an input scale it never reads; the
      layer makes that placeholder in :meth:`Fp8BlockLinear._placeholder_scale` with ``x.new_empty(1)``,
      which launches nothing. ``x.new_ones(1)`` there launches a FillFunctor kernel right before
      ``scale_1x128_kernel`` on every forward: vLLM PR 43677's regression, rule KL001.

On CUDA a forward launches exactly two kernels: ``scale_1x128_kernel`` and the GEMM (cuBLAS block-wise
``torch._scaled_mm``, or the Triton fallback), plus a bias add only where the GEMM cannot take the bias.
``_scaled_mm`` needs M % 4 == 0: the quant kernel writes the padding rows itself, so no copy is launched.
On CPU the same math runs as torch ops (dequantize, float32 matmul).
"""
from __future__ import annotations

import torch
from torch import nn

from kernlint.reference.quant import (
    FP8_DTYPE,
    GROUP_SIZE,
    WEIGHT_BLOCK,
    dequantize_1x128,
    dequantize_weight_128x128,
    quantize_weight_128x128,
    scale_1x128,
)

__all__ = ["Fp8BlockLinear", "block_scaled_mm", "fp8_blockscale_gemm", "gemm_backend_choices"]

# cuBLAS block-wise FP8 needs M % 4 == 0 (M=1 and M=6 fail with CUBLAS_STATUS_NOT_SUPPORTED on H200).
_SCALED_MM_ROW_MULTIPLE = 4

# Which GEMM a (device index, out dtype, has bias) runs for cuBLAS-friendly shapes, decided once by
# trying: "scaled_mm" (bias fused), "scaled_mm+add" (bias added after), or "triton".
_GEMM_BACKEND: dict[tuple, str] = {}


def gemm_backend_choices() -> dict[tuple, str]:
    """The GEMM backend chosen so far per (device index, out dtype, has bias), for cuBLAS-friendly shapes."""
    return dict(_GEMM_BACKEND)


def _scaled_mm(a_q, a_s, w_q, w_s, out_dtype, bias):
    # A row-major, B = w_q.t() (column-major), scale_a column-major [M, K/128], scale_b = w_s.t().
    return torch._scaled_mm(a_q, w_q.t(), scale_a=a_s, scale_b=w_s.t(), bias=bias, out_dtype=out_dtype)


def _run_gemm(backend, a_q, a_s, w_q, w_s, out_dtype, bias):
    if backend == "scaled_mm":
        return _scaled_mm(a_q, a_s, w_q, w_s, out_dtype, bias)
    if backend == "scaled_mm+add":
        return _scaled_mm(a_q, a_s, w_q, w_s, out_dtype, None).add_(bias)
    from kernlint.reference._triton_gemm import block_scaled_mm_triton

    return block_scaled_mm_triton(a_q, a_s, w_q, w_s, out_dtype, bias)


def _block_scaled_mm_cuda(a_q, a_s, w_q, w_s, out_dtype, bias):
    n, k = w_q.shape
    # cuBLAS reads the 128x128 weight scales with a 16-byte-aligned row stride: with K/128 % 4 != 0 it
    # accepts the call and silently returns garbage (inf columns at K=256 on the H200, torch 2.11), so
    # only K % 512 == 0, N % 128 == 0 and M % 4 == 0 with column-major scale_a go to cuBLAS.
    cublas_layout = (n % WEIGHT_BLOCK == 0 and (k // GROUP_SIZE) % 4 == 0
                     and a_q.shape[0] % _SCALED_MM_ROW_MULTIPLE == 0 and a_s.stride(0) == 1)
    if not cublas_layout:
        return _run_gemm("triton", a_q, a_s, w_q, w_s, out_dtype, bias)
    key = (a_q.device.index, out_dtype, bias is not None)
    backend = _GEMM_BACKEND.get(key)
    if backend is not None:
        return _run_gemm(backend, a_q, a_s, w_q, w_s, out_dtype, bias)
    candidates = ["scaled_mm", "scaled_mm+add", "triton"] if bias is not None else ["scaled_mm", "triton"]
    for backend in candidates:
        try:
            out = _run_gemm(backend, a_q, a_s, w_q, w_s, out_dtype, bias)
        except RuntimeError:
            # cuBLAS without block-wise FP8 (or without this bias dtype): remember, move on.
            if backend == "triton":
                raise
            continue
        _GEMM_BACKEND[key] = backend
        return out
    raise AssertionError("unreachable: the triton backend either returns or raises")


def block_scaled_mm(a_q: torch.Tensor, a_s: torch.Tensor, w_q: torch.Tensor, w_s: torch.Tensor,
                    out_dtype: torch.dtype, bias: torch.Tensor | None = None) -> torch.Tensor:
    """``(a_q * a_s) @ (w_q * w_s).T + bias`` -> ``[M, N]`` in ``out_dtype``.

    ``a_q [M, K]`` fp8 with 1x128 scales ``a_s [M, K/128]`` (column-major on CUDA), ``w_q [N, K]`` fp8 with
    128x128 scales ``w_s [ceil(N/128), K/128]``. On CUDA: cuBLAS block-wise ``torch._scaled_mm`` where it
    is known to be right (M % 4 == 0, N % 128 == 0, K % 512 == 0, column-major ``a_s``), else the
    Triton kernel. On CPU: dequantize, float32 matmul.
    """
    if bias is not None and bias.dtype != out_dtype:
        bias = bias.to(out_dtype)
    if a_q.is_cuda:
        return _block_scaled_mm_cuda(a_q, a_s, w_q, w_s, out_dtype, bias)
    a = dequantize_1x128(a_q, a_s)
    w = dequantize_weight_128x128(w_q, w_s)
    out = a @ w.t() if bias is None else torch.addmm(bias.to(torch.float32), a, w.t())
    return out.to(out_dtype)


def fp8_blockscale_gemm(x: torch.Tensor, w_q: torch.Tensor, w_s: torch.Tensor,
                        input_scale: torch.Tensor | None, bias: torch.Tensor | None = None) -> torch.Tensor:
    """A GEMM that quantizes its bf16/fp16 input itself: ``x [M, K]`` -> ``[M_out, N]`` in ``x.dtype``.

    ``input_scale`` is not read (the 1x128 scales are computed here); callers pass a placeholder, which
    must cost nothing: make it with ``new_empty``, never ``new_ones``. On CUDA ``M_out`` is M rounded up
    to a multiple of 4 (padding rows come from the quant kernel, not a copy); slice ``[:M]``.
    """
    del input_scale  # a placeholder by contract
    pad = _SCALED_MM_ROW_MULTIPLE if x.is_cuda else 1
    x_q, x_s = scale_1x128(x, column_major_scales=x.is_cuda, pad_rows_to=pad)
    return block_scaled_mm(x_q, x_s, w_q, w_s, x.dtype, bias)


class Fp8BlockLinear(nn.Module):
    """``y = x @ W.T + b`` with W in float8_e4m3fn [N, K] and float32 128x128 block scales [N/128, K/128].

    Input: bfloat16 or float16 (float32 on CPU), any leading shape; output in the input's dtype.
    K must be a multiple of 128. Build from a float weight with :meth:`from_float`.
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = False, *,
                 quantize_in_gemm: bool = True, device=None, bias_dtype: torch.dtype = torch.bfloat16):
        super().__init__()
        if in_features % GROUP_SIZE != 0:
            raise ValueError(f"Fp8BlockLinear: in_features must be a multiple of {GROUP_SIZE}, got {in_features}")
        self.in_features = in_features
        self.out_features = out_features
        self.quantize_in_gemm = quantize_in_gemm
        n_blocks = -(-out_features // WEIGHT_BLOCK)
        k_blocks = in_features // WEIGHT_BLOCK
        self.weight = nn.Parameter(torch.empty((out_features, in_features), dtype=FP8_DTYPE, device=device),
                                   requires_grad=False)
        self.weight_scale = nn.Parameter(torch.empty((n_blocks, k_blocks), dtype=torch.float32, device=device),
                                         requires_grad=False)
        if bias:
            self.bias = nn.Parameter(torch.empty(out_features, dtype=bias_dtype, device=device),
                                     requires_grad=False)
        else:
            self.register_parameter("bias", None)

    @classmethod
    def from_float(cls, weight: torch.Tensor, bias: torch.Tensor | None = None, *,
                   quantize_in_gemm: bool = True) -> Fp8BlockLinear:
        """Quantizes a float weight [N, K] in 128x128 blocks; keeps the bias in its own dtype."""
        out_features, in_features = weight.shape
        layer = cls(in_features, out_features, bias=bias is not None, quantize_in_gemm=quantize_in_gemm,
                    device=weight.device, bias_dtype=bias.dtype if bias is not None else torch.bfloat16)
        w_q, w_s = quantize_weight_128x128(weight)
        with torch.no_grad():
            layer.weight.copy_(w_q)
            layer.weight_scale.copy_(w_s)
            if bias is not None:
                layer.bias.copy_(bias)
        return layer

    def _placeholder_scale(self, x: torch.Tensor) -> torch.Tensor:
        """The input scale that :func:`fp8_blockscale_gemm` ignores: uninitialised, so no kernel runs."""
        return x.new_empty(1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[-1] != self.in_features:
            raise ValueError(f"Fp8BlockLinear: expected last dimension {self.in_features}, got {tuple(x.shape)}")
        lead = x.shape[:-1]
        x2d = x.reshape(-1, self.in_features)
        n_rows = x2d.shape[0]
        if self.quantize_in_gemm:
            out = fp8_blockscale_gemm(x2d, self.weight, self.weight_scale, self._placeholder_scale(x2d),
                                      self.bias)
        else:
            pad = _SCALED_MM_ROW_MULTIPLE if x2d.is_cuda else 1
            x_q, x_s = scale_1x128(x2d, column_major_scales=x2d.is_cuda, pad_rows_to=pad)
            out = block_scaled_mm(x_q, x_s, self.weight, self.weight_scale, x.dtype, self.bias)
        # Rows past n_rows are the M % 4 padding; the first n_rows rows of a row-major result are a view.
        return out[:n_rows].view(*lead, self.out_features)

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}, quantize_in_gemm={self.quantize_in_gemm}")
