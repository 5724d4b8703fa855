"""Trace loading: the accepted inputs, and one clear error for each bad one."""
from __future__ import annotations

import gzip
import json

import pytest
import torch

from kernlint.errors import TraceError
from kernlint.trace.load import find_trace_files, load_trace


def _minimal(events):
    return {"schemaVersion": 1, "traceEvents": events}


EVENTS = [
    {"ph": "X", "cat": "cpu_op", "name": "aten::fill_", "pid": 1, "tid": 1, "ts": 10.0, "dur": 5.0,
     "args": {"External id": 3, "Input type": ["c10::BFloat16", "Scalar"], "Concrete Inputs": ["", "1."]}},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 11.0, "dur": 2.0,
     "args": {"External id": 3, "correlation": 77}},
    {"ph": "X", "cat": "kernel", "name": "void at::native::vectorized_elementwise_kernel<4, "
     "at::native::FillFunctor<float>, std::array<char*, 1ul> >(int, at::native::FillFunctor<float>, "
     "std::array<char*, 1ul>)", "pid": 0, "tid": 7, "ts": 20.0, "dur": 1.5,
     "args": {"correlation": 77, "device": 0, "stream": 7, "External id": 3}},
    {"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "python"}},
]


def test_plain_gzip_and_array_forms_give_the_same_table(tmp_path):
    plain = tmp_path / "a.json"
    plain.write_text(json.dumps(_minimal(EVENTS)))
    gz = tmp_path / "b.json.gz"
    gz.write_bytes(gzip.compress(json.dumps(_minimal(EVENTS)).encode()))
    array = tmp_path / "c.json"
    array.write_text(json.dumps(EVENTS))
    frames = [load_trace(p).frame for p in (plain, gz, array)]
    for f in frames:
        assert list(f["kind"]) == ["op", "runtime", "kernel"]
        kernel = f[f["kind"] == "kernel"].iloc[0]
        assert kernel["launcher"] == 1 and kernel["op"] == 0
        assert kernel["category"] == "fill"
        assert kernel["short_name"] == "vectorized_elementwise_kernel[FillFunctor<float>]"
        assert kernel["launch_ts"] == 11.0 and kernel["device"] == 0


def test_unknown_fields_and_loose_types_are_tolerated(tmp_path):
    events = [dict(EVENTS[0], extra={"x": 1}, args=dict(EVENTS[0]["args"], **{"New field": [1, 2]})),
              {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": "host", "tid": "main", "ts": "30", "dur": 2}]
    path = tmp_path / "t.json"
    path.write_text(json.dumps(_minimal(events)))
    f = load_trace(path).frame
    assert list(f["name"]) == ["aten::fill_", "aten::add"]
    assert f["ts"].tolist() == [10.0, 30.0]


def test_bare_na_values_from_old_kineto_are_repaired(tmp_path):
    text = json.dumps(_minimal(EVENTS)).replace('"stream": 7', '"stream": N/A')
    path = tmp_path / "na.json"
    path.write_text(text)
    f = load_trace(path).frame
    assert f.loc[2, "kind"] == "kernel" and f.loc[2, "stream"] == -1 and f.loc[2, "launcher"] == 1


def test_tensorboard_layout_folder_is_searched_recursively(tmp_path):
    run = tmp_path / "logdir" / "run1"
    run.mkdir(parents=True)
    for worker in ("w0.123.pt.trace.json.gz", "w1.124.pt.trace.json"):
        data = json.dumps(_minimal(EVENTS)).encode()
        (run / worker).write_bytes(gzip.compress(data) if worker.endswith(".gz") else data)
    (run / "notes.txt").write_text("not a trace")
    files = find_trace_files([tmp_path / "logdir"])
    assert [f.name for f in files] == ["w0.123.pt.trace.json.gz", "w1.124.pt.trace.json"]


@pytest.mark.parametrize("content, problem", [
    (b"", "file is empty"),
    (b"{not json", "not valid JSON"),
    (b'{"a": 1}', "no traceEvents list"),
    (b'{"traceEvents": 5}', "unexpected trace schema"),
    (b'{"traceEvents": [{"args": 3}]}', "unexpected trace schema"),
    (b'[{"ph": "X"}, {"args": 3}]', "unexpected trace schema: Expected `object | null`, got `int` - at `$[1].args`"),
    (b'{"traceEvents": [' + b'{"ph": "X"}, ' * 9000 + b'{"args": 3}]}', "at `$.traceEvents[9000].args`"),
    (b"[", "not valid JSON"),                 # the array form, cut short: a trace error, not a crash
    (b'[{"ph": "X", "name": "a"', "not valid JSON"),
    (gzip.compress(b"{broken", mtime=0)[:-6], "not a valid gzip file"),
])
def test_bad_trace_files_raise_one_clear_error(tmp_path, content, problem):
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    with pytest.raises(TraceError) as info:
        load_trace(path)
    line = str(info.value)
    assert line.startswith(str(path)) and problem in line and "\n" not in line


def test_missing_paths_and_empty_folders(tmp_path):
    with pytest.raises(TraceError, match="no such file or folder"):
        find_trace_files([tmp_path / "nope.json"])
    with pytest.raises(TraceError, match="folder holds no kineto traces"):
        find_trace_files([tmp_path])
    named_gz = tmp_path / "x.json.gz"
    named_gz.write_text("{}")
    with pytest.raises(TraceError, match="named .gz but is not gzip"):
        load_trace(named_gz)


def test_real_cpu_trace_links_allocations_to_dtypes(record):
    w = torch.empty(64, 64, dtype=torch.float8_e4m3fn)

    def step():
        tmp = w.to(torch.float16)
        tmp.uniform_(-1, 1)
        w.copy_(tmp.to(w.dtype))

    table = load_trace(record(step))
    f = table.frame
    allocs = f[f["kind"] == "alloc"]
    assert {"float16", "float8_e4m3fn"} <= set(allocs["dtype"])
    fp8 = allocs[allocs["dtype"] == "float8_e4m3fn"].iloc[0]
    assert fp8["bytes"] == 64 * 64
    free = f.loc[fp8["paired"]]
    assert free["kind"] == "free" and free["bytes"] == -64 * 64 and free["paired"] == fp8.name
    assert f.loc[fp8["op"], "name"] == "aten::empty_strided"
    assert f.loc[fp8["top_op"], "name"] == "aten::to"
    assert not table.has_device_events and table.has_stacks
    assert fp8["source"] is not None and "test_load.py" in fp8["source"]
