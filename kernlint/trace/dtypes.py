"""Dtype names as torch.profiler writes them.

Two spellings reach a trace: `Input type` strings such as ``c10::Float8_e4m3fn`` and, for a dtype passed
as an argument, the integer ScalarType code in `Concrete Inputs`. Both map to torch's own dtype names.
tests/test_dtypes.py checks SCALAR_TYPE_CODES against the installed torch.
"""
from __future__ import annotations

# c10::ScalarType enum values (c10/core/ScalarType.h), read from torch 2.13.
SCALAR_TYPE_CODES: dict[int, str] = {
    0: "uint8",
    1: "int8",
    2: "int16",
    3: "int32",
    4: "int64",
    5: "float16",
    6: "float32",
    7: "float64",
    8: "complex32",
    9: "complex64",
    10: "complex128",
    11: "bool",
    12: "qint8",
    13: "quint8",
    14: "qint32",
    15: "bfloat16",
    16: "quint4x2",
    17: "quint2x4",
    23: "float8_e5m2",
    24: "float8_e4m3fn",
    25: "float8_e5m2fnuz",
    26: "float8_e4m3fnuz",
}

# `Input type` strings (c10 type names and the short names older traces use).
INPUT_TYPE_NAMES: dict[str, str] = {
    "c10::Float8_e4m3fn": "float8_e4m3fn",
    "c10::Float8_e5m2": "float8_e5m2",
    "c10::Float8_e4m3fnuz": "float8_e4m3fnuz",
    "c10::Float8_e5m2fnuz": "float8_e5m2fnuz",
    "c10::Float8_e8m0fnu": "float8_e8m0fnu",
    "c10::BFloat16": "bfloat16",
    "c10::Half": "float16",
    "float": "float32",
    "double": "float64",
    "c10::complex<float>": "complex64",
    "c10::complex<double>": "complex128",
    "bool": "bool",
    "unsigned char": "uint8",
    "signed char": "int8",
    "short": "int16",
    "int": "int32",
    "long": "int64",
    "long int": "int64",
}




# c10::DeviceType enum values (c10/core/DeviceType.h), by torch.device type name, read from torch 2.13
# (torch.autograd.DeviceType). `[memory]` events carry one as `Device Type`: 1 on a CUDA build, 6 on a ROCm
# build (HIP), 0 for host memory. tests/test_dtypes.py checks the table against the installed torch.
DEVICE_TYPE_CODES: dict[int, str] = {
    0: "cpu", 1: "cuda", 2: "mkldnn", 3: "opengl", 4: "opencl", 5: "ideep", 6: "hip", 7: "fpga", 8: "maia",
    9: "xla", 10: "vulkan", 11: "metal", 12: "xpu", 13: "mps", 14: "meta", 15: "hpu", 16: "ve", 17: "lazy",
    18: "ipu", 19: "mtia", 20: "privateuseone",
}
# Device types whose memory is host memory: an allocation there has no device index.
HOST_DEVICE_TYPES: frozenset[str] = frozenset({"cpu"})
HOST_DEVICE_TYPE_CODES: frozenset[int] = frozenset(c for c, n in DEVICE_TYPE_CODES.items() if n in HOST_DEVICE_TYPES)


def dtype_from_code(value: str | int | None) -> str | None:
    """ScalarType code (as the string `Concrete Inputs` holds) to a dtype name; None if not a code."""
    if value is None or value == "":
        return None
    try:
        return SCALAR_TYPE_CODES.get(int(value))
    except (TypeError, ValueError):
        return None


def dtype_from_input_type(value: str | None) -> str | None:
    """`Input type` string to a dtype name; None for non-tensor entries ("Scalar", "ScalarList", "")."""
    if not value:
        return None
    return INPUT_TYPE_NAMES.get(value)
