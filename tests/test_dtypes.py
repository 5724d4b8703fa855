"""The dtype tables agree with the installed torch, read back through a real profiler trace."""
from __future__ import annotations

import gzip
import json

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
    expected = str(dtype).removeprefix("torch.")
    x = torch.zeros(4, dtype=torch.float32).to(dtype)
    path = record(lambda: x.clone())
    # what the profiler itself wrote: the clone's `Input type`, read from the raw trace, not through kernlint
    with gzip.open(path, "rt") as fh:
        events = json.load(fh)["traceEvents"]
    clones = [e for e in events if e.get("name") == "aten::clone" and e.get("ph") == "X"]
    assert len(clones) == 1
    recorded = clones[0]["args"]["Input type"][0]
    assert INPUT_TYPE_NAMES[recorded] == expected
    # the loader's allocation under that clone carries the same dtype
    f = load_trace(path).frame
    clone_rows = f[f["name"] == "aten::clone"]
    assert len(clone_rows) == 1
    allocs = f[(f["kind"] == "alloc") & (f["top_op"] == clone_rows.index[0])]
    assert len(allocs) >= 1
    assert set(allocs["dtype"]) == {expected}
