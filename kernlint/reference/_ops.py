"""The reference kernels as torch custom ops (``torch.ops.kernlint.*``), so that ``torch.compile`` and
CUDA graphs take each one whole: the compiler sees one opaque op with a fake (shape-only) implementation,
never the Triton launch code. Eager calls do not go through the dispatcher (it costs host time); the
public functions switch to these ops only while ``torch.compile`` traces them.
"""
from __future__ import annotations

import torch

from kernlint.reference.linear import _block_scaled_mm_eager
from kernlint.reference.quant import GROUP_SIZE, _check_group_shape, _scale_1x128_eager

__all__ = ["OPS"]


def _register():
    lib = "kernlint"

    @torch.library.custom_op(
        f"{lib}::scale_1x128", mutates_args=(),
        schema="(Tensor x, float eps, bool ue8m0, bool column_major_scales, int pad_rows_to, "
               "ScalarType out_dtype) -> (Tensor, Tensor)")
    def scale_1x128_op(x, eps, ue8m0, column_major_scales, pad_rows_to, out_dtype):
        return _scale_1x128_eager(x, eps, ue8m0, column_major_scales, pad_rows_to, out_dtype)

    @scale_1x128_op.register_fake
    def _(x, eps, ue8m0, column_major_scales, pad_rows_to, out_dtype):
        k = _check_group_shape(x)
        if pad_rows_to < 1:
            raise ValueError(f"scale_1x128: pad_rows_to must be >= 1, got {pad_rows_to}")
        n_rows = x.numel() // k
        n_out = (n_rows + pad_rows_to - 1) // pad_rows_to * pad_rows_to
        q = x.new_empty((n_out, k), dtype=out_dtype)
        if column_major_scales:
            s = x.new_empty((k // GROUP_SIZE, n_out), dtype=torch.float32).t()
        else:
            s = x.new_empty((n_out, k // GROUP_SIZE), dtype=torch.float32)
        return q, s

    @torch.library.custom_op(
        f"{lib}::block_scaled_mm", mutates_args=(),
        schema="(Tensor a_q, Tensor a_s, Tensor w_q, Tensor w_s, ScalarType out_dtype, Tensor? bias) -> Tensor")
    def block_scaled_mm_op(a_q, a_s, w_q, w_s, out_dtype, bias):
        return _block_scaled_mm_eager(a_q, a_s, w_q, w_s, out_dtype, bias)

    @block_scaled_mm_op.register_fake
    def _(a_q, a_s, w_q, w_s, out_dtype, bias):
        return a_q.new_empty((a_q.shape[0], w_q.shape[0]), dtype=out_dtype)

    @torch.library.custom_op(
        f"{lib}::fp8_quant_gemm", mutates_args=(),
        schema="(Tensor x, Tensor w_q, Tensor w_s, Tensor? bias) -> Tensor")
    def fp8_quant_gemm_op(x, w_q, w_s, bias):
        from kernlint.reference.fused import _fp8_quant_gemm_eager

        return _fp8_quant_gemm_eager(x, w_q, w_s, bias)

    @fp8_quant_gemm_op.register_fake
    def _(x, w_q, w_s, bias):
        k = _check_group_shape(x)
        return x.new_empty((x.numel() // k, w_q.shape[0]), dtype=x.dtype)

    # The GEMM that quantizes its input itself, with the input scale it never reads as an argument, as vLLM's
    # block-FP8 custom op takes it: the compiler must then make the placeholder (a fill kernel for new_ones, no
    # kernel for new_empty) instead of dropping it as dead code.
    @torch.library.custom_op(
        f"{lib}::fp8_blockscale_gemm", mutates_args=(),
        schema="(Tensor x, Tensor w_q, Tensor w_s, Tensor? input_scale, Tensor? bias) -> Tensor")
    def fp8_blockscale_gemm_op(x, w_q, w_s, input_scale, bias):
        from kernlint.reference.linear import _fp8_blockscale_gemm_eager

        return _fp8_blockscale_gemm_eager(x, w_q, w_s, input_scale, bias)

    @fp8_blockscale_gemm_op.register_fake
    def _(x, w_q, w_s, input_scale, bias):
        from kernlint.reference.linear import _padded_rows

        k = _check_group_shape(x)
        return x.new_empty((_padded_rows(x.numel() // k, x.is_cuda), w_q.shape[0]), dtype=x.dtype)

    return {"scale_1x128": scale_1x128_op, "block_scaled_mm": block_scaled_mm_op,
            "fp8_quant_gemm": fp8_quant_gemm_op, "fp8_blockscale_gemm": fp8_blockscale_gemm_op}


OPS = _register()
