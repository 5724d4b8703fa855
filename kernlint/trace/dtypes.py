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
