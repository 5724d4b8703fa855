"""Run metadata written beside every trace: software versions, the GPU (through NVML) and the CPU.

A regression verdict is only as good as the machine it came from: clocks, temperature, power and other
processes on the GPU explain odd timings. Every probe that fails records why instead of raising.
"""
from __future__ import annotations

import os
import platform
import socket
import sys
import time
from typing import Any

import torch

from kernlint.device import Device


def _nvml_snapshot() -> dict[str, Any]:
    try:
        import pynvml
    except ImportError as exc:  # nvidia-ml-py is a dependency; a broken install still must not stop a run
        return {"available": False, "reason": f"pynvml not importable: {exc}"}
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        return {"available": False, "reason": f"NVML: {exc}"}
    try:
        devices = []
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            devices.append(_nvml_device(pynvml, handle, index))
        return {"available": True, "driver_version": _text(pynvml.nvmlSystemGetDriverVersion()),
                "cuda_driver_version": pynvml.nvmlSystemGetCudaDriverVersion(), "devices": devices}
    except pynvml.NVMLError as exc:
        return {"available": False, "reason": f"NVML: {exc}"}
    finally:
        pynvml.nvmlShutdown()


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _nvml_device(pynvml, handle, index: int) -> dict[str, Any]:
    def probe(fn, *args):
        try:
            return fn(handle, *args)
        except pynvml.NVMLError as exc:
            return f"unavailable ({exc})"

    # Why the clocks are below their maximum right now (power cap, thermal, ...): a baseline's timing is
    # only comparable with runs that were not throttled. The function's name changed in newer NVML.
    reasons_fn = getattr(pynvml, "nvmlDeviceGetCurrentClocksEventReasons", None) or \
        getattr(pynvml, "nvmlDeviceGetCurrentClocksThrottleReasons", None)
    reasons = probe(reasons_fn) if reasons_fn else "unavailable (no NVML call)"
    util = probe(pynvml.nvmlDeviceGetUtilizationRates)
    procs = probe(pynvml.nvmlDeviceGetComputeRunningProcesses)
    power_mw = probe(pynvml.nvmlDeviceGetPowerUsage)
    limit_mw = probe(pynvml.nvmlDeviceGetEnforcedPowerLimit)
    return {
        "index": index,
        "name": _text(probe(pynvml.nvmlDeviceGetName)),
        "clocks_mhz": {"sm": probe(pynvml.nvmlDeviceGetClockInfo, pynvml.NVML_CLOCK_SM),
                       "memory": probe(pynvml.nvmlDeviceGetClockInfo, pynvml.NVML_CLOCK_MEM)},
        "max_clocks_mhz": {"sm": probe(pynvml.nvmlDeviceGetMaxClockInfo, pynvml.NVML_CLOCK_SM),
                           "memory": probe(pynvml.nvmlDeviceGetMaxClockInfo, pynvml.NVML_CLOCK_MEM)},
        "clocks_event_reasons": reasons,
        "temperature_c": probe(pynvml.nvmlDeviceGetTemperature, pynvml.NVML_TEMPERATURE_GPU),
        "power_w": power_mw / 1000.0 if isinstance(power_mw, int) else power_mw,
        "power_limit_w": limit_mw / 1000.0 if isinstance(limit_mw, int) else limit_mw,
        "utilization_pct": {"gpu": util.gpu, "memory": util.memory} if not isinstance(util, str) else util,
        "other_processes": ([{"pid": p.pid, "used_memory_bytes": p.usedGpuMemory} for p in procs
                             if p.pid != os.getpid()] if not isinstance(procs, str) else procs),
    }


def _cpu_facts() -> dict[str, Any]:
    model = platform.processor() or ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {"model": model, "logical_cores": os.cpu_count(), "torch_threads": torch.get_num_threads(),
            "load_average": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
            "machine": platform.machine()}


def collect_run_metadata(device: str) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "created_unix": time.time(),
        "host": socket.gethostname(),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "torch": torch.__version__,
        "cuda_runtime": torch.version.cuda,
        "device": device,
        "cpu": _cpu_facts(),
    }
    try:
        import triton  # noqa: F401  (only present with CUDA builds)
        meta["triton"] = triton.__version__
    except ImportError:
        meta["triton"] = None
    if Device.parse(device).is_gpu and torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        meta["gpu"] = {"name": props.name, "capability": f"{props.major}.{props.minor}",
                       "memory_bytes": props.total_memory, "multiprocessors": props.multi_processor_count}
    meta["nvml"] = _nvml_snapshot()
    return meta
