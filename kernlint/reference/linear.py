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

Eager CUDA forward (host time is most of a decode-size call): each layer keeps a plan per input key
(shape, strides, dtype, device, alignment, stream capture): which GEMM, the grid, the compiled kernels.
At M <= ``TRITON_MAX_M`` (and wherever cuBLAS's layout rules fail) the GEMM is the Triton kernel, launched
with the quantization kernel from one workspace allocation; above it, cuBLAS. Under ``torch.compile`` the
layer calls the custom ops ``torch.ops.kernlint.scale_1x128`` and ``torch.ops.kernlint.block_scaled_mm``.
"""
from __future__ import annotations

import torch
from torch import nn

from kernlint.reference.quant import (
    DEFAULT_EPS,
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

# The largest M that takes the Triton GEMM where cuBLAS could run: eagerly (cuBLAS LT's block-scaled call
# costs more host time than a decode-size GEMM takes), and while a CUDA graph is captured. Keep the two
# equal: the eager warm-up before a capture must run what the capture records (a first cuBLAS call inside
# a capture invalidates it). Under capture Triton was also faster on 6 of 9 decode shapes on the H200
# (bench/results/h200-eager.txt).
TRITON_MAX_M = 64
TRITON_MAX_M_CAPTURE = 64

_compiling = torch.compiler.is_compiling
_capturing = torch.cuda.is_current_stream_capturing

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


def _triton_max_m() -> int:
    return TRITON_MAX_M_CAPTURE if _capturing() else TRITON_MAX_M


def _cublas_layout(m: int, n: int, k: int, a_s: torch.Tensor) -> bool:
    # cuBLAS reads the 128x128 weight scales with a 16-byte-aligned row stride: with K/128 % 4 != 0 it
    # accepts the call and silently returns garbage (inf columns at K=256 on the H200, torch 2.11), so
    # only K % 512 == 0, N % 128 == 0 and M % 4 == 0 with column-major scale_a go to cuBLAS.
    return (n % WEIGHT_BLOCK == 0 and (k // GROUP_SIZE) % 4 == 0 and m % _SCALED_MM_ROW_MULTIPLE == 0
            and a_s.stride(0) == 1)


def _block_scaled_mm_cuda(a_q, a_s, w_q, w_s, out_dtype, bias):
    n, k = w_q.shape
    m = a_q.shape[0]
    if m <= _triton_max_m() or not _cublas_layout(m, n, k, a_s):
        return _run_gemm("triton", a_q, a_s, w_q, w_s, out_dtype, bias)
    if bias is not None and bias.dtype != out_dtype:
        bias = bias.to(out_dtype)
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
    128x128 scales ``w_s [ceil(N/128), K/128]``. On CUDA: the Triton kernel at M <= ``TRITON_MAX_M`` and
    wherever cuBLAS's layout rules fail, else cuBLAS block-wise ``torch._scaled_mm`` (M % 4 == 0,
    N % 128 == 0, K % 512 == 0, column-major ``a_s``). On CPU: dequantize, float32 matmul.
    Under ``torch.compile``: the custom op ``torch.ops.kernlint.block_scaled_mm``.
    """
    if _compiling():
        return torch.ops.kernlint.block_scaled_mm(a_q, a_s, w_q, w_s, out_dtype, bias)
    return _block_scaled_mm_eager(a_q, a_s, w_q, w_s, out_dtype, bias)


def _block_scaled_mm_eager(a_q, a_s, w_q, w_s, out_dtype, bias):
    if a_q.is_cuda:
        return _block_scaled_mm_cuda(a_q, a_s, w_q, w_s, out_dtype, bias)
    if bias is not None and bias.dtype != out_dtype:
        bias = bias.to(out_dtype)
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
    if _compiling():
        # One opaque op that takes the placeholder, as vLLM's does: the compiler keeps the placeholder's own
        # work (a new_ones fill) where the eager path has it.
        return torch.ops.kernlint.fp8_blockscale_gemm(x, w_q, w_s, input_scale, bias)
    return _fp8_blockscale_gemm_eager(x, w_q, w_s, input_scale, bias)


def _padded_rows(m: int, is_cuda: bool) -> int:
    """The rows of a quantize-in-GEMM result: M rounded up to cuBLAS's multiple on CUDA."""
    pad = _SCALED_MM_ROW_MULTIPLE if is_cuda else 1
    return (m + pad - 1) // pad * pad


def _fp8_blockscale_gemm_eager(x, w_q, w_s, input_scale, bias):
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
        self._cuda_plans: dict = {}  # eager CUDA forward plans, per input key (see _forward_cuda)
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

    def __getstate__(self):
        # Plans hold compiled-kernel handles: copies and pickles start without them.
        state = self.__dict__.copy()
        state["_cuda_plans"] = {}
        return state

    def _placeholder_scale(self, x: torch.Tensor) -> torch.Tensor:
        """The input scale that :func:`fp8_blockscale_gemm` ignores: uninitialised, so no kernel runs."""
        return x.new_empty(1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.is_cuda and not _compiling():
            return self._forward_cuda(x)
        return self._forward_generic(x)

    def _forward_generic(self, x: torch.Tensor) -> torch.Tensor:
        """Any device; under ``torch.compile`` this is the traced path (the kernels are custom ops)."""
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

    def _forward_cuda(self, x: torch.Tensor) -> torch.Tensor:
        """Eager CUDA: a plan per input key; small M runs quant + Triton GEMM from one workspace."""
        x_ptr = x.data_ptr()
        key = (x.shape, x.stride(), x.dtype, x.get_device(), (x_ptr & 15) == 0, _capturing())
        plans = self.__dict__.get("_cuda_plans")
        if plans is None:
            plans = self.__dict__["_cuda_plans"] = {}
        plan = plans.get(key)
        params = self._parameters  # not self.weight: nn.Module.__getattr__ is slow
        w_q, w_s, bias = params["weight"], params["weight_scale"], params["bias"]
        if plan is None or (plan is not _GENERIC and (
                w_q.dtype is not plan.w_dtype or (bias is not None and bias.dtype is not plan.bias_dtype))):
            plan = plans[key] = self._plan_cuda(x, w_q, w_s, bias)
        if plan is _GENERIC:
            return self._forward_generic(x)
        if self.quantize_in_gemm and type(self)._placeholder_scale is not Fp8BlockLinear._placeholder_scale:
            # The input scale is never read; the base class's (new_empty) has no effect, so it is not built
            # here. An override (the regressed fixture's new_ones) runs, kernel and all, before the quant.
            self._placeholder_scale(x)
        ws = torch.empty(plan.ws_numel, dtype=torch.uint8, device=plan.device)
        out = torch.empty(plan.out_shape, dtype=plan.out_dtype, device=plan.device)
        if not plan.ready or plan.device_index != _get_device():
            plan.run_jit(x, ws, out, w_q, w_s, bias, DEFAULT_EPS)
            return out
        out_ptr = out.data_ptr()
        plan.run(_stream(plan.device_index), x_ptr, ws.data_ptr(), out_ptr, w_q.data_ptr(), w_s.data_ptr(),
                 out_ptr if bias is None else bias.data_ptr(), DEFAULT_EPS)
        return out

    def _plan_cuda(self, x, w_q, w_s, bias):
        if x.shape[-1] != self.in_features:
            raise ValueError(f"Fp8BlockLinear: expected last dimension {self.in_features}, got {tuple(x.shape)}")
        from kernlint.reference._triton_gemm import LinearPlan
        from kernlint.reference._triton_quant import QuantPlan

        k, n = self.in_features, self.out_features
        m = x.numel() // k
        cublas_ok = n % WEIGHT_BLOCK == 0 and (k // GROUP_SIZE) % 4 == 0
        if m == 0 or (m > _triton_max_m() and cublas_ok) or w_q.stride(1) != 1:
            return _GENERIC
        quant = QuantPlan(x, False, True, 1, FP8_DTYPE)
        if not quant.flat_view:
            return _GENERIC
        return LinearPlan(x, w_q, w_s, bias, quant)

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}, quantize_in_gemm={self.quantize_in_gemm}")


# A plan that says: take the generic path (large M on cuBLAS, odd strides, empty input).
_GENERIC = object()


def _get_device() -> int:
    return torch.cuda.current_device()


def _stream(device_index: int) -> int:
    from kernlint.reference._launch import current_stream

    return current_stream(device_index)


def _bind_cuda_helpers() -> None:
    """Swaps the two helpers above for their C-level versions (CUDA torch builds only)."""
    global _get_device, _stream
    getter = getattr(torch._C, "_cuda_getDevice", None)
    raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if getter is not None and raw_stream is not None:
        _get_device, _stream = getter, raw_stream


_bind_cuda_helpers()
