"""Triton kernel of the 1x128 activation quantization, and its cached launch path. Imported only on CUDA
(CPU machines have no triton).

The kernel's Python name, ``scale_1x128_kernel``, is what traces show for it: rule KL001 anchors on it.

Host path: everything that depends only on the input's shape, strides, dtype, device and pointer alignment
(validation, tile shape, grid, strides, the compiled kernel) is worked out once per such key and kept in a
:class:`QuantPlan`; a later call allocates the outputs and launches through :class:`FastKernel`.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernlint.reference._launch import FastKernel, current_stream, gdc_launch_dependents, pdl_enabled, sm_count
from kernlint.reference._shapes import _check_group_shape

FP8_E4M3_MAX = 448.0
GROUP_SIZE = 128
_F32 = torch.float32


@triton.jit
def scale_1x128_kernel(
    x_ptr, q_ptr, s_ptr,
    n_rows, n_rows_out,
    stride_xm, stride_qm, stride_sm, stride_sg,
    eps, fp8_max,
    BLOCK_M: tl.constexpr,
    GROUP: tl.constexpr,
    UE8M0: tl.constexpr,
    LAUNCH_DEPENDENTS: tl.constexpr = False,
):
    """One program quantizes a [BLOCK_M, 128] tile: one 128-wide group of BLOCK_M rows.

    Rows in [n_rows, n_rows_out) are padding: they read as zero, so they get q = 0 (and scale
    eps / fp8_max), which lets a GEMM that needs M % 4 == 0 skip a separate padding copy.
    """
    if LAUNCH_DEPENDENTS:   # the GEMM after it may start now: it waits for these results where it reads them
        gdc_launch_dependents()
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


def _launch_shape(n_rows_out: int, n_groups: int, device_index: int) -> tuple[int, int]:
    """(BLOCK_M, num_warps): the tallest tile that still leaves >= 4 programs per SM.

    Small M (decode) gets 1-2 row tiles and one warp, so the few bytes spread over all SMs;
    large M gets 64-row tiles so each program moves 16 KiB.
    """
    min_programs = 4 * sm_count(device_index)
    block_m = 1
    while block_m < 64 and triton.cdiv(n_rows_out, 2 * block_m) * n_groups >= min_programs:
        block_m *= 2
    num_warps = max(1, min(8, block_m * GROUP_SIZE // 256))
    return block_m, num_warps


class QuantPlan:
    """What one input key needs: shapes, strides, grid and (after the first launch) the compiled kernel.

    ``flat_view``: the input's rows are addressable as ``[n_rows, k]`` with inner stride 1 and row stride
    ``stride_xm`` without a copy. Where not (odd strides), every call copies and takes the JIT path.
    """

    __slots__ = ("device", "device_index", "n_rows", "n_rows_out", "k", "n_groups", "stride_xm",
                 "stride_sm", "stride_sg", "q_shape", "s_shape", "s_strides", "column_major", "out_dtype",
                 "fp8_max", "block_m", "num_warps", "ue8m0", "grid0", "kernel", "flat_view")

    def __init__(self, x: torch.Tensor, ue8m0: bool, column_major: bool, pad_rows_to: int,
                 out_dtype: torch.dtype):
        k = x.shape[-1]
        n_rows = x.numel() // k if k else 0
        x2d = x.reshape(-1, k)
        self.flat_view = x2d.stride(-1) == 1 and x2d.data_ptr() == x.data_ptr()
        self.stride_xm = x2d.stride(0) if self.flat_view else k
        self.device = x.device
        self.device_index = x.get_device()
        self.n_rows = n_rows
        self.n_rows_out = -(-n_rows // pad_rows_to) * pad_rows_to
        self.k = k
        self.n_groups = k // GROUP_SIZE
        self.column_major = column_major
        self.out_dtype = out_dtype
        self.ue8m0 = ue8m0
        self.q_shape = (self.n_rows_out, k)
        self.s_shape = (self.n_rows_out, self.n_groups)
        if column_major:  # allocated with these strides at once (empty_strided), not empty(...).t()
            self.stride_sm, self.stride_sg = 1, self.n_rows_out
        else:
            self.stride_sm, self.stride_sg = self.n_groups, 1
        self.s_strides = (self.stride_sm, self.stride_sg)
        self.fp8_max = float(torch.finfo(out_dtype).max)
        self.block_m, self.num_warps = _launch_shape(max(self.n_rows_out, 1), max(self.n_groups, 1),
                                                     self.device_index)
        self.grid0 = triton.cdiv(self.n_rows_out, self.block_m)
        self.kernel: FastKernel | None = None

    @property
    def empty(self) -> bool:
        return self.n_rows_out == 0 or self.n_groups == 0

    def launch_jit(self, x2d: torch.Tensor, q: torch.Tensor, s: torch.Tensor, eps: float) -> None:
        """The first launch (compiles; keeps the handle), or every launch where the fast path is off."""
        args = (x2d, q, s, self.n_rows, self.n_rows_out, x2d.stride(0), q.stride(0), s.stride(0), s.stride(1),
                eps, self.fp8_max)
        constexprs = {"BLOCK_M": self.block_m, "GROUP": GROUP_SIZE, "UE8M0": self.ue8m0,
                      "LAUNCH_DEPENDENTS": pdl_enabled(self.device_index)}
        with torch.cuda.device(self.device_index):
            kernel = FastKernel.first_launch(scale_1x128_kernel, (self.grid0, self.n_groups), args, constexprs,
                                             num_warps=self.num_warps)
        if self.flat_view and x2d.stride(0) == self.stride_xm:
            self.kernel = kernel

    def launch(self, stream: int, x_ptr: int, q_ptr: int, s_ptr: int, eps: float) -> None:
        """The fast launch: pointers as ints, layout as planned (q row stride k, s strides as planned)."""
        self.kernel(self.grid0, self.n_groups, 1, stream, x_ptr, q_ptr, s_ptr, self.n_rows, self.n_rows_out,
                    self.stride_xm, self.k, self.stride_sm, self.stride_sg, eps, self.fp8_max)


_PLANS: dict[tuple, QuantPlan] = {}
# The current device as an int, without torch.cuda.current_device's lazy-init check.
_get_device = getattr(torch._C, "_cuda_getDevice", torch.cuda.current_device)


def plan_for(x: torch.Tensor, eps: float, ue8m0: bool, column_major: bool, pad_rows_to: int,
             out_dtype: torch.dtype) -> tuple[tuple, QuantPlan | None]:
    """The cache key of a call and its plan (None on the first call with that key)."""
    key = (x.shape, x.stride(), x.dtype, x.get_device(), (x.data_ptr() & 15) == 0, eps, ue8m0, column_major,
           pad_rows_to, out_dtype)
    return key, _PLANS.get(key)


def scale_1x128_cuda(x: torch.Tensor, eps: float, ue8m0: bool, column_major: bool, pad_rows_to: int,
                     out_dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """``scale_1x128`` on a CUDA tensor; the caller has validated nothing (a new key is validated here)."""
    x_ptr = x.data_ptr()
    key = (x.shape, x.stride(), x.dtype, x.get_device(), (x_ptr & 15) == 0, eps, ue8m0, column_major,
           pad_rows_to, out_dtype)
    plan = _PLANS.get(key)
    if plan is not None and plan.kernel is not None and plan.device_index == _get_device():
        q = torch.empty(plan.q_shape, dtype=out_dtype, device=plan.device)
        s = torch.empty_strided(plan.s_shape, plan.s_strides, dtype=_F32, device=plan.device)
        plan.launch(current_stream(plan.device_index), x_ptr, q.data_ptr(), s.data_ptr(), eps)
        return q, s
    return _scale_1x128_slow(key, plan, x, eps, ue8m0, column_major, pad_rows_to, out_dtype)


def _scale_1x128_slow(key, plan, x, eps, ue8m0, column_major, pad_rows_to, out_dtype):
    if plan is None:
        _check_group_shape(x)
        if pad_rows_to < 1:
            raise ValueError(f"scale_1x128: pad_rows_to must be >= 1, got {pad_rows_to}")
        plan = QuantPlan(x, ue8m0, column_major, pad_rows_to, out_dtype)
        _PLANS[key] = plan
    q = torch.empty(plan.q_shape, dtype=out_dtype, device=plan.device)
    s = torch.empty_strided(plan.s_shape, plan.s_strides, dtype=_F32, device=plan.device)
    if not plan.empty:
        x2d = x.reshape(-1, plan.k)
        if x2d.stride(-1) != 1:
            x2d = x2d.contiguous()
        plan.launch_jit(x2d, q, s, eps)
    return q, s


def scale_1x128_triton(x2d: torch.Tensor, q: torch.Tensor, s: torch.Tensor, eps: float, ue8m0: bool) -> None:
    """Writes q [M_out, K] and s [M_out, K/128] (any strides) for x2d [M, K] (inner stride 1), JIT path.

    Kept for callers that bring their own outputs; :func:`scale_1x128_cuda` is the cached path.
    """
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
