#!/usr/bin/env python3
"""Whole-model FP8 dummy init of a DeepSeek-V3-shaped stack: one grouped launch vs one launch per tensor,
against ``fill_``'s write bandwidth, host time included.

The stack: LAYERS MoE layers, each with the attention projections q_a [1536, 7168], q_b [24576, 1536],
kv_a [576, 7168], kv_b [32768, 512], o [7168, 16384], 256 routed experts and one shared expert with
gate/up [2048, 7168] and down [7168, 2048]: 776 FP8 weight tensors (11.5 GB) a layer, every one its own
allocation, as a loader makes them. FP8 weights only (their float32 block scales would go through
``uniform_`` one by one, as vLLM does, and are a separate matter).

Rows (median of REPS calls after a warm-up):
* ``fill_`` one buffer of the same bytes (CUDA events): the write ceiling, the anchor.
* grouped, end to end: wall clock from a synchronized start to the synchronize after the call (host walk,
  table build and upload, launch, kernel); ``host us/tensor`` is the time until the call returned / tensors.
* grouped, kernel only: CUDA events around the call with the GPU kept busy before it, so the host work is
  hidden and only the table upload and the kernel are timed.
* fused (one launch per tensor) and ``fill_`` one tensor at a time, end to end, for comparison.
"""
from __future__ import annotations

import functools
import statistics
import sys
import time

import torch
from torch import nn

LAYERS = 4
REPS = 5
ATTN = {"q_a_proj": (1536, 7168), "q_b_proj": (24576, 1536), "kv_a_proj_with_mqa": (576, 7168),
        "kv_b_proj": (32768, 512), "o_proj": (7168, 16384)}
EXPERT = {"gate_proj": (2048, 7168), "up_proj": (2048, 7168), "down_proj": (7168, 2048)}
N_EXPERTS = 256
F8 = torch.float8_e4m3fn


class Fp8Weight(nn.Module):
    def __init__(self, n: int, k: int):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(n, k, dtype=F8, device="cuda"), requires_grad=False)


class Expert(nn.Module):
    def __init__(self):
        super().__init__()
        for name, (n, k) in EXPERT.items():
            setattr(self, name, Fp8Weight(n, k))


class MoELayer(nn.Module):
    def __init__(self):
        super().__init__()
        self.self_attn = nn.ModuleDict({name: Fp8Weight(n, k) for name, (n, k) in ATTN.items()})
        self.experts = nn.ModuleList(Expert() for _ in range(N_EXPERTS))
        self.shared_experts = Expert()


def layer_bytes() -> int:
    return sum(n * k for n, k in ATTN.values()) + (N_EXPERTS + 1) * sum(n * k for n, k in EXPERT.values())


def median_wall(fn, reps: int = REPS) -> tuple[float, float]:
    """(end-to-end s, host s until fn returned), medians; each call starts from a synchronized GPU."""
    e2e, host = [], []
    for _ in range(reps):
        torch.cuda.synchronize()
        start = time.perf_counter()
        fn()
        returned = time.perf_counter()
        torch.cuda.synchronize()
        end = time.perf_counter()
        e2e.append(end - start)
        host.append(returned - start)
    return statistics.median(e2e), statistics.median(host)


def median_events(fn, reps: int = REPS, busy_s: float = 0.0) -> float:
    times = []
    for _ in range(reps):
        torch.cuda.synchronize()
        if busy_s:
            torch.cuda._sleep(int(busy_s * 2e9))  # ~busy_s of GPU work queued ahead (clock ~2 GHz)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    return statistics.median(times)


def fill_ceiling_s(n_bytes: int) -> float:
    flat = torch.empty(n_bytes, dtype=torch.uint8, device="cuda")
    flat.fill_(1)
    seconds = median_events(functools.partial(flat.fill_, 1))
    flat = None  # free it before the model is built
    torch.cuda.empty_cache()
    return seconds


def main() -> int:
    if not torch.cuda.is_available():
        print("bench_grouped_init: needs a CUDA GPU (none found); nothing measured.")
        return 0
    from kernlint.reference import initialize_dummy_weights
    from kernlint.reference.dummy_init import _state_tensors

    free, _ = torch.cuda.mem_get_info()
    layers = max(1, min(LAYERS, int(free * 0.8) // layer_bytes()))
    total = layers * layer_bytes()

    fill_s = fill_ceiling_s(total)

    model = nn.ModuleList(MoELayer() for _ in range(layers))
    tensors = _state_tensors(model)
    n_tensors = len(tensors)
    assert total == sum(t.numel() for t in tensors)
    views = [t.view(torch.uint8) for t in tensors]

    grouped = lambda: initialize_dummy_weights(model, mode="grouped")  # noqa: E731
    fused = lambda: initialize_dummy_weights(model, mode="fused")  # noqa: E731
    grouped()
    fused()
    torch.cuda.synchronize()

    walk_s = statistics.median(_timed(lambda: _state_tensors(model)) for _ in range(REPS))
    grouped_e2e, grouped_host = median_wall(grouped)
    grouped_kernel = median_events(grouped, busy_s=max(0.05, 3 * grouped_host))
    fused_e2e, fused_host = median_wall(fused, reps=3)

    def fill_each():
        for v in views:
            v.fill_(1)

    fill_each_e2e, fill_each_host = median_wall(fill_each, reps=3)

    ceiling = total / fill_s / 1e9
    print(f"FP8 dummy init of a DeepSeek-V3-shaped stack: {layers} MoE layers, {n_tensors} FP8 tensors, "
          f"{total / 1e9:.2f} GB; {torch.cuda.get_device_name()}, torch {torch.__version__}; median of {REPS}")
    header = (f"{'variant':52s} {'ms':>8s} {'GB/s':>7s} {'x fill_ BW':>10s} {'>=0.8':>6s} "
              f"{'host us/tensor':>15s} {'<=5':>4s}")
    print(header)
    print("-" * len(header))

    def row(name, seconds, host_s=None, judge=False):
        bw = total / seconds / 1e9
        host = "" if host_s is None else f"{host_s / n_tensors * 1e6:15.2f}"
        ok_bw = ("yes" if bw / ceiling >= 0.8 else "NO") if judge else ""
        ok_host = ("yes" if host_s / n_tensors * 1e6 <= 5 else "NO") if judge else ""
        print(f"{name:52s} {seconds * 1e3:8.2f} {bw:7.0f} {bw / ceiling:10.2f} {ok_bw:>6s} {host:>15s} "
              f"{ok_host:>4s}")

    row("fill_, one buffer of the same bytes (CUDA events)", fill_s)
    row("grouped: one launch, end to end (host included)", grouped_e2e, grouped_host, judge=True)
    row("grouped: table upload + kernel (CUDA events)", grouped_kernel)
    row("fused: one launch per tensor, end to end", fused_e2e, fused_host)
    row("fill_ one tensor at a time, end to end", fill_each_e2e, fill_each_host)
    print(f"host: module walk {walk_s / n_tensors * 1e6:.2f} us/tensor of the grouped call's "
          f"{grouped_host / n_tensors * 1e6:.2f} us/tensor")
    sweep(model, total, n_tensors, ceiling)
    return 0


SWEEP = [  # (BLOCK, ITERS, num_warps, tensors_per_launch); None: one launch
    (1024, 4, 4, None), (1024, 1, 4, None), (1024, 2, 8, None), (2048, 1, 8, None), (2048, 2, 8, None),
    (512, 4, 4, None), (4096, 1, 8, None), (1024, 4, 4, 256), (1024, 4, 4, 64), (2048, 1, 8, 256),
]


def sweep(model, total: int, n_tensors: int, ceiling: float) -> None:
    """Launch shapes of the grouped kernel, and launching every N tensors (host walk overlapping the GPU)."""
    from kernlint.reference import uniform_fp8_grouped_
    from kernlint.reference.dummy_init import _iter_state_tensors

    print()
    print("grouped launch sweep: end to end (walk + tables + launches + kernels, host included) and the "
          "kernels alone (CUDA events, host hidden)")
    header = (f"{'BLOCK':>6s} {'ITERS':>6s} {'warps':>6s} {'per launch':>10s} | {'e2e ms':>7s} {'x fill_ BW':>10s} "
              f"{'host us/t':>9s} | {'kernel ms':>9s} {'x fill_ BW':>10s}")
    print(header)
    print("-" * len(header))
    for block, iters, warps, per_launch in SWEEP:
        def run(b=block, i=iters, w=warps, p=per_launch):
            uniform_fp8_grouped_(_iter_state_tensors(model), -1e-3, 1e-3, 1234, block=b, iters=i, num_warps=w,
                                 tensors_per_launch=p)
        try:
            run()
            e2e, host = median_wall(run)
            kernel = median_events(run, busy_s=max(0.05, 3 * host))
        except Exception as exc:  # a launch shape that does not compile
            print(f"{block:6d} {iters:6d} {warps:6d} {str(per_launch):>10s} | {type(exc).__name__}: {str(exc)[:80]}")
            continue
        print(f"{block:6d} {iters:6d} {warps:6d} {str(per_launch):>10s} | {e2e * 1e3:7.2f} "
              f"{total / e2e / 1e9 / ceiling:10.2f} {host / n_tensors * 1e6:9.2f} | {kernel * 1e3:9.2f} "
              f"{total / kernel / 1e9 / ceiling:10.2f}", flush=True)


def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


if __name__ == "__main__":
    sys.exit(main())
