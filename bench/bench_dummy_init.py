#!/usr/bin/env python3
"""FP8 dummy-weight init at 128 Mi float8_e4m3fn elements: vLLM's old path vs the fixed, fused and chunked
forms, against ``fill_`` of the same 128 MiB (the write-only ceiling).

Time: CUDA events around single calls, after warm-up; 3 passes over all variants (so clock drift hits
each alike) of 20 calls each; the median of the 60. Before each timed call a 256 MiB memset keeps the GPU
busy, so the Python work before a launch is not timed as idle GPU (as triton's do_bench does with its
cache flush). Peak scratch: max_memory_allocated over one call minus what was allocated before it.
Second table: the fused kernel's launch-parameter sweep, same method.
"""
from __future__ import annotations

import statistics
import sys
from pathlib import Path

import torch

from kernlint.checkout import import_path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

NUMEL = 128 * 1024 * 1024
PASSES = 3
CALLS_PER_PASS = 20
WARMUP = 3


def load_old_path():
    path = REPO_ROOT / "fixtures" / "regressed" / "dummy_init_old.py"
    module = import_path(path, "dummy_init_old")
    return module


_BUSY_BYTES = 256 * 1024 * 1024
_busy = None


def time_calls_ms(fn, n: int) -> list[float]:
    global _busy
    if _busy is None:
        _busy = torch.empty(_BUSY_BYTES, dtype=torch.uint8, device="cuda")
    times = []
    for _ in range(n):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        _busy.zero_()  # ~0.1 ms of GPU work queued ahead: hides fn's CPU-side set-up
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return times


def median_ms_interleaved(variants: dict) -> dict[str, float]:
    """Median over PASSES x CALLS_PER_PASS calls of each variant, the passes interleaved."""
    for fn in variants.values():
        for _ in range(WARMUP):
            fn()
    samples = {name: [] for name in variants}
    for _ in range(PASSES):
        for name, fn in variants.items():
            samples[name] += time_calls_ms(fn, CALLS_PER_PASS)
    return {name: statistics.median(times) for name, times in samples.items()}


def peak_scratch_bytes(fn) -> int:
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated()
    fn()
    torch.cuda.synchronize()
    return torch.cuda.max_memory_allocated() - before


def main() -> int:
    if not torch.cuda.is_available():
        print("bench_dummy_init: needs a CUDA GPU (none found); nothing measured.")
        return 0
    from kernlint.reference import initialize_single_dummy_weight, uniform_fp8_fused_
    from kernlint.reference._triton_dummy_init import DEFAULT_BLOCK, DEFAULT_N_ROUNDS, DEFAULT_NUM_WARPS

    old = load_old_path()
    param = torch.empty(NUMEL, dtype=torch.float8_e4m3fn, device="cuda")
    param_bytes = param.view(torch.uint8)

    variants = {
        "fill_ (write ceiling)": lambda: param_bytes.fill_(1),
        "old (.to fp16, uniform_, .to fp8, copy_)": lambda: old.initialize_single_dummy_weight(param),
        "fixed (empty_like fp16, uniform_, copy_)": lambda: initialize_single_dummy_weight(param, mode="fixed"),
        "chunked (fixed, 16 Mi-element slices)": lambda: initialize_single_dummy_weight(param, mode="chunked"),
        "fused (one Triton kernel, randint4x)": lambda: initialize_single_dummy_weight(param, mode="fused"),
    }
    medians = median_ms_interleaved(variants)
    anchor_ms = medians["fill_ (write ceiling)"]

    print(f"FP8 dummy init, {NUMEL // 2**20} Mi e4m3 elements ({NUMEL / 2**20:.0f} MiB), "
          f"{torch.cuda.get_device_name()}, torch {torch.__version__}; "
          f"median of {PASSES}x{CALLS_PER_PASS} calls (interleaved passes), CUDA events")
    print(f"fused defaults: BLOCK={DEFAULT_BLOCK}, num_warps={DEFAULT_NUM_WARPS}, Philox rounds={DEFAULT_N_ROUNDS}, "
          f"inline-PTX byte->fp8")
    header = f"{'variant':44s} {'median ms':>10s} {'x fill_':>8s} {'GB/s written':>13s} {'peak scratch MiB':>17s}"
    print(header)
    print("-" * len(header))
    for name, fn in variants.items():
        ms = medians[name]
        scratch = peak_scratch_bytes(fn)
        print(f"{name:44s} {ms:10.4f} {ms / anchor_ms:8.2f} {NUMEL / ms / 1e6:13.0f} {scratch / 2**20:17.1f}")

    configs = [(block, warps, rounds, True) for rounds in (10, 7) for block in (512, 1024, 2048, 4096)
               for warps in (4, 8)]
    configs += [(1024, 4, 10, False), (2048, 8, 7, False)]
    sweep = {("fill_",): variants["fill_ (write ceiling)"]}
    for block, warps, rounds, ptx in configs:
        sweep[(block, warps, rounds, ptx)] = (
            lambda b=block, w=warps, r=rounds, p=ptx: uniform_fp8_fused_(
                param, -1e-3, 1e-3, 1234, block=b, num_warps=w, n_rounds=r, ptx=p))
    sweep_medians = median_ms_interleaved(sweep)
    sweep_anchor = sweep_medians[("fill_",)]
    print()
    print(f"fused kernel sweep (fill_ in this sweep: {sweep_anchor:.4f} ms)")
    header = f"{'BLOCK':>6s} {'warps':>6s} {'rounds':>7s} {'byte->fp8':>10s} {'median ms':>10s} {'x fill_':>8s}"
    print(header)
    print("-" * len(header))
    for key, ms in sweep_medians.items():
        if key == ("fill_",):
            continue
        block, warps, rounds, ptx = key
        convert = "PTX" if ptx else "Triton"
        print(f"{block:6d} {warps:6d} {rounds:7d} {convert:>10s} {ms:10.4f} {ms / sweep_anchor:8.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
