"""Triton block-scaled FP8 GEMM for decode sizes (M <= 64): swap-AB, persistent stream-K. Imported only on CUDA.

EXPERIMENTAL, off (``_triton_gemm.USE_DECODE_GEMM``): issue 42's design, not yet proven on a GPU. Its first
version (Triton's pipeliner over the flat loop) was correct on the H200 (0 mismatches over 7 shapes x 5 M x
8 configs, graph replay equal) but 2.2-4.3x the read-only kernel's time, slower than split-K; the stages did
not matter, so the loop with its epilogue inside was not pipelined. This version loads two units ahead in
registers instead: correct on the H200 too, and slower still (M = 16, cold: 2.9-3.7x read-only;
bench/results/issue42-h200.txt).

``out[M, N] = (A * scale_a) @ (W * scale_w).T (+ bias)``, as ``fp8_block_scaled_gemm_kernel``; the two give
the same result within the documented tolerance (they sum the K blocks in different groupings).

At decode sizes reading the weight is the whole cost, and what keeps a GEMM from the read-only kernel's
time is the latency between weight bytes: a pipeline that drains at every tile, a partial-tile round trip
through an atomic counter and a reload by whoever arrives last. This kernel:

* swaps A and B: the weight tile [BLOCK_N, 128] is the MMA's M side (64 or 128 rows, Hopper's wgmma
  shape) and the few activation rows its N side (16..64), so no MMA lane computes padding rows of A;
* runs one program per SM (or a few) over a contiguous stretch of the flattened (tile, K block) space:
  the loop is one software pipeline from the program's first weight block to its last, across tile
  boundaries, so weight loads never wait for an epilogue;
* finishes a tile shared between programs without a last-arrival race: program p's stretch starts in the
  middle of a tile that p - 1 began, so p writes that piece first of all (its partial and a flag), and
  p - 1, which began the tile, adds the pieces in program order at the end of its own stretch (the flag
  set long before) and writes the tile. The sum's order is fixed, so the result does not depend on
  timing. The consumer clears each flag it reads, ready for the next launch and for graph replay.

All programs of a launch are resident at once (the grid is at most the SMs times the programs each SM
holds), and a program waits only for pieces that its successors write before they wait on anything, so
the waits cannot deadlock.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernlint.reference._launch import FastKernel, gdc_wait, pdl_enabled, sm_count


@triton.jit
def _unit_ptrs(u, k_blocks, a_rows, a_s_rows, w_ptr, w_s_ptr, offs_j, offs_k, N, stride_wn, stride_wsn, stride_wsg,
               stride_asg, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """Where unit u (tile u // k_blocks, K block u % k_blocks) reads: the weight tile, the activation block,
    their scales."""
    tile = u // k_blocks
    kb = u - tile * k_blocks
    offs_n = tile * BLOCK_N + offs_j
    w = w_ptr + offs_n[:, None].to(tl.int64) * stride_wn + (kb * BLOCK_K + offs_k)[None, :]
    # BLOCK_N divides 128: one weight-scale block row covers the tile
    w_s = w_s_ptr + ((tile * BLOCK_N) // 128) * stride_wsn + kb * stride_wsg
    return w, offs_n < N, a_rows + kb * BLOCK_K, a_s_rows + kb * stride_asg, w_s


@triton.jit
def fp8_decode_gemm_kernel(
    a_ptr, a_s_ptr, w_ptr, w_s_ptr, bias_ptr, out_ptr, partial_ptr, flags_ptr,
    M, N, K,
    stride_am, stride_asm, stride_asg,
    stride_wn, stride_wsn, stride_wsg,
    stride_om,
    HAS_BIAS: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    NUM_STAGES: tl.constexpr, WAIT_PRIOR: tl.constexpr = False,
):
    """Program pid sums units [u_start, u_end) of the flattened (tile, K block) space. The weight loads run
    two units ahead in registers (issued before the current unit's MMA and epilogue, used two iterations
    later): Triton's own pipeliner does not pipeline a loop with an epilogue inside."""
    pid = tl.program_id(0)
    programs = tl.num_programs(0)
    k_blocks = tl.cdiv(K, BLOCK_K)
    units = tl.cdiv(N, BLOCK_N) * k_blocks
    u_start = (pid * units) // programs
    u_end = ((pid + 1) * units) // programs

    offs_m = tl.arange(0, BLOCK_M)
    offs_j = tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    m_ok = offs_m < M
    a_rows = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :]
    a_s_rows = a_s_ptr + offs_m * stride_asm

    # the weight does not depend on the kernel before (the quantization): its first loads go out before the wait
    w_p, n_ok, a_p, as_p, ws_p = _unit_ptrs(u_start, k_blocks, a_rows, a_s_rows, w_ptr, w_s_ptr, offs_j, offs_k,
                                            N, stride_wn, stride_wsn, stride_wsg, stride_asg, BLOCK_N, BLOCK_K)
    w0 = tl.load(w_p, mask=n_ok[:, None] & (u_start < u_end), other=0.0)
    ws0 = tl.load(ws_p, mask=u_start < u_end, other=0.0)
    w_p, n_ok, a_p1, as_p1, ws_p = _unit_ptrs(u_start + 1, k_blocks, a_rows, a_s_rows, w_ptr, w_s_ptr, offs_j,
                                              offs_k, N, stride_wn, stride_wsn, stride_wsg, stride_asg,
                                              BLOCK_N, BLOCK_K)
    w1 = tl.load(w_p, mask=n_ok[:, None] & (u_start + 1 < u_end), other=0.0)
    ws1 = tl.load(ws_p, mask=u_start + 1 < u_end, other=0.0)
    if WAIT_PRIOR:
        gdc_wait()
    a0 = tl.load(a_p, mask=m_ok[:, None] & (u_start < u_end), other=0.0)
    as0 = tl.load(as_p, mask=m_ok & (u_start < u_end), other=0.0)
    a1 = tl.load(a_p1, mask=m_ok[:, None] & (u_start + 1 < u_end), other=0.0)
    as1 = tl.load(as_p1, mask=m_ok & (u_start + 1 < u_end), other=0.0)

    acc = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
    for u in tl.range(u_start, u_end, num_stages=1):
        ahead = u + 2 < u_end
        w_p, n_ok2, a_p, as_p, ws_p = _unit_ptrs(u + 2, k_blocks, a_rows, a_s_rows, w_ptr, w_s_ptr, offs_j,
                                                 offs_k, N, stride_wn, stride_wsn, stride_wsg, stride_asg,
                                              BLOCK_N, BLOCK_K)
        w2 = tl.load(w_p, mask=n_ok2[:, None] & ahead, other=0.0)
        ws2 = tl.load(ws_p, mask=ahead, other=0.0)
        a2 = tl.load(a_p, mask=m_ok[:, None] & ahead, other=0.0)
        as2 = tl.load(as_p, mask=m_ok & ahead, other=0.0)

        tile = u // k_blocks
        kb = u - tile * k_blocks
        acc += tl.dot(w0, tl.trans(a0)) * (as0[None, :] * ws0)
        if kb == k_blocks - 1 or u == u_end - 1:
            offs_n = tile * BLOCK_N + offs_j
            if tile * k_blocks < u_start:
                # the tail of a tile that program pid - 1 began: hand it over, first thing this program does
                piece = (partial_ptr + pid.to(tl.int64) * (BLOCK_N * BLOCK_M)
                         + offs_j[:, None] * BLOCK_M + offs_m[None, :])
                tl.store(piece, acc)
                tl.debug_barrier()   # every warp's part is written before the flag is (release)
                tl.atomic_xchg(flags_ptr + pid, 1, sem="release")
                acc = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
            elif kb == k_blocks - 1:
                # a whole tile of this program's
                out = acc
                if HAS_BIAS:
                    out += tl.load(bias_ptr + offs_n, mask=offs_n < N, other=0.0).to(tl.float32)[:, None]
                tl.store(out_ptr + offs_m[None, :] * stride_om + offs_n[:, None],
                         out.to(out_ptr.dtype.element_ty), mask=m_ok[None, :] & (offs_n < N)[:, None])
                acc = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
            # else: this program began the tile and its stretch ends inside it: finished after the loop
        w0, ws0, a0, as0 = w1, ws1, a1, as1
        w1, ws1, a1, as1 = w2, ws2, a2, as2

    last = u_end - 1
    tile = last // k_blocks
    if (last - tile * k_blocks != k_blocks - 1) and (tile * k_blocks >= u_start) and (u_end > u_start):
        # add the pieces of the programs after this one that hold the rest of the tile, in program order
        tile_end = (tile + 1) * k_blocks
        q = pid + 1
        while (q < programs) and ((q * units) // programs < tile_end):
            while tl.atomic_cas(flags_ptr + q, 1, 0, sem="acquire") != 1:
                pass
            piece = (partial_ptr + q.to(tl.int64) * (BLOCK_N * BLOCK_M)
                     + offs_j[:, None] * BLOCK_M + offs_m[None, :])
            acc += tl.load(piece, cache_modifier=".cg")
            q += 1
        offs_n = tile * BLOCK_N + offs_j
        if HAS_BIAS:
            acc += tl.load(bias_ptr + offs_n, mask=offs_n < N, other=0.0).to(tl.float32)[:, None]
        tl.store(out_ptr + offs_m[None, :] * stride_om + offs_n[:, None],
                 acc.to(out_ptr.dtype.element_ty), mask=m_ok[None, :] & (offs_n < N)[:, None])


# (BLOCK_M, BLOCK_N, num_warps, num_stages, programs per SM)
DecodeConfig = tuple[int, int, int, int, int]


def decode_config(m: int, n: int, k: int, device_index: int) -> DecodeConfig:
    """The launch configuration for an [m <= 64, K] x [K, n] block-scaled GEMM."""
    block_m = 16 if m <= 16 else (32 if m <= 32 else 64)
    return block_m, 128, 4, 4, 1


def decode_programs(config: DecodeConfig, m: int, n: int, k: int, device_index: int) -> int:
    units = triton.cdiv(n, config[1]) * triton.cdiv(k, 128)
    return max(1, min(units, config[4] * sm_count(device_index)))


class DecodeGemmPlan:
    """A launch of ``fp8_decode_gemm_kernel`` for one set of shapes, strides, dtypes and alignments; the same
    interface as :class:`kernlint.reference._triton_gemm.GemmPlan`.

    The caller passes a float32 scratch buffer of ``partial_numel`` elements to each launch (uninitialised:
    each program writes at most one piece there). Launches of one plan must not overlap in time (two streams
    running the same plan at once would share its flags)."""

    __slots__ = ("m", "n", "k", "grid", "config", "has_bias", "kernel", "strides", "partial_numel", "flags",
                 "flags_ptr")

    def __init__(self, m: int, n: int, k: int, strides: tuple, has_bias: bool, config: DecodeConfig,
                 device: torch.device, flags: torch.Tensor):
        self.m, self.n, self.k = m, n, k
        self.strides = strides  # (stride_am, stride_asm, stride_asg, stride_wn, stride_wsn, stride_wsg, stride_om)
        self.has_bias = has_bias
        self.config = config
        self.grid = decode_programs(config, m, n, k, device.index)
        self.flags = flags
        self.flags_ptr = flags.data_ptr()
        self.partial_numel = self.grid * config[0] * config[1]
        self.kernel: FastKernel | None = None

    def launch_jit(self, a_q, a_s, w_q, w_s, bias, out, partial) -> None:
        block_m, block_n, num_warps, num_stages, _ = self.config
        args = (a_q, a_s, w_q, w_s, bias if bias is not None else out, out, partial, self.flags,
                self.m, self.n, self.k, *self.strides)
        pdl = pdl_enabled(out.device.index)
        constexprs = {"HAS_BIAS": self.has_bias, "BLOCK_M": block_m, "BLOCK_N": block_n, "BLOCK_K": 128,
                      "NUM_STAGES": num_stages, "WAIT_PRIOR": pdl}
        options = {"launch_pdl": True} if pdl else {}
        with torch.cuda.device(out.device):
            self.kernel = FastKernel.first_launch(fp8_decode_gemm_kernel, (self.grid,), args, constexprs,
                                                  num_warps=num_warps, num_stages=num_stages, **options)

    def launch(self, stream: int, a_ptr: int, a_s_ptr: int, w_ptr: int, w_s_ptr: int, bias_ptr: int,
               out_ptr: int, partial_ptr: int) -> None:
        self.kernel(self.grid, 1, 1, stream, a_ptr, a_s_ptr, w_ptr, w_s_ptr, bias_ptr, out_ptr, partial_ptr,
                    self.flags_ptr, self.m, self.n, self.k, *self.strides)
