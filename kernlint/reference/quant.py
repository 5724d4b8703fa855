"""FP8 block quantization: 1x128 per-token-group activations and 128x128 weight blocks.

Activations (DeepSeek-V3 / vLLM ``per_token_group_quant_fp8`` semantics): every row is cut into groups of
128 values; each group gets ``scale = max(amax, eps) / 448`` and ``q = clamp(x / scale, -448, 448)`` in
float8_e4m3fn. With ``ue8m0=True`` the scale is first rounded UP to a power of two (the UE8M0 format of
Blackwell/DeepGEMM scales), so ``q`` still fits.

Scale layouts: row-major ``[M, K/128]``, or column-major (``s.t().contiguous().t()``: strides
``(1, M)``), which is the layout ``torch._scaled_mm`` wants for a 1x128 ``scale_a``.

On CUDA the work is one Triton kernel, ``scale_1x128_kernel``, launched by :func:`scale_1x128`. On CPU the
same math runs as torch ops inside ``record_function("scale_1x128")`` so CPU traces carry the same anchor.
"""
from __future__ import annotations

import torch

from kernlint.reference._shapes import GROUP_SIZE, _check_group_shape

WEIGHT_BLOCK = 128
FP8_DTYPE = torch.float8_e4m3fn
DEFAULT_EPS = 1e-10

__all__ = [
    "GROUP_SIZE", "WEIGHT_BLOCK", "FP8_DTYPE", "DEFAULT_EPS",
    "scale_1x128", "dequantize_1x128", "round_scale_to_ue8m0",
    "quantize_weight_128x128", "dequantize_weight_128x128",
]


def round_scale_to_ue8m0(scale: torch.Tensor) -> torch.Tensor:
    """Rounds positive float32 scales UP to the next power of two (exact: integer ops on the bits)."""
    bits = scale.to(torch.float32).contiguous().view(torch.int32)
    return ((bits + 0x7FFFFF) & 0x7F800000).view(torch.float32).view(scale.shape)


def scale_1x128(
    x: torch.Tensor,
    *,
    eps: float = DEFAULT_EPS,
    ue8m0: bool = False,
    column_major_scales: bool = False,
    pad_rows_to: int = 1,
    out_dtype: torch.dtype = FP8_DTYPE,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Quantizes ``x [..., K]`` in 1x128 groups; returns ``(q [M_out, K], s [M_out, K/128] float32)``.

    Leading dimensions are flattened into ``M``. ``M_out`` is ``M`` rounded up to ``pad_rows_to``; the
    padding rows are written as q = 0 by the same kernel, so a GEMM that needs ``M % 4 == 0`` gets its
    padding without a copy. ``column_major_scales`` gives ``s`` strides ``(1, M_out)``.
    Raises ValueError when K is not a multiple of 128.

    On CUDA, eagerly: a cached launch (see ``_triton_quant``); a new input shape, stride, dtype or
    alignment is validated and planned once. Under ``torch.compile`` the call is the custom op
    ``torch.ops.kernlint.scale_1x128``, which the compiler and CUDA graphs take whole.
    """
    if _compiling():
        return torch.ops.kernlint.scale_1x128(x, eps, ue8m0, column_major_scales, pad_rows_to, out_dtype)
    if x.is_cuda:
        return _cuda_path()(x, eps, ue8m0, column_major_scales, pad_rows_to, out_dtype)
    return _scale_1x128_eager(x, eps, ue8m0, column_major_scales, pad_rows_to, out_dtype)


_compiling = torch.compiler.is_compiling
_CUDA_PATH = []


def _cuda_path():
    """The cached CUDA launch path, imported on first use (triton exists only on CUDA machines)."""
    if not _CUDA_PATH:
        from kernlint.reference._triton_quant import scale_1x128_cuda

        _CUDA_PATH.append(scale_1x128_cuda)
    return _CUDA_PATH[0]


def _scale_1x128_eager(x, eps, ue8m0, column_major_scales, pad_rows_to, out_dtype):
    """Any device, no cache: what the custom op runs, and the CPU path (inside ``record_function``)."""
    if x.is_cuda:
        return _cuda_path()(x, eps, ue8m0, column_major_scales, pad_rows_to, out_dtype)
    k = _check_group_shape(x)
    if pad_rows_to < 1:
        raise ValueError(f"scale_1x128: pad_rows_to must be >= 1, got {pad_rows_to}")
    x2d = x.reshape(-1, k)
    if x2d.stride(-1) != 1:
        x2d = x2d.contiguous()
    n_rows_out = -(-x2d.shape[0] // pad_rows_to) * pad_rows_to
    with torch.profiler.record_function("scale_1x128"):
        return _scale_1x128_torch(x2d, n_rows_out, eps, ue8m0, column_major_scales, out_dtype)


def _scale_1x128_torch(x2d, n_rows_out, eps, ue8m0, column_major, out_dtype):
    n_rows, k = x2d.shape
    fp8_max = torch.finfo(out_dtype).max
    groups = x2d.to(torch.float32).reshape(n_rows, k // GROUP_SIZE, GROUP_SIZE)
    scale = groups.abs().amax(dim=-1).clamp_min(eps) / fp8_max
    if ue8m0:
        scale = round_scale_to_ue8m0(scale)
    q = (groups / scale.unsqueeze(-1)).clamp(-fp8_max, fp8_max).to(out_dtype).reshape(n_rows, k)
    if n_rows_out != n_rows:
        pad = n_rows_out - n_rows
        q = torch.cat([q, torch.zeros((pad, k), dtype=out_dtype)])
        scale = torch.cat([scale, torch.full((pad, scale.shape[1]), eps / fp8_max)])
    if column_major:
        scale = scale.t().contiguous().t()
    return q, scale


def dequantize_1x128(q: torch.Tensor, s: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """``q [M, K]`` times its group scales ``s [M, K/128]``, in ``dtype``."""
    m, k = q.shape
    groups = q.to(dtype).reshape(m, k // GROUP_SIZE, GROUP_SIZE) * s.to(dtype).unsqueeze(-1)
    return groups.reshape(m, k)


def quantize_weight_128x128(
    w: torch.Tensor, *, eps: float = DEFAULT_EPS, out_dtype: torch.dtype = FP8_DTYPE,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Quantizes a weight ``w [N, K]`` in 128x128 blocks: ``(w_q [N, K] fp8, w_s [ceil(N/128), ceil(K/128)] fp32)``.

    Partial edge blocks (N or K not a multiple of 128) take their scale from the values they hold.
    A one-time conversion, so plain torch ops on any device.
    """
    if w.dim() != 2:
        raise ValueError(f"quantize_weight_128x128 expects a 2-D [N, K] weight, got shape {tuple(w.shape)}")
    n, k = w.shape
    nb, kb = -(-n // WEIGHT_BLOCK), -(-k // WEIGHT_BLOCK)
    fp8_max = torch.finfo(out_dtype).max
    padded = torch.zeros((nb * WEIGHT_BLOCK, kb * WEIGHT_BLOCK), dtype=torch.float32, device=w.device)
    padded[:n, :k] = w.to(torch.float32)
    blocks = padded.reshape(nb, WEIGHT_BLOCK, kb, WEIGHT_BLOCK)
    w_s = blocks.abs().amax(dim=(1, 3)).clamp_min(eps) / fp8_max
    w_q = (blocks / w_s[:, None, :, None]).clamp(-fp8_max, fp8_max)
    w_q = w_q.reshape(nb * WEIGHT_BLOCK, kb * WEIGHT_BLOCK)[:n, :k].to(out_dtype).contiguous()
    return w_q, w_s.contiguous()


def dequantize_weight_128x128(w_q: torch.Tensor, w_s: torch.Tensor,
                              dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """``w_q [N, K]`` times its 128x128 block scales, in ``dtype``."""
    n, k = w_q.shape
    scales = w_s.to(dtype).repeat_interleave(WEIGHT_BLOCK, 0).repeat_interleave(WEIGHT_BLOCK, 1)
    return w_q.to(dtype) * scales[:n, :k]
