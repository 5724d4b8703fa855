"""The fixed reference implementations kernlint's built-in workloads run: FP8 1x128 / 128x128 block
quantization, the block-scaled FP8 linear layer, and FP8 dummy-weight init (torch on CPU, Triton on CUDA).

This package imports nothing else from kernlint; triton is imported lazily, only for CUDA tensors.
Importing it registers the kernels as torch custom ops (``torch.ops.kernlint.scale_1x128``,
``block_scaled_mm``, ``fp8_quant_gemm``) for ``torch.compile`` and CUDA graphs.
"""
from kernlint.reference import _ops  # noqa: F401  (registers the custom ops)
from kernlint.reference.dummy_init import (
    DEFAULT_CHUNK_NUMEL,
    MODES,
    initialize_dummy_weights,
    initialize_single_dummy_weight,
    uniform_fp8_chunked_,
    uniform_fp8_fixed_,
    uniform_fp8_fused_,
    uniform_fp8_grouped_,
)
from kernlint.reference.fused import fp8_quant_gemm
from kernlint.reference.linear import Fp8BlockLinear, block_scaled_mm, fp8_blockscale_gemm, gemm_backend_choices
from kernlint.reference.quant import (
    DEFAULT_EPS,
    FP8_DTYPE,
    GROUP_SIZE,
    WEIGHT_BLOCK,
    dequantize_1x128,
    dequantize_weight_128x128,
    quantize_weight_128x128,
    round_scale_to_ue8m0,
    scale_1x128,
)

__all__ = [
    "DEFAULT_CHUNK_NUMEL", "DEFAULT_EPS", "FP8_DTYPE", "GROUP_SIZE", "MODES", "WEIGHT_BLOCK",
    "Fp8BlockLinear", "block_scaled_mm", "dequantize_1x128", "dequantize_weight_128x128",
    "fp8_blockscale_gemm", "fp8_quant_gemm", "gemm_backend_choices", "initialize_dummy_weights",
    "initialize_single_dummy_weight", "quantize_weight_128x128", "round_scale_to_ue8m0", "scale_1x128",
    "uniform_fp8_chunked_", "uniform_fp8_fixed_", "uniform_fp8_fused_", "uniform_fp8_grouped_",
]
