"""Synthetic kineto traces for baseline tests: a module launching a sequence of kernels, once per
ProfilerStep, with durations drawn around a given mean (a seeded generator, so tests are repeatable)."""
from __future__ import annotations

import gzip
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np


@dataclass(frozen=True)
class Step:
    kernel: str
    op: str
    mean_us: float
    cv: float = 0.005          # run-to-run noise of the kernel
    sync: bool = False         # a host sync (cudaStreamSynchronize inside aten::item) instead of a kernel
    alloc_bytes: int = 0       # a temporary allocated and freed around the launch


FP8_LINEAR = [
    Step("scale_1x128_kernel", "", 12.0, cv=0.02),
    Step("nvjet_sm90_qqtst_128x128_128x6_TN", "aten::_scaled_mm", 180.0, cv=0.003),
    Step("vectorized_elementwise_kernel[CUDAFunctor_add<BFloat16>]", "aten::add", 25.0, cv=0.006),
]

_KERNEL_NAMES = {  # the raw names torch writes for the short names above
    "vectorized_elementwise_kernel[CUDAFunctor_add<BFloat16>]":
        "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::BFloat16>, "
        "std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<c10::BFloat16>, std::array<char*, 3ul>)",
    "vectorized_elementwise_kernel[FillFunctor<BFloat16>]":
        "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<c10::BFloat16>, "
        "std::array<char*, 1ul> >(int, at::native::FillFunctor<c10::BFloat16>, std::array<char*, 1ul>)",
}


def fp8_linear_trace(path: Path, *, runs: int, seed: int, steps: list[Step] = FP8_LINEAR,
                     slowdown: dict[str, float] | None = None, module: str = "Fp8BlockLinear_0") -> Path:
    """`runs` ProfilerSteps, each launching `steps` inside `nn.Module: <module>`; `slowdown` multiplies the
    mean of the named kernels (e.g. {"*": 1.02} for every kernel)."""
    rng = np.random.default_rng(seed)
    slowdown = slowdown or {}
    events = []
    t, corr, ext = 1000.0, 0, 0
    for run in range(runs):
        step_start = t
        run_events = []
        module_start = t + 1
        t += 2
        gpu_t = t + 50
        for s in steps:
            corr += 1
            ext += 1
            if s.sync:
                run_events += [
                    {"ph": "X", "cat": "cpu_op", "name": "aten::item", "pid": 1, "tid": 1, "ts": t, "dur": 20,
                     "args": {"External id": ext}},
                    {"ph": "X", "cat": "cuda_runtime", "name": "cudaStreamSynchronize", "pid": 1, "tid": 1,
                     "ts": t + 1, "dur": 15, "args": {"correlation": corr, "External id": ext}}]
                t += 22
                continue
            factor = slowdown.get(s.kernel, slowdown.get("*", 1.0))
            dur = max(0.5, rng.normal(s.mean_us * factor, s.mean_us * s.cv))
            op_start = t
            if s.op:
                run_events.append({"ph": "X", "cat": "cpu_op", "name": s.op, "pid": 1, "tid": 1, "ts": op_start,
                                   "dur": 8, "args": {"External id": ext}})
            if s.alloc_bytes:
                run_events += [
                    {"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1, "tid": 1, "ts": t + 0.5,
                     "s": "t", "args": {"Addr": 4096 * corr, "Bytes": s.alloc_bytes, "Total Allocated": 0,
                                        "Total Reserved": 0, "Device Id": 0, "Device Type": 1}},
                    {"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1, "tid": 1, "ts": t + 7,
                     "s": "t", "args": {"Addr": 4096 * corr, "Bytes": -s.alloc_bytes, "Total Allocated": 0,
                                        "Total Reserved": 0, "Device Id": 0, "Device Type": 1}}]
            launcher = "cudaLaunchKernel" if s.op else "cuLaunchKernelEx"
            run_events.append({"ph": "X", "cat": "cuda_runtime" if s.op else "cuda_driver", "name": launcher,
                               "pid": 1, "tid": 1, "ts": t + 1, "dur": 4,
                               "args": {"correlation": corr, "External id": ext}})
            run_events.append({"ph": "X", "cat": "kernel", "name": _KERNEL_NAMES.get(s.kernel, s.kernel), "pid": 0,
                               "tid": 7, "ts": gpu_t, "dur": round(float(dur), 3),
                               "args": {"correlation": corr, "External id": ext, "device": 0, "stream": 7}})
            gpu_t += dur + 1
            t += 10
        t += 2
        run_events.insert(0, {"ph": "X", "cat": "python_function", "name": f"nn.Module: {module}", "pid": 1,
                              "tid": 1, "ts": module_start, "dur": t - module_start - 1})
        events.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{run}", "pid": 1, "tid": 1,
                       "ts": step_start, "dur": t - step_start})
        events += run_events
        t = max(t, gpu_t) + 5
    doc = {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA H200"}], "traceEvents": events}
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".gz":
        with gzip.open(path, "wt") as fh:
            json.dump(doc, fh)
    else:
        path.write_text(json.dumps(doc))
    return path
