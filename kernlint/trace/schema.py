"""The raw Chrome-trace schema torch.profiler writes, as msgspec structs.

msgspec decodes straight into these typed structs, skipping every field not named here, so a large trace
never becomes a dict per event. Every field is optional with a loose type: traces from torch 1.x to 2.13,
and from other writers (vLLM, TensorBoard plugins), differ in which fields they carry. The mapping from
raw kineto names ("External id", "Input type") to the event table's snake_case columns lives in
ARG_COLUMNS, a versioned table like HTA's event_args yaml.
"""
from __future__ import annotations

from typing import Any, Union

import msgspec

ARGS_SCHEMA_VERSION = 1

Number = Union[int, float]


class RawArgs(msgspec.Struct, rename={
    "external_id": "External id",
    "correlation": "correlation",
    "python_id": "Python id",
    "python_parent_id": "Python parent id",
    "input_types": "Input type",
    "input_dims": "Input Dims",
    "concrete_inputs": "Concrete Inputs",
    "addr": "Addr",
    "nbytes": "Bytes",
    "total_allocated": "Total Allocated",
    "device_type": "Device Type",
    "device_id": "Device Id",
    "device": "device",
    "stream": "stream",
    "memcpy_bytes": "bytes",
}):
    external_id: Any = None
    correlation: Any = None
    python_id: Any = None
    python_parent_id: Any = None
    input_types: Any = None
    input_dims: Any = None
    concrete_inputs: Any = None
    addr: Any = None
    nbytes: Any = None
    total_allocated: Any = None
    device_type: Any = None
    device_id: Any = None
    device: Any = None
    stream: Any = None
    memcpy_bytes: Any = None


class RawEvent(msgspec.Struct):
    ph: Any = None
    cat: Any = None
    name: Any = None
    pid: Any = None
    tid: Any = None
    ts: Any = None
    dur: Any = None
    args: Union[RawArgs, None] = None


class RawTrace(msgspec.Struct, rename={"trace_events": "traceEvents"}):
    trace_events: list[RawEvent]
    schemaVersion: Any = None
    deviceProperties: Any = None
    distributedInfo: Any = None
    baseTimeNanoseconds: Any = None
    cuda_driver_version: Any = None
    cuda_runtime_version: Any = None
    record_shapes: Any = None
    profile_memory: Any = None
    with_stack: Any = None
    with_modules: Any = None
    displayTimeUnit: Any = None
    kernlint: Any = None  # run metadata that `kernlint run` writes into its own traces


# Raw kineto argument names -> event table columns (ARGS_SCHEMA_VERSION 1).
ARG_COLUMNS: dict[str, str] = {
    "External id": "external_id",
    "correlation": "correlation",
    "Python id": "python_id",
    "Python parent id": "python_parent_id",
    "Input type": "input_types",
    "Input Dims": "input_dims",
    "Concrete Inputs": "concrete_inputs",
    "Addr": "addr",
    "Bytes": "bytes",
    "Device Type": "device_type",
    "Device Id": "device_id",
    "device": "device",
    "stream": "stream",
}
