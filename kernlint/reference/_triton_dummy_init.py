"""Fused single-kernel FP8 dummy-weight init (Triton). Imported only on CUDA.

Random-number generation bounds a naive kernel (one ``tl.rand`` per value runs ~8x above the write
ceiling on an H200). Here one Philox call (``tl.randint4x``) gives four 32-bit words and each word gives
four FP8 values (one byte of randomness each), so one call feeds 16 bytes of output; the byte -> FP8
conversion is inline PTX and each thread writes 16 contiguous bytes. Measured on the H200 for 128 Mi
e4m3 values: 0.046 ms, 1.07x ``fill_`` of the same bytes (bench/results/h200.txt). Each byte b maps to ``low + (b + 0.5) * (high - low) / 256``, rounded to FP8: 256 evenly spaced
levels over [low, high]. They are coarser than the e4m3 grid only for |x| < (high - low) / 16, so the
finest FP8 values near zero never occur (74 distinct e4m3 values in [-1, 1], against ~113 from an fp16
uniform fill; in vLLM's default [-1e-3, 1e-3] both give the same three: 0 and +-2**-9).
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

TL_FP8 = {
    torch.float8_e4m3fn: tl.float8e4nv,
    torch.float8_e5m2: tl.float8e5,
}

# Tuned on the H200 (bench/bench_dummy_init.py sweeps these; 512-2048 x 4-8 warps lie within 10%);
# 16 * BLOCK bytes per program.
DEFAULT_BLOCK = 1024
DEFAULT_NUM_WARPS = 4
# Philox rounds (Triton's and cuRAND's default is 10). 7 ran ~15% faster on the H200; kept at 10 for margin.
DEFAULT_N_ROUNDS = 10


# One 32-bit random word -> four FP8 values packed in one word, in PTX (sm_89+): prmt builds the float
# 2^23 + byte for each byte (an exact int->float in one instruction), sub/fma map it to
# low + (byte + 0.5) * step, and cvt.*x2 packs two FP8 values per instruction. ~4 instructions a byte,
# against ~7 for the same math written in Triton.
_PTX_WORD_TO_FP8X4 = """
{
.reg .b32 u<4>;
.reg .f32 f<4>;
.reg .b16 h<2>;
.reg .b32 magic;
mov.b32 magic, 0x4B000000;
prmt.b32 u0, $1, magic, 0x7540;
prmt.b32 u1, $1, magic, 0x7541;
prmt.b32 u2, $1, magic, 0x7542;
prmt.b32 u3, $1, magic, 0x7543;
mov.b32 f0, u0;
mov.b32 f1, u1;
mov.b32 f2, u2;
mov.b32 f3, u3;
sub.f32 f0, f0, 0f4B000000;
sub.f32 f1, f1, 0f4B000000;
sub.f32 f2, f2, 0f4B000000;
sub.f32 f3, f3, 0f4B000000;
fma.rn.f32 f0, f0, $2, $3;
fma.rn.f32 f1, f1, $2, $3;
fma.rn.f32 f2, f2, $2, $3;
fma.rn.f32 f3, f3, $2, $3;
cvt.rn.satfinite.FP8KINDx2.f32 h0, f1, f0;
cvt.rn.satfinite.FP8KINDx2.f32 h1, f3, f2;
mov.b32 $0, {h0, h1};
}
"""
_PTX_BY_DTYPE = {
    torch.float8_e4m3fn: _PTX_WORD_TO_FP8X4.replace("FP8KIND", "e4m3"),
    torch.float8_e5m2: _PTX_WORD_TO_FP8X4.replace("FP8KIND", "e5m2"),
}


@triton.jit
def _byte_to_fp8_bits(byte, offset, step, FP8: tl.constexpr):
    # 2^23 + byte as a float, minus 2^23: an exact int->float.
    level = (byte | 0x4B000000).to(tl.float32, bitcast=True) - 8388608.0
    return (level * step + offset).to(FP8).to(tl.uint8, bitcast=True).to(tl.uint32)


@triton.jit
def _word_of_four_fp8(r, offset, step, FP8: tl.constexpr, PTX: tl.constexpr, ASM: tl.constexpr):
    if PTX:
        # Scalars broadcast to r's shape: inline asm takes tensors.
        step_t = tl.zeros(r.shape, tl.float32) + step
        offset_t = tl.zeros(r.shape, tl.float32) + offset
        return tl.inline_asm_elementwise(ASM, "=r,r,f,f", [r, step_t, offset_t], dtype=tl.int32,
                                         is_pure=True, pack=1)
    q0 = _byte_to_fp8_bits(r & 0xFF, offset, step, FP8)
    q1 = _byte_to_fp8_bits((r >> 8) & 0xFF, offset, step, FP8)
    q2 = _byte_to_fp8_bits((r >> 16) & 0xFF, offset, step, FP8)
    q3 = _byte_to_fp8_bits(r >> 24, offset, step, FP8)
    return (q0 | (q1 << 8) | (q2 << 16) | (q3 << 24)).to(tl.int32, bitcast=True)


@triton.jit
def fp8_uniform_init_kernel(
    words_ptr, tail_ptr, n_words, n_tail, seed, offset, step,
    BLOCK: tl.constexpr, FP8: tl.constexpr, N_ROUNDS: tl.constexpr, PTX: tl.constexpr, ASM: tl.constexpr,
):
    """Writes 4 * BLOCK int32 words (16 * BLOCK FP8 values) per program; program 0 also writes the
    0-3 trailing bytes that do not fill a word.

    Philox counter c feeds words 4c..4c+3 and the tail takes counters past the last word's, so the values
    depend on (seed, N_ROUNDS, numel) only, not on BLOCK or num_warps.
    """
    pid = tl.program_id(0)
    r0, r1, r2, r3 = tl.randint4x(seed, pid * BLOCK + tl.arange(0, BLOCK), N_ROUNDS)
    # Interleave the four results so each thread's four words are adjacent: one 16-byte store a thread,
    # with no shared-memory layout conversion (the order of random words is immaterial).
    words = tl.interleave(
        tl.interleave(_word_of_four_fp8(r0, offset, step, FP8, PTX, ASM),
                      _word_of_four_fp8(r1, offset, step, FP8, PTX, ASM)),
        tl.interleave(_word_of_four_fp8(r2, offset, step, FP8, PTX, ASM),
                      _word_of_four_fp8(r3, offset, step, FP8, PTX, ASM)))
    word_idx = pid.to(tl.int64) * (4 * BLOCK) + tl.arange(0, 4 * BLOCK)
    tl.store(words_ptr + word_idx, words, mask=word_idx < n_words)
    if pid == 0:
        if n_tail > 0:
            # Counters past the last word's: a stream of its own.
            tail_lanes = tl.arange(0, 4)
            t0, _, _, _ = tl.randint4x(seed, (n_words + 3) // 4 + tail_lanes, N_ROUNDS)
            bits = _byte_to_fp8_bits(t0 & 0xFF, offset, step, FP8).to(tl.uint8)
            tl.store(tail_ptr + tail_lanes, bits, mask=tail_lanes < n_tail)


def fp8_uniform_fused_(flat_bytes: torch.Tensor, fp8_dtype: torch.dtype, low: float, high: float, seed: int,
                       *, block: int = DEFAULT_BLOCK, num_warps: int = DEFAULT_NUM_WARPS,
                       n_rounds: int = DEFAULT_N_ROUNDS, ptx: bool = True) -> None:
    """Fills ``flat_bytes`` (a 1-D uint8 view of an FP8 tensor's memory, 4-byte aligned) in one launch.

    ``ptx=False`` does the byte -> FP8 conversion in plain Triton ops (same values; slower).
    """
    n = flat_bytes.numel()
    n_words = n // 4
    n_tail = n - 4 * n_words
    words = flat_bytes[: 4 * n_words].view(torch.int32)
    tail = flat_bytes[4 * n_words:] if n_tail else flat_bytes
    step = (high - low) / 256.0
    grid = (max(1, triton.cdiv(n_words, 4 * block)),)
    fp8_uniform_init_kernel[grid](
        words, tail, n_words, n_tail, seed, low + 0.5 * step, step,
        BLOCK=block, FP8=TL_FP8[fp8_dtype], N_ROUNDS=n_rounds, PTX=ptx, ASM=_PTX_BY_DTYPE[fp8_dtype],
        num_warps=num_warps,
    )


# Grouped init: one launch for many tensors. Each program fills ITERS consecutive BLOCK-sized pieces of
# one tensor; the values stay those of fp8_uniform_init_kernel, which depend on (seed, N_ROUNDS, numel).


@triton.jit(do_not_specialize=["n_tensors", "seed"])
def fp8_uniform_init_grouped_kernel(
    table_ptr, n_tensors, seed, offset, step,
    BLOCK: tl.constexpr, ITERS: tl.constexpr, SEARCH_STEPS: tl.constexpr, FP8: tl.constexpr,
    N_ROUNDS: tl.constexpr, PTX: tl.constexpr, ASM: tl.constexpr,
):
    """``table`` is int64 [3, n_tensors]: first program, data pointer (16-byte aligned), numel.

    A program finds its tensor by binary search over the first-program row, then writes exactly what
    ``fp8_uniform_init_kernel`` writes there: bit-identical to one launch per tensor.
    """
    pid = tl.program_id(0)
    lo = pid * 0
    hi = lo + n_tensors
    for _step in tl.static_range(SEARCH_STEPS):  # invariant: starts[lo] <= pid < starts[hi]
        mid = (lo + hi) // 2
        right = tl.load(table_ptr + mid) <= pid
        lo = tl.where(right, mid, lo)
        hi = tl.where(right, hi, mid)
    local = pid - tl.load(table_ptr + lo)
    base = tl.load(table_ptr + n_tensors + lo)
    numel = tl.load(table_ptr + 2 * n_tensors + lo)
    n_words = numel // 4
    words_ptr = tl.multiple_of(base, 16).to(tl.pointer_type(tl.int32))
    lanes = tl.arange(0, 4 * BLOCK)
    for i in tl.static_range(ITERS):
        piece = local * ITERS + i
        # int32 counters, as the per-tensor kernel's: randint4x runs 64-bit Philox on int64 ones.
        counters = piece.to(tl.int32) * BLOCK + tl.arange(0, BLOCK)
        r0, r1, r2, r3 = tl.randint4x(seed, counters, N_ROUNDS)
        words = tl.interleave(
            tl.interleave(_word_of_four_fp8(r0, offset, step, FP8, PTX, ASM),
                          _word_of_four_fp8(r1, offset, step, FP8, PTX, ASM)),
            tl.interleave(_word_of_four_fp8(r2, offset, step, FP8, PTX, ASM),
                          _word_of_four_fp8(r3, offset, step, FP8, PTX, ASM)))
        first_word = piece.to(tl.int64) * (4 * BLOCK)
        if first_word + 4 * BLOCK <= n_words:
            # A whole piece: no mask, so each thread's 16 bytes go out in one store.
            tl.store(words_ptr + first_word + lanes, words)
        elif first_word < n_words:
            tl.store(words_ptr + first_word + lanes, words, mask=first_word + lanes < n_words)
    n_tail = numel - 4 * n_words
    if local == 0:
        if n_tail > 0:
            tail_lanes = tl.arange(0, 4)
            t0, _t1, _t2, _t3 = tl.randint4x(seed, ((n_words + 3) // 4).to(tl.int32) + tail_lanes, N_ROUNDS)
            bits = _byte_to_fp8_bits(t0 & 0xFF, offset, step, FP8).to(tl.uint8)
            tail_ptr = (base + 4 * n_words).to(tl.pointer_type(tl.uint8))
            tl.store(tail_ptr + tail_lanes, bits, mask=tail_lanes < n_tail)


class GroupedLaunch:
    """Launches of the grouped kernel for one (dtype, device, table size class, launch parameters)."""

    _cache: dict[tuple, object] = {}

    @staticmethod
    def launch(table: torch.Tensor, n_tensors: int, n_programs: int, fp8_dtype: torch.dtype, low: float,
               high: float, seed: int, *, block: int, iters: int, num_warps: int = DEFAULT_NUM_WARPS,
               n_rounds: int = DEFAULT_N_ROUNDS, ptx: bool = True) -> None:
        from kernlint.reference._launch import FastKernel, current_stream

        step = (high - low) / 256.0
        offset = low + 0.5 * step
        search_steps = max(0, (n_tensors - 1).bit_length())
        device_index = table.get_device()
        key = (fp8_dtype, device_index, search_steps, block, num_warps, n_rounds, iters, ptx, seed >= 2**31)
        kernel = GroupedLaunch._cache.get(key)
        if kernel is not None and device_index == torch.cuda.current_device():
            kernel(n_programs, 1, 1, current_stream(device_index), table.data_ptr(), n_tensors, seed, offset, step)
            return
        constexprs = {"BLOCK": block, "ITERS": iters, "SEARCH_STEPS": search_steps, "FP8": TL_FP8[fp8_dtype],
                      "N_ROUNDS": n_rounds, "PTX": ptx, "ASM": _PTX_BY_DTYPE[fp8_dtype]}
        with torch.cuda.device(device_index):
            kernel = FastKernel.first_launch(fp8_uniform_init_grouped_kernel, (n_programs,),
                                             (table, n_tensors, seed, offset, step), constexprs,
                                             num_warps=num_warps)
        if kernel is not None:
            GroupedLaunch._cache[key] = kernel
