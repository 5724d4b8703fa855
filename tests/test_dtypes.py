"""The dtype tables agree with the installed torch, read back through a real profiler trace."""
from __future__ import annotations

import pytest
import torch

from kernlint.trace.dtypes import INPUT_TYPE_NAMES, SCALAR_TYPE_CODES
from kernlint.trace.load import load_trace

FLOAT_AND_INT = [name for name in SCALAR_TYPE_CODES.values()
                 if name not in ("complex32", "qint8", "quint8", "qint32", "quint4x2", "quint2x4")]


def test_every_code_names_a_torch_dtype():
    for name in SCALAR_TYPE_CODES.values():
        assert isinstance(getattr(torch, name), torch.dtype), name


def test_codes_match_what_the_profiler_records(record):
    def step():
        for name in FLOAT_AND_INT:
            torch.empty(4, dtype=getattr(torch, name))

    f = load_trace(record(step)).frame
    empties = f[(f["kind"] == "alloc")]
    assert list(empties["dtype"]) == FLOAT_AND_INT


@pytest.mark.parametrize("dtype", [torch.float8_e4m3fn, torch.bfloat16, torch.float16, torch.float32])
def test_input_type_names_match_the_profiler(record, dtype):
    x = torch.zeros(4, dtype=torch.float32).to(dtype)
    f = load_trace(record(lambda: x.clone())).frame
    clone = f[f["name"] == "aten::clone"].iloc[0]
    assert clone.name >= 0
    # the clone's allocation takes its dtype from the op's input type
    alloc = f[(f["kind"] == "alloc") & (f["top_op"] == clone.name)].iloc[0]
    assert alloc["dtype"] == str(dtype).removeprefix("torch.")
    assert str(dtype).removeprefix("torch.") in INPUT_TYPE_NAMES.values()
