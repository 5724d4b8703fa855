"""The loader on hostile and damaged input: one TraceError or a table whose damage is counted, never a
crash, a warning, a silent wrong link or unbounded memory.

The damage tests start from a real regressed H200 trace (placeholder_new_ones: a FillFunctor fill kernel
launched before scale_1x128_kernel in one nn.Module), damage one thing and write it to tmp_path.
"""
from __future__ import annotations

import copy
import gzip
import json
import math
import tracemalloc
import warnings

import numpy as np
import pytest

from conftest import FIXTURES
from kernlint.errors import TraceError
from kernlint.trace import load as load_module
from kernlint.trace.damage import trace_damage
from kernlint.trace.load import DEFAULT_MAX_TRACE_BYTES, load_trace, read_trace_bytes
from kernlint.trace.runs import group_runs, run_identity
from kernlint.trace.scopes import add_scope_column

REGRESSED = json.loads(gzip.decompress(
    (FIXTURES / "traces" / "gpu" / "placeholder_new_ones.pt.trace.json.gz").read_bytes()))
FILL = "FillFunctor"


def _regressed() -> dict:
    return copy.deepcopy(REGRESSED)


def _write(tmp_path, data, name="t.json"):
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return path


def _events(data, cat=None, name=None):
    return [e for e in data["traceEvents"] if (cat is None or e.get("cat") == cat)
            and (name is None or name in str(e.get("name")))]


def _x(name, cat, ts, dur, pid=1, tid=1, **args):
    event = {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur}
    if args:
        event["args"] = args
    return event


def _no_warnings(fn):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = fn()
    assert [str(w.message) for w in caught] == []
    return result


# -- no events, bad top-level values, nesting, N/A --------------------------------------------------------

@pytest.mark.parametrize("content", [
    {"traceEvents": []},
    {"traceEvents": [], "schemaVersion": 1, "deviceProperties": [], "distributedInfo": {"rank": 0}},
    [],
], ids=["empty-list", "top-level-keys-only", "empty-array"])
def test_a_trace_without_events_is_one_trace_error(tmp_path, content):
    path = _write(tmp_path, content)
    with pytest.raises(TraceError, match="holds no trace events") as info:
        load_trace(path)
    assert str(info.value).startswith(str(path)) and "\n" not in str(info.value)


def test_a_metadata_only_trace_is_one_trace_error(tmp_path):
    events = [{"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "python"}},
              {"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "args": {"name": "main"}},
              {"ph": "s", "cat": "ac2g", "name": "flow", "id": 1, "pid": 1, "tid": 1, "ts": 1}]
    path = tmp_path / "meta.json.gz"
    path.write_bytes(gzip.compress(json.dumps({"traceEvents": events}).encode()))
    with pytest.raises(TraceError, match=r"holds no trace events \(only 3 metadata or flow events\)"):
        load_trace(path)


@pytest.mark.parametrize("payload", [b"   \n\t ", b"", b'{"traceEvents": []}'],
                         ids=["whitespace", "empty", "no-events"])
def test_a_gzip_of_nothing_is_one_trace_error(tmp_path, payload):
    path = tmp_path / "x.json.gz"
    path.write_bytes(gzip.compress(payload))
    with pytest.raises(TraceError, match="file is empty|holds no trace events"):
        load_trace(path)


@pytest.mark.parametrize("dist", [{"world_size": [2], "rank": {"r": 0}}, {"world_size": {"n": 2}, "rank": [0]},
                                  {"world_size": "two", "rank": 0.5}])
def test_unusable_top_level_values_are_ignored(tmp_path, dist):
    data = {"traceEvents": [_x("aten::add", "cpu_op", 10, 5)], "distributedInfo": dist,
            "deviceProperties": [{"name": ["H200"]}, 3, "x"], "baseTimeNanoseconds": [1, 2],
            "with_stack": {"a": 1}, "host_name": 7, "kernlint": [1]}
    tables = [load_trace(_write(tmp_path, data, f"r{i}.json")) for i in range(2)]
    meta = tables[0].meta
    assert meta.rank is None and meta.base_time_ns is None and meta.with_stack is None
    assert meta.host_name is None and meta.run_metadata is None
    ident = run_identity(tables[0])
    # A device name that is not a string names no GPU (DeviceInfo: typed once; it used to be str(['H200'])).
    assert ident.world_size is None and ident.rank is None and ident.gpu_models == ()
    assert group_runs(tables).groups == []


@pytest.mark.parametrize("where", ["args-objects", "args-lists", "unknown-top-level-key", "pid"])
def test_ten_thousand_levels_of_nesting_is_one_trace_error(tmp_path, where):
    deep_obj = '{"a":' * 10_000 + "1" + "}" * 10_000
    deep_list = "[" * 10_000 + "]" * 10_000
    event = '{"ph":"X","cat":"cpu_op","name":"a","pid":%s,"tid":1,"ts":1,"dur":2,"args":{"x":%s}}'
    text = {   # %-formatting keeps the JSON braces readable
        "args-objects": '{"traceEvents":[%s]}' % (event % ("1", deep_obj)),
        "args-lists": '{"traceEvents":[%s]}' % (event % ("1", deep_list)),
        "unknown-top-level-key": '{"other":%s,"traceEvents":[%s]}' % (deep_list, event % ("1", "1")),  # noqa: UP031
        "pid": '{"traceEvents":[%s]}' % (event % (deep_list, "1")),
    }[where]
    path = tmp_path / "deep.json"
    path.write_text(text)
    with pytest.raises(TraceError, match="nested too deeply"):
        load_trace(path)


def test_bare_na_is_quoted_but_na_inside_strings_is_kept(tmp_path):
    events = [_x("x N/A y", "cpu_op", 10, 5, **{"External id": 3}),
              _x('say "N/A" and N/A', "cpu_op", 20, 5),
              _x("N/A", "cpu_op", 30, 5),
              _x("cudaLaunchKernel", "cuda_runtime", 11, 2, correlation=77),
              _x("k", "kernel", 40, 1, pid=0, tid=7, correlation=77, stream=7)]
    text = json.dumps({"traceEvents": events}).replace('"stream": 7', '"stream": N/A')
    assert text.count("N/A") == 5
    path = tmp_path / "na.json"
    path.write_text(text)
    f = load_trace(path).frame
    assert list(f["name"][:3]) == ["x N/A y", 'say "N/A" and N/A', "N/A"]
    kernel = f[f["kind"] == "kernel"].iloc[0]
    assert kernel["stream"] == -1 and kernel["launcher"] == 3


# -- bounded reading ---------------------------------------------------------------------------------------

def _zeros_gzip(path, size: int, chunk: int = 1 << 20) -> None:
    """A gzip bomb written as a stream: `size` zero bytes never held in memory."""
    zeros = bytes(chunk)
    with open(path, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=9) as gz:
        for _ in range(size // chunk):
            gz.write(zeros)


def test_a_gzip_bomb_is_refused_without_holding_it(tmp_path, monkeypatch):
    """64 MiB of zeros behind a small gzip, read with a 48 MiB cap and (scaled down with it) 1 MiB kept while
    counting: one TraceError, and the reader's peak allocation stays far below the decompressed size.
    bench/gzip_bomb.py measures the real thing: 4 GiB behind 4 MiB at the default cap."""
    path = tmp_path / "bomb.json.gz"
    _zeros_gzip(path, 64 << 20)
    assert path.stat().st_size < 1 << 20
    monkeypatch.setattr(load_module, "KEEP_WHILE_COUNTING", 1 << 20)
    tracemalloc.start()
    try:
        with pytest.raises(TraceError, match=r"decompresses to more than 50,331,648 bytes; raise --max-trace-bytes"):
            load_trace(path, max_bytes=48 << 20)
        _now, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 24 << 20, peak


def test_a_large_gzip_within_the_cap_is_read_in_two_passes(tmp_path, monkeypatch):
    """Past KEEP_WHILE_COUNTING the first pass only counts; the second fills a buffer of the exact size.
    Multi-member gzip (and zero padding after the last member) must still read whole."""
    first = {"traceEvents": [_x(f"aten::op{i}", "cpu_op", 10 * i, 5) for i in range(2000)]}
    body = json.dumps(first).encode()
    split = len(body) // 2
    path = tmp_path / "multi.json.gz"
    path.write_bytes(gzip.compress(body[:split]) + gzip.compress(body[split:]) + bytes(64))
    monkeypatch.setattr(load_module, "KEEP_WHILE_COUNTING", 4096)
    assert bytes(read_trace_bytes(path, max_bytes=len(body))) == body
    assert len(load_trace(path, max_bytes=len(body))) == 2000
    with pytest.raises(TraceError, match="decompresses to more than"):
        read_trace_bytes(path, max_bytes=len(body) - 1)
    cut = tmp_path / "cut.json.gz"
    cut.write_bytes(gzip.compress(body)[:-10])
    with pytest.raises(TraceError, match=r"not a valid gzip file \(compressed data ends early\)"):
        read_trace_bytes(cut)


def test_a_plain_file_over_the_cap_is_refused_before_reading(tmp_path):
    path = _write(tmp_path, {"traceEvents": [_x("aten::add", "cpu_op", 10, 5)]})
    size = path.stat().st_size
    with pytest.raises(TraceError, match=rf"is {size:,} bytes, more than the limit of 10; raise --max-trace-bytes"):
        load_trace(path, max_bytes=10)
    assert DEFAULT_MAX_TRACE_BYTES >= 1 << 30


def test_running_out_of_memory_is_one_trace_error(tmp_path, monkeypatch):
    path = _write(tmp_path, {"traceEvents": [_x("aten::add", "cpu_op", 10, 5)]})

    def no_memory(*_a, **_k):
        raise MemoryError

    monkeypatch.setattr(load_module, "build_event_table", no_memory)
    with pytest.raises(TraceError, match=r"out of memory while reading \(\d+ bytes of JSON\)"):
        load_trace(path)


# -- field damage ------------------------------------------------------------------------------------------

def test_an_integral_float_pid_is_normalised_not_damage(tmp_path):
    events = [_x("aten::fill_", "cpu_op", 10, 10, pid=1.0, tid=2.0),
              _x("cudaLaunchKernel", "cuda_runtime", 11, 2, pid=1, tid=2, correlation=5),
              _x("k", "kernel", 30, 1, pid=0.0, tid=7.0, correlation=5)]
    table = load_trace(_write(tmp_path, {"traceEvents": events}))
    f = table.frame
    assert list(f["pid"]) == ["1", "1", "0"] and list(f["thread"]) == ["1:2", "1:2", "1:2"]
    assert f.loc[1, "op"] == 0  # the call nests in the op: one thread, not "1.0:2.0" and "1:2"
    assert not trace_damage(table) and trace_damage(table).summary() == []


@pytest.mark.parametrize("pid", [1.5, [1], {"p": 1}])
def test_an_unusable_pid_is_counted_and_left_out_of_nesting(tmp_path, pid):
    events = [_x("aten::fill_", "cpu_op", 10, 10, pid=pid),
              _x("cudaLaunchKernel", "cuda_runtime", 11, 2, correlation=5),
              _x("k", "kernel", 20, 1, pid=0, tid=7, correlation=5),
              _x("aten::add", "cpu_op", 30, 10)]
    table = load_trace(_write(tmp_path, {"traceEvents": events}))
    damage = trace_damage(table)
    assert damage.bad_fields == {"pid": 1} and damage.touches_host and not damage.touches_device
    assert damage.summary() == ["1 host event with a pid that is missing or not an integer"]
    assert table.frame.loc[1, "op"] == -1 and table.frame.loc[0, "pid"] == "?"
    assert table.caches.damage is damage


def test_a_dangling_correlation_id_is_counted(tmp_path):
    data = _regressed()
    (fill,) = _events(data, "kernel", FILL)
    fill["args"]["correlation"] = 999_999
    table = load_trace(_write(tmp_path, data))
    damage = trace_damage(table)
    assert len(damage.unlinked_device) == 1 and table.frame.loc[damage.unlinked_device[0], "category"] == "fill"
    assert damage.touches_device and not damage.touches_host
    assert "1 device event with no launch inside the window" in damage.device_summary()


def test_equal_correlation_ids_are_ambiguous_and_not_linked(tmp_path):
    data = _regressed()
    for e in data["traceEvents"]:
        if isinstance(e.get("args"), dict) and "correlation" in e["args"]:
            e["args"]["correlation"] = 7
    table = load_trace(_write(tmp_path, data))
    f = table.frame
    kernels = f[f["kind"] == "kernel"]
    assert len(kernels) == 3 and (kernels["launcher"] == -1).all()  # not the last call, silently
    damage = trace_damage(table)
    assert sorted(damage.ambiguous_links.tolist()) == sorted(kernels.index.tolist())
    assert len(damage.unlinked_device) == 0  # counted once, as ambiguous
    assert ("3 device events whose correlation id two or more launches share (not linked)"
            in damage.device_summary())


def test_one_graph_launch_for_several_kernels_is_not_ambiguous(tmp_path):
    events = [_x("cudaGraphLaunch", "cuda_runtime", 10, 2, correlation=3),
              _x("k1", "kernel", 20, 1, pid=0, tid=7, correlation=3),
              _x("k2", "kernel", 22, 1, pid=0, tid=7, correlation=3)]
    table = load_trace(_write(tmp_path, {"traceEvents": events}))
    assert list(table.frame["launcher"]) == [-1, 0, 0] and not trace_damage(table)


def test_without_runtime_events_every_device_event_is_unlinked(tmp_path):
    data = _regressed()
    data["traceEvents"] = [e for e in data["traceEvents"] if e.get("cat") not in ("cuda_runtime", "cuda_driver")]
    damage = trace_damage(load_trace(_write(tmp_path, data)))
    assert len(damage.unlinked_device) == 3
    assert damage.device_summary() == ["3 device events with no launch inside the window"]


def test_a_string_ts_is_counted_and_its_event_placed_nowhere(tmp_path):
    data = _regressed()
    (fill_op,) = _events(data, "cpu_op", "aten::fill_")
    fill_op["ts"] = "abc"
    (new_ones,) = _events(data, "cpu_op", "aten::new_ones")
    new_ones["ts"] = str(new_ones["ts"])  # a numeric string is fine
    table = _no_warnings(lambda: load_trace(_write(tmp_path, data)))
    f = table.frame
    row = f.index[f["name"] == "aten::fill_"][0]
    assert math.isnan(f.loc[row, "ts"]) and f.loc[row, "parent_op"] == -1 and f.loc[row, "op"] == -1
    add_scope_column(table)
    assert table.frame.loc[row, "scope"] is None  # in no scope
    assert not f["ts"].drop(index=row).isna().any()  # NaN only where the ts was unusable
    damage = trace_damage(table)
    assert damage.bad_fields == {"ts": 1} and damage.touches_host
    assert damage.host_summary() == ["1 host event with a missing or non-numeric ts"]


def test_null_and_negative_dur_of_complete_events_are_counted(tmp_path):
    events = [_x("aten::fill_", "cpu_op", 10, None), _x("aten::add", "cpu_op", 20, -3),
              _x("aten::mul", "cpu_op", 30, "x"), _x("aten::sub", "cpu_op", 40, "2.5"),
              {"ph": "i", "cat": "cpu_instant_event", "name": "mark", "pid": 1, "tid": 1, "ts": 50, "s": "t"}]
    table = load_trace(_write(tmp_path, {"traceEvents": events}))
    f = table.frame
    assert f["dur"].tolist() == [0.0, 0.0, 0.0, 2.5, 0.0] and (f["end"] >= f["ts"]).all()
    damage = trace_damage(table)
    assert damage.bad_fields == {"dur": 3}
    assert damage.summary() == ["3 host events with a missing, negative or non-numeric dur"]


@pytest.mark.parametrize("base", [2**70, 2**64 - 8, 2**63])
def test_ids_beyond_int64_link_exactly(tmp_path, base):
    """uint64 ids above 2**63 (real HTA traces) and larger probes: neighbours that float64 cannot tell
    apart are linked to their own launch, not to the last call with a rounded-equal id."""
    events = [_x("cudaLaunchKernel", "cuda_runtime", 10, 2, correlation=base + 5, **{"External id": base + 1}),
              _x("cudaLaunchKernel", "cuda_runtime", 20, 2, correlation=base + 6, **{"External id": base + 2}),
              _x("second", "kernel", 40, 1, pid=0, tid=7, correlation=base + 6),
              _x("first", "kernel", 30, 1, pid=0, tid=7, correlation=base + 5)]
    table = _no_warnings(lambda: load_trace(_write(tmp_path, {"traceEvents": events})))
    f = table.frame
    assert f.loc[2, "launcher"] == 1 and f.loc[3, "launcher"] == 0
    assert f.loc[0, "correlation"] < f.loc[1, "correlation"]  # order kept
    assert f.loc[0, "external_id"] != f.loc[1, "external_id"]
    assert not trace_damage(table)


def test_loading_damaged_and_huge_values_emits_no_warning(tmp_path):
    events = [_x("aten::fill_", "cpu_op", 10, 10, **{"Addr": 2**70, "Bytes": -2**66, "External id": -4}),
              _x("cudaLaunchKernel", "cuda_runtime", 11, 2, correlation=2**64 + 1, stream=2**80),
              _x("k", "kernel", "nan", 1, pid=0, tid=7, correlation=2**64 + 1, device=2.5),
              _x("k", "kernel", 10**400, 1, pid=0, tid=7, correlation="12x")]
    path = _write(tmp_path, {"traceEvents": events})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        table = load_trace(path)
        damage = trace_damage(table)
    assert damage.bad_device_fields == {"ts": 2, "correlation": 1, "external_id": 1}
    assert "1 event with an External id that is not a non-negative integer" in damage.summary()


def test_a_missing_source_is_none_not_nan(tmp_path):
    events = [_x("model.py(12): forward", "python_function", 0, 50, **{"Python id": 1}),
              _x("aten::fill_", "cpu_op", 10, 5),
              _x("aten::add", "cpu_op", 100, 5)]
    f = load_trace(_write(tmp_path, {"traceEvents": events})).frame
    assert f.loc[1, "source"] == "model.py:12"
    assert f.loc[2, "source"] is None


# -- consistency damage: the trace's own cross-checks disagree ----------------------------------------------

def test_real_traces_show_no_damage():
    """Our H200 traces and the real traces other projects recorded are whole. Memset calls with no memset
    event (hundreds in HTA's V100 trace: old kineto did not record them) are not damage. Two external
    traces really are partial: a CUPTI range-profiler trace records launches but no kernel, and HTA's
    two-event test trace holds one kernel without its launch."""
    partial = {"hta__cupti_profiler__benchmark_result_924719_1679055439_trace.json.gz":
               ["77 kernel launches with no device event inside the window (their kernels were lost, or the trace "
                "was recorded without ProfilerActivity.CUDA)"],
               "hta__large_integer_trace__rank-70.Mar_25_20_48_12.2861.pt.trace.json.gz":
               ["1 device event with no launch inside the window"]}
    paths = sorted((FIXTURES / "traces" / "gpu").glob("*.json.gz")) + sorted(
        (FIXTURES / "external").rglob("*.json.gz"))
    for path in paths:
        assert trace_damage(load_trace(path)).summary() == partial.get(path.name, []), path


def test_window_edges_are_not_damage_but_lost_kernel_records_are():
    """Rank 1: 62 kernels of the previous step still running when the window opened (no launch, no External
    id): an edge. Rank 0: the window closed without a device synchronize and CUPTI lost every kernel record:
    48 launches with no device event, damage."""
    edges = FIXTURES / "traces" / "gpu-edges" / "window-edges"
    assert trace_damage(load_trace(edges / "rank1.pt.trace.json.gz")).summary() == []
    lost = trace_damage(load_trace(edges / "rank0.pt.trace.json.gz"))
    assert lost.summary() == ["48 kernel launches with no device event inside the window (their kernels "
                              "were lost, or the trace was recorded without ProfilerActivity.CUDA)"]


@pytest.mark.parametrize("field, value", [("ts", 0.5), ("dur", 0.5), ("tid", 99), ("cat", "weird")])
def test_a_module_frame_moved_away_from_its_children_is_counted(tmp_path, field, value):
    data = _regressed()
    (module,) = _events(data, "python_function", "nn.Module: ")
    module[field] = value
    damage = trace_damage(load_trace(_write(tmp_path, data)))
    assert len(damage.misplaced_frames) >= 1 and damage.touches_host
    assert any("outside the frame their Python parent id names" in line for line in damage.host_summary())


def _frames_by_id(data) -> dict:
    return {e["args"]["Python id"]: e for e in _events(data, "python_function")}


def test_frames_whose_parent_lies_outside_the_trace_are_an_edge_not_damage(tmp_path):
    """A segment cut from a longer run (TraceLens's vLLM trace) keeps frames whose parent was cut away: the
    outermost frame removed, its children are top-level and their parent id is carried by no event."""
    data = _regressed()
    frames = _frames_by_id(data)
    outermost = [e for e in frames.values() if e["args"].get("Python parent id") not in frames]
    assert outermost
    for e in outermost:
        data["traceEvents"].remove(e)
    children = [e for e in _events(data, "python_function") if e["args"].get("Python parent id") in
                {o["args"]["Python id"] for o in outermost}]
    assert children, "the removed frames had children left in the trace"
    assert trace_damage(load_trace(_write(tmp_path, data))).summary() == []


def test_a_frame_missing_from_inside_the_tree_is_damage(tmp_path):
    """A frame removed from the middle of the tree leaves children that a frame of the trace still holds:
    their parent is not outside the window, it is lost."""
    data = _regressed()
    frames = _frames_by_id(data)
    middle = next(e for e in frames.values() if e["args"].get("Python parent id") in frames
                  and any(c["args"].get("Python parent id") == e["args"]["Python id"] for c in frames.values()))
    data["traceEvents"].remove(middle)
    damage = trace_damage(load_trace(_write(tmp_path, data)))
    assert len(damage.misplaced_frames) >= 1


@pytest.mark.parametrize("field, value", [("ts", 0.5), ("pid", 4242)])
def test_a_launch_moved_out_of_its_op_is_counted(tmp_path, field, value):
    data = _regressed()
    (launch,) = _events(data, "cuda_runtime", "cudaLaunchKernel")
    launch[field] = value
    damage = trace_damage(load_trace(_write(tmp_path, data)))
    assert len(damage.misplaced_launches) == 1 and damage.touches_host


def test_a_kernel_without_launch_whose_op_is_in_the_window_is_not_an_edge(tmp_path):
    """Removing the first launch makes its kernel's id predate every launch, like a kernel of the previous
    step; its External id names the fill op of this trace, so it is unlinked damage, not an edge."""
    data = _regressed()
    data["traceEvents"].remove(_events(data, "cuda_runtime", "cudaLaunchKernel")[0])
    damage = trace_damage(load_trace(_write(tmp_path, data)))
    assert len(damage.unlinked_device) == 1


def test_a_kernel_of_unknown_category_or_missing_is_counted(tmp_path):
    data = _regressed()
    (fill,) = _events(data, "kernel", FILL)
    fill["cat"] = "weird"
    damage = trace_damage(load_trace(_write(tmp_path, data)))
    assert len(damage.unknown_device) == 1 and damage.touches_device
    data["traceEvents"].remove(fill)
    damage = trace_damage(load_trace(_write(tmp_path, data, "gone.json")))
    assert len(damage.unlinked_launches) == 1
    assert "1 kernel launch with no device event inside the window (their kernels were lost)" in damage.summary()


def test_damage_counts_are_plain_numbers(tmp_path):
    data = _regressed()
    (fill_op,) = _events(data, "cpu_op", "aten::fill_")
    fill_op["ts"] = None
    damage = trace_damage(load_trace(_write(tmp_path, data)))
    counts = damage.counts()
    assert counts == {"host.ts": 1} and all(type(v) is int for v in counts.values())
    assert isinstance(damage.bad_rows, np.ndarray) and len(damage.bad_rows) == 1


@pytest.mark.parametrize("field, value", [("ts", 0.5), ("ts", -1), ("pid", -1), ("pid", "ab"), ("tid", -100),
                                          ("tid", "ab")])
def test_a_launch_that_cannot_have_launched_its_kernel_is_counted(tmp_path, field, value):
    """The quantization kernel's launch moved in time (58 days before its kernel) or onto a process or
    thread that runs nothing else: valid values, but the launch no longer lies in its module, so the
    anchor would be unscoped and KL001 would say 'not applicable' on a regressed trace."""
    data = _regressed()
    (launch,) = [e for e in data["traceEvents"] if e.get("name") == "cuLaunchKernelEx"
                 and "External id" not in e.get("args", {})]
    launch[field] = value
    damage = trace_damage(load_trace(_write(tmp_path, data)))
    assert len(damage.misfit_launches) == 1 and damage.touches_device
    assert "1 launch whose time or process does not fit the device event they launched" in damage.device_summary()


def test_a_large_single_member_gzip_is_inflated_once_into_the_size_its_trailer_gives(tmp_path, monkeypatch):
    """issue 26: a trace past KEEP_WHILE_COUNTING was gunzipped twice (count, then fill). A single member's
    trailer gives the size: one pass. A trailer that says too little (several members) falls back to two."""
    body = json.dumps({"traceEvents": [_x(f"aten::op{i}", "cpu_op", 10 * i, 5) for i in range(2000)]}).encode()
    single = tmp_path / "single.json.gz"
    single.write_bytes(gzip.compress(body))
    multi = tmp_path / "multi.json.gz"   # the last member is small: its trailer is not taken as a size
    multi.write_bytes(gzip.compress(body[:-100]) + gzip.compress(body[-100:]))
    halves = tmp_path / "halves.json.gz"   # the last member is half: the one pass finds it too small
    halves.write_bytes(gzip.compress(body[:len(body) // 2]) + gzip.compress(body[len(body) // 2:]))
    monkeypatch.setattr(load_module, "KEEP_WHILE_COUNTING", 4096)
    passes = []
    real = load_module._inflate
    monkeypatch.setattr(load_module, "_inflate", lambda *a: passes.append(1) or real(*a))
    assert bytes(read_trace_bytes(single, max_bytes=len(body))) == body and len(passes) == 1
    passes.clear()
    assert bytes(read_trace_bytes(multi, max_bytes=len(body))) == body and len(passes) == 2
    passes.clear()
    assert bytes(read_trace_bytes(halves, max_bytes=len(body))) == body and len(passes) == 3
    passes.clear()
    with pytest.raises(TraceError, match="decompresses to more than"):   # a trailer over the cap: not trusted
        read_trace_bytes(single, max_bytes=len(body) - 1)
