"""Where a run was timed, and whether its timing can be compared with the baseline's.

The facts come from the run metadata kernlint writes beside its traces (`<trace>.run.json`, with an NVML
snapshot) or embeds, and otherwise from what the trace says (its GPU and CUDA driver).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kernlint.trace.table import EventTable, TableMemo

# NVML clock event reasons (nvml.h `nvmlClocksEventReason*`) that mean the GPU ran below the clocks it was
# asked for: timing taken then is not comparable.
THROTTLING_REASONS = {
    0x4: "software power cap",
    0x8: "hardware slowdown",
    0x20: "software thermal slowdown",
    0x40: "hardware thermal slowdown",
    0x80: "hardware power brake",
}
_TRACE_SUFFIXES = (".pt.trace.json.gz", ".pt.trace.json", ".json.gz", ".json")


def sidecar_metadata(trace_path: str) -> dict[str, Any] | None:
    """The `.run.json` that `kernlint run` writes beside a trace, when it is there and readable."""
    path = Path(trace_path)
    stem = path.name
    for suffix in _TRACE_SUFFIXES:
        if stem.endswith(suffix):
            stem = stem[: -len(suffix)]
            break
    candidate = path.with_name(stem + ".run.json")
    try:
        data = json.loads(candidate.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


_RUN_METADATA: TableMemo[dict[str, Any] | None] = TableMemo("run metadata")


def run_metadata_of(table: EventTable) -> dict[str, Any] | None:
    """A trace's run metadata: embedded in it, else the `.run.json` beside it (read once per table)."""
    return table.caches.memo(_RUN_METADATA, lambda: table.meta.run_metadata or sidecar_metadata(table.path))


def environment_of(metadata: dict[str, Any] | None, table: EventTable | None = None) -> dict[str, Any]:
    """The facts that decide whether timings compare: GPU model, driver, versions, clocks, throttling and
    other processes on the GPU. Only what is known is present."""
    env: dict[str, Any] = {}
    meta = metadata or {}
    gpu = meta.get("gpu") if isinstance(meta.get("gpu"), dict) else None
    if gpu and gpu.get("name"):
        env["gpu"] = str(gpu["name"])
    elif table is not None and table.meta.devices and table.meta.devices[0].name:
        env["gpu"] = table.meta.devices[0].name
    for key in ("torch", "cuda_runtime", "triton", "host"):
        if isinstance(meta.get(key), str):
            env[key] = str(meta[key])   # torch.__version__ is a str subclass msgspec does not encode
    nvml = meta.get("nvml") if isinstance(meta.get("nvml"), dict) else {}
    if isinstance(nvml.get("driver_version"), str):
        env["driver"] = nvml["driver_version"]
    devices = [d for d in nvml.get("devices", []) if isinstance(d, dict)]
    if devices:
        device = devices[0]
        clocks, top = device.get("clocks_mhz") or {}, device.get("max_clocks_mhz") or {}
        if isinstance(clocks.get("sm"), int):
            env["sm_clock_mhz"] = clocks["sm"]
        if isinstance(top.get("sm"), int):
            env["max_sm_clock_mhz"] = top["sm"]
        reasons = device.get("clocks_event_reasons")
        if isinstance(reasons, int):
            env["throttled_by"] = [text for bit, text in THROTTLING_REASONS.items() if reasons & bit]
        others = device.get("other_processes")
        if isinstance(others, list):
            env["other_processes"] = len(others)
    return env


def environment_warnings(baseline: dict[str, Any], candidates: list[dict[str, Any]]) -> list[str]:
    """Why the candidate's timing may not compare with the baseline's, one line each."""
    warnings = []
    for env in candidates:
        for key, what in (("gpu", "GPU model"), ("driver", "NVIDIA driver"), ("torch", "torch version"),
                          ("cuda_runtime", "CUDA runtime")):
            if key in baseline and key in env and baseline[key] != env[key]:
                warnings.append(f"{what} differs from the baseline's: {env[key]} (baseline: {baseline[key]})")
        for side, facts in (("baseline", baseline), ("candidate", env)):
            if facts.get("throttled_by"):
                warnings.append(f"the GPU was throttled during the {side} run ({', '.join(facts['throttled_by'])})")
            if facts.get("other_processes"):
                warnings.append(f"{facts['other_processes']} other process(es) used the GPU during the {side} run")
    return sorted(set(warnings))
