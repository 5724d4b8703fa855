"""Shape checks shared by the eager and the Triton quantization paths (a module of its own, so neither
imports the other to reach them)."""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

GROUP_SIZE = 128   # activations are quantized per 1 x GROUP_SIZE group


def _check_group_shape(x: torch.Tensor) -> int:
    if x.dim() < 1:
        raise ValueError("scale_1x128 needs a tensor with a last (K) dimension, got a scalar")
    k = x.shape[-1]
    if k % GROUP_SIZE != 0:
        raise ValueError(
            f"scale_1x128: K (the last dimension) must be a multiple of {GROUP_SIZE}, got K={k} "
            f"(shape {tuple(x.shape)}); pad K or use a block size that divides it")
    if not x.is_floating_point() or x.element_size() < 2:
        raise ValueError(f"scale_1x128: input must be float16/bfloat16/float32, got {x.dtype}")
    return k
