"""Triton block-scaled FP8 GEMM: the fallback where cuBLAS block-wise ``torch._scaled_mm`` is unavailable.

``out[M, N] = (A * scale_a) @ (W * scale_w).T (+ bias)``, A fp8 [M, K] with 1x128 scales [M, K/128],
W fp8 [N, K] with 128x128 scales [ceil(N/128), K/128]. Imported only on CUDA.

It is also the small-M path of ``Fp8BlockLinear``: at decode sizes cuBLAS LT's block-scaled ``_scaled_mm``
costs more host time per eager call (19-24 us on the H200) than this kernel launched through a cached
:class:`FastKernel` (13-19 us), and under CUDA graphs it was faster on 6 of 9 decode shapes
(bench/results/h200-eager.txt). Tiles there are thin (BLOCK_M 16-64, BLOCK_N 32-64) so that enough
programs stream the weight to fill the GPU.
"""
from __future__ import annotations

import functools

import torch
import triton
import triton.language as tl

from kernlint.reference._launch import FastKernel, current_stream


@triton.jit
def grouped_tile(pid, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, GROUP_M: tl.constexpr):
    """(row tile, column tile) of program `pid` in grouped order: GROUP_M row tiles share each W column
    tile while it is in L2."""
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    pids_per_group = GROUP_M * num_pid_n
    first_m = (pid // pids_per_group) * GROUP_M
    group_rows = tl.minimum(num_pid_m - first_m, GROUP_M)
    return first_m + (pid % pids_per_group) % group_rows, (pid % pids_per_group) // group_rows


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
    pid_m, pid_n = grouped_tile(tl.program_id(0), M, N, BLOCK_M, BLOCK_N, GROUP_M)

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


@functools.cache
def _sm_count(device_index: int) -> int:
    return torch.cuda.get_device_properties(device_index).multi_processor_count


def gemm_config(m: int, n: int, device_index: int) -> tuple[int, int, int, int]:
    """(BLOCK_M, BLOCK_N, num_warps, num_stages) for an [m, K] x [K, n] block-scaled GEMM."""
    if m > 64:
        return 128, 128, 8, 4
    block_m = 16 if m <= 16 else (32 if m <= 32 else 64)
    # Thin tiles: 64 wide, or 32 where 64 leaves SMs without a program (the weight stream is the whole
    # cost). On the H200 at M=16 this was the best of BLOCK_N 32/64/128 x 3-8 stages for all three
    # DeepSeek-V3 shapes but one, where it was 3% off (bench/results/h200-eager.txt).
    block_n = 64
    while block_n > 32 and triton.cdiv(n, block_n) * triton.cdiv(m, block_m) < _sm_count(device_index):
        block_n //= 2
    return block_m, block_n, 4, SMALL_M_STAGES


# Software-pipelining depth for the thin decode tiles (3-4 beat 6-8 on the H200).
SMALL_M_STAGES = 3


class GemmPlan:
    """A launch of ``fp8_block_scaled_gemm_kernel`` for one set of shapes, strides, dtypes and alignments."""

    __slots__ = ("m", "n", "k", "grid", "config", "has_bias", "kernel", "strides")

    def __init__(self, m: int, n: int, k: int, strides: tuple, has_bias: bool, config: tuple):
        self.m, self.n, self.k = m, n, k
        self.strides = strides  # (stride_am, stride_asm, stride_asg, stride_wn, stride_wsn, stride_wsg, stride_om)
        self.has_bias = has_bias
        self.config = config
        block_m, block_n = config[0], config[1]
        self.grid = triton.cdiv(m, block_m) * triton.cdiv(n, block_n)
        self.kernel: FastKernel | None = None

    def launch_jit(self, a_q, a_s, w_q, w_s, bias, out) -> None:
        block_m, block_n, num_warps, num_stages = self.config
        args = (a_q, a_s, w_q, w_s, bias if bias is not None else out, out, self.m, self.n, self.k, *self.strides)
        constexprs = {"HAS_BIAS": self.has_bias, "BLOCK_M": block_m, "BLOCK_N": block_n, "BLOCK_K": 128,
                      "GROUP_M": 8}
        with torch.cuda.device(out.device):
            self.kernel = FastKernel.first_launch(fp8_block_scaled_gemm_kernel, (self.grid,), args, constexprs,
                                                  num_warps=num_warps, num_stages=num_stages)

    def launch(self, stream: int, a_ptr: int, a_s_ptr: int, w_ptr: int, w_s_ptr: int, bias_ptr: int,
               out_ptr: int) -> None:
        self.kernel(self.grid, 1, 1, stream, a_ptr, a_s_ptr, w_ptr, w_s_ptr, bias_ptr, out_ptr,
                    self.m, self.n, self.k, *self.strides)


_PLANS: dict[tuple, GemmPlan] = {}


def _aligned(t: torch.Tensor) -> bool:
    return (t.data_ptr() & 15) == 0


def block_scaled_mm_triton(a_q: torch.Tensor, a_s: torch.Tensor, w_q: torch.Tensor, w_s: torch.Tensor,
                           out_dtype: torch.dtype, bias: torch.Tensor | None = None,
                           config: tuple[int, int, int, int] | None = None) -> torch.Tensor:
    """``a_q [M, K]`` (1x128 scales ``a_s``, any strides) times ``w_q [N, K]`` (128x128 scales ``w_s``).

    ``config`` = (BLOCK_M, BLOCK_N, num_warps, num_stages) overrides :func:`gemm_config` (benchmarks).
    """
    if a_q.stride(1) != 1:
        a_q = a_q.contiguous()
    if w_q.stride(1) != 1:
        w_q = w_q.contiguous()
    m, k = a_q.shape
    n = w_q.shape[0]
    device_index = a_q.get_device()
    key = (m, n, k, a_q.stride(0), a_s.stride(), w_q.stride(0), w_s.stride(), a_q.dtype, w_q.dtype, out_dtype,
           None if bias is None else bias.dtype, device_index, _aligned(a_q), _aligned(a_s), _aligned(w_q),
           _aligned(w_s), bias is None or _aligned(bias), config)
    plan = _PLANS.get(key)
    out = torch.empty((m, n), dtype=out_dtype, device=a_q.device)
    if m == 0 or n == 0:
        return out
    if plan is None:
        if config is None:
            config = gemm_config(m, n, device_index)
        strides = (a_q.stride(0), a_s.stride(0), a_s.stride(1), w_q.stride(0), w_s.stride(0), w_s.stride(1), n)
        plan = GemmPlan(m, n, k, strides, bias is not None, config)
        _PLANS[key] = plan
    if plan.kernel is None or device_index != torch.cuda.current_device():
        plan.launch_jit(a_q, a_s, w_q, w_s, bias, out)
        return out
    out_ptr = out.data_ptr()
    plan.launch(current_stream(device_index), a_q.data_ptr(), a_s.data_ptr(), w_q.data_ptr(), w_s.data_ptr(),
                out_ptr if bias is None else bias.data_ptr(), out_ptr)
    return out


class LinearPlan:
    """``Fp8BlockLinear``'s eager forward for one input key: the quantization kernel writes q and its
    column-major scales into one workspace allocation, the GEMM reads them from there."""

    __slots__ = ("quant", "gemm", "device", "device_index", "m", "k", "n", "ws_numel", "s_offset",
                 "out_shape", "out_dtype", "w_dtype", "bias_dtype")

    def __init__(self, x: torch.Tensor, w_q: torch.Tensor, w_s: torch.Tensor, bias: torch.Tensor | None,
                 quant_plan):
        self.quant = quant_plan
        self.m, self.k = quant_plan.n_rows, quant_plan.k
        self.n = w_q.shape[0]
        self.device = x.device
        self.device_index = x.get_device()
        q_bytes = self.m * self.k
        self.s_offset = -(-q_bytes // 16) * 16  # keeps the scales 16-byte aligned, as planned
        self.ws_numel = self.s_offset + 4 * self.m * quant_plan.n_groups
        self.out_shape = (*x.shape[:-1], self.n)
        self.out_dtype = x.dtype
        self.w_dtype = w_q.dtype
        self.bias_dtype = None if bias is None else bias.dtype
        strides = (self.k, 1, self.m, w_q.stride(0), w_s.stride(0), w_s.stride(1), self.n)
        self.gemm = GemmPlan(self.m, self.n, self.k, strides, bias is not None,
                             gemm_config(self.m, self.n, self.device_index))

    @property
    def ready(self) -> bool:
        return self.quant.kernel is not None and self.gemm.kernel is not None

    def run_jit(self, x, ws, out, w_q, w_s, bias, eps: float) -> None:
        """First call (compiles both kernels) or a call where the fast path is off: tensor views."""
        m, k = self.m, self.k
        q = ws[: m * k].view(self.quant.out_dtype).view(m, k)
        s = ws[self.s_offset: self.ws_numel].view(torch.float32).view(self.quant.n_groups, m).t()
        self.quant.launch_jit(x.reshape(-1, k), q, s, eps)
        self.gemm.launch_jit(q, s, w_q, w_s, bias, out.view(m, self.n))

    def run(self, stream: int, x_ptr: int, ws_ptr: int, out_ptr: int, w_ptr: int, w_s_ptr: int,
            bias_ptr: int, eps: float) -> None:
        s_ptr = ws_ptr + self.s_offset
        self.quant.launch(stream, x_ptr, ws_ptr, s_ptr, eps)
        self.gemm.launch(stream, ws_ptr, s_ptr, w_ptr, w_s_ptr, bias_ptr, out_ptr)
