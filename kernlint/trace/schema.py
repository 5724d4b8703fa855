"""The raw Chrome-trace schema torch.profiler writes, as msgspec structs.

msgspec decodes straight into these typed structs, skipping every field not named here, so a large trace
never becomes a dict per event; the top level first, keeping each event as raw JSON, then the events a chunk
at a time (kernlint.trace.columns). Every field is optional with a loose type: traces from torch 1.x to 2.13,
and from other writers (vLLM, TensorBoard plugins), differ in which fields they carry. The fields every
analysis rests on (`name`, `cat`, `ts`, `dur`, `pid`, `tid`, the ids) take any JSON value: a
damaged value is not a reason to refuse the whole trace; kernlint.trace.table parses them, and
kernlint.trace.damage counts the events whose value could not be used. The mapping from
raw kineto argument names ("External id", "Input type") to snake_case names lives in ARG_FIELDS, a
versioned table like HTA's event_args yaml: adding an argument is one line there and one field below.
"""
from __future__ import annotations

import re
from typing import Any

import msgspec

ARGS_SCHEMA_VERSION = 1

# snake_case field -> raw kineto argument name (ARGS_SCHEMA_VERSION 1).
ARG_FIELDS: dict[str, str] = {
    "external_id": "External id",
    "correlation": "correlation",
    "input_dims": "Input Dims",
    "input_dims_2021": "Input dims",   # the 2021 kineto schema's spelling (its `Input type` is often empty)
    "input_types": "Input type",
    "input_strides": "Input Strides",
    "concrete_inputs": "Concrete Inputs",
    "addr": "Addr",
    "nbytes": "Bytes",               # [memory] events: + allocated, - freed
    "device_type": "Device Type",    # [memory] events: 0 CPU, 1 CUDA
    "device_id": "Device Id",
    "device": "device",              # kernels, memcpy, memset
    "stream": "stream",
    "memcpy_bytes": "bytes",         # memcpy / memset size
    "python_id": "Python id",        # Python frames (with_stack): the frame's id ...
    "python_parent_id": "Python parent id",  # ... and its caller's; checked against the time nesting
    "launch_kernel": "kernel",       # launch calls on ROCm (roctracer): the kernel's name, also during capture
    "graph_node_id": "graph node id",   # CUDA-graph node of a replayed kernel, or of a captured launch (CUPTI)
    "graph_node_id_alt": "graphNodeId",
}

Scalar = int | float | str | None
# The default of an absent raw argument: one shared object, so that "absent" is an identity test.
NO_RAW = msgspec.Raw(b"")


class RawArgs(msgspec.Struct, rename=ARG_FIELDS, gc=False):   # gc=False: cheaper to make, no cycles
    external_id: Any = None    # ids: any JSON value; ints above 2**63 (uint64 ids) stay exact Python ints
    correlation: Any = None
    # Kept as raw JSON and decoded only for the few ops whose dtypes matter (allocations, anchors).
    input_dims: msgspec.Raw = NO_RAW
    input_dims_2021: msgspec.Raw = NO_RAW
    input_types: msgspec.Raw = NO_RAW
    input_strides: msgspec.Raw = NO_RAW
    concrete_inputs: msgspec.Raw = NO_RAW
    # Absent, these take the value the event table gives a missing one (null still means missing): a chunk
    # of events then converts without a pass over None. Bytes and device fall back to the kernel's fields.
    addr: Scalar = 0
    nbytes: Scalar = None
    device_type: Scalar = -1
    device_id: Scalar = -1
    device: Scalar = None
    stream: Scalar = -1
    memcpy_bytes: Scalar = 0
    python_id: Any = None
    python_parent_id: Any = None
    launch_kernel: Any = None
    graph_node_id: Any = None
    graph_node_id_alt: Any = None


class RawEvent(msgspec.Struct, gc=False):
    ph: Scalar = None
    cat: Any = None    # any JSON value: a list, an object or a boolean here is counted as damage, not refused
    name: Any = None
    pid: Any = None
    tid: Any = None
    ts: Any = None
    dur: Any = None
    args: RawArgs | None = None


class RawTrace(msgspec.Struct, rename={"trace_events": "traceEvents"}):
    # Each event as its raw JSON: decoded chunk by chunk into RawEvent (kernlint.trace.columns), so that the
    # structs of every event never exist at once.
    trace_events: list[msgspec.Raw]
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
    # Where and which trace: kineto writes `host_name` (torch 2.x, not every build) and `trace_id`; some
    # other writers spell the host `hostname`. kernlint.trace.runs uses them to tell runs apart.
    host_name: Any = None
    hostname: Any = None
    trace_id: Any = None
    kernlint: Any = None  # run metadata that `kernlint run` writes into its own traces
    # Where the events are, for error messages: set by the loader ("$" for the bare-array form). Named so that
    # no writer's key lands here.
    events_at: Any = msgspec.field(default="$.traceEvents", name="kernlint:events-at")


# The top level of a trace, each event kept as raw JSON (a streamed trace's head and tail: an empty list).
trace_decoder = msgspec.json.Decoder(RawTrace)
# One JSON token, skipping everything that is not a string or a bracket: strings (escapes included),
# brackets, colons and commas. Enough to walk the keys of a trace's top level. A string still open where the
# bytes end runs to their end (its group "open" is set): the scan is linear, whereas a pattern that must
# close the string tries again from every escaped quote in it (quadratic: a 6 MB string of them hung it).
JSON_TOKEN = re.compile(rb'"(?:[^"\\]|\\.)*+(?:"|(?P<open>\\?\Z))|[{}\[\]:,]')

# A JSON string that decodes to "traceEvents", its letters written as they are or as \\u00XX escapes: a second
# one would be a second event list (a JSON reader keeps the last, kernlint's stream the first).
def _letter_or_escape(letter: str) -> str:
    code = "".join(f"[{d}{d.upper()}]" if d.isalpha() else d for d in f"{ord(letter):04x}")
    return f"(?:{letter}|\\\\u{code})"


EVENTS_KEY_STRING = re.compile(('"' + "".join(map(_letter_or_escape, "traceEvents")) + '"').encode())


def count_events_keys(data: bytes | bytearray) -> int:
    """How many JSON strings in `data` decode to "traceEvents" (escaped or not). A byte count where `data`
    holds no \\u escape at all (nearly every trace: kineto writes none), the pattern otherwise."""
    if b"\\u" not in data:
        return data.count(b'"traceEvents"')
    return len(EVENTS_KEY_STRING.findall(data))


_raw_list = msgspec.json.Decoder(list | None)


def raw_list(value: msgspec.Raw | None) -> list:
    """Decode a raw JSON list argument (Input type, Concrete Inputs); [] when absent or not a list."""
    if value is None or not len(value):
        return []
    try:
        decoded = _raw_list.decode(value)
    except msgspec.DecodeError:
        return []
    return decoded if isinstance(decoded, list) else []


