#!/usr/bin/env python3
"""FP8 dummy-weight init at 128 Mi float8_e4m3fn elements: vLLM's old path vs the fixed, fused and chunked
forms, against ``fill_`` of the same 128 MiB (the write-only ceiling).

Time: median of 20 single calls, CUDA events, after warm-up. Peak scratch: max_memory_allocated over the
call minus what was allocated before it. Second table: the fused kernel's launch-parameter sweep.
"""
from __future__ import annotations

import importlib.util
import statistics
import sys
from pathlib import Path

import torch

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

NUMEL = 128 * 1024 * 1024
REPS = 20
WARMUP = 3


def load_old_path():
    path = REPO_ROOT / "fixtures" / "regressed" / "dummy_init_old.py"
    spec = importlib.util.spec_from_file_location("dummy_init_old", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def median_ms(fn) -> float:
    for _ in range(WARMUP):
        fn()
    times = []
    for _ in range(REPS):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


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
    from kernlint.reference._triton_dummy_init import DEFAULT_BLOCK, DEFAULT_NUM_WARPS

    old = load_old_path()
    param = torch.empty(NUMEL, dtype=torch.float8_e4m3fn, device="cuda")
    param_bytes = param.view(torch.uint8)

    variants = {
        "fill_ (write ceiling)": lambda: param_bytes.fill_(1),
        "old (.to fp16, uniform_, .to fp8, copy_)": lambda: old.initialize_single_dummy_weight(param),
        "fixed (empty_like fp16, uniform_, copy_)": lambda: initialize_single_dummy_weight(param, mode="fixed"),
        "chunked (fixed, 16 Mi-element slices)": lambda: initialize_single_dummy_weight(param, mode="chunked"),
        "fused (Triton, randint4x, 16 B/Philox)": lambda: initialize_single_dummy_weight(param, mode="fused"),
    }
    rows = []
    for name, fn in variants.items():
        rows.append((name, median_ms(fn), peak_scratch_bytes(fn)))
    anchor_ms = rows[0][1]

    print(f"FP8 dummy init, {NUMEL // 2**20} Mi e4m3 elements ({NUMEL / 2**20:.0f} MiB), {torch.cuda.get_device_name()}, "
          f"torch {torch.__version__}; median of {REPS}, CUDA events")
    header = f"{'variant':44s} {'median ms':>10s} {'x fill_':>8s} {'GB/s written':>13s} {'peak scratch MiB':>17s}"
    print(header)
    print("-" * len(header))
    for name, ms, scratch in rows:
        print(f"{name:44s} {ms:10.4f} {ms / anchor_ms:8.2f} {NUMEL / ms / 1e6:13.0f} {scratch / 2**20:17.1f}")

    print()
    print(f"fused kernel sweep (default BLOCK={DEFAULT_BLOCK}, num_warps={DEFAULT_NUM_WARPS}, n_rounds=10)")
    header = f"{'BLOCK':>6s} {'warps':>6s} {'rounds':>7s} {'median ms':>10s} {'x fill_':>8s}"
    print(header)
    print("-" * len(header))
    for n_rounds in (10, 7):
        for block in (256, 512, 1024, 2048, 4096):
            for num_warps in (4, 8):
                ms = median_ms(lambda: uniform_fp8_fused_(param, -1e-3, 1e-3, 1234, block=block,
                                                         num_warps=num_warps, n_rounds=n_rounds))
                print(f"{block:6d} {num_warps:6d} {n_rounds:7d} {ms:10.4f} {ms / anchor_ms:8.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
