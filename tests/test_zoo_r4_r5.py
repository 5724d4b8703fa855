"""Zoo families R4 (host sync in a hot scope: KL401), R5 (uploads in a hot scope: KL501, KL502) and R8 (a sync
in CUDA-graph capture: KL491): what the generic case test (tests/test_rule_cases.py) cannot say.

GPU paths are checked on small synthetic kineto traces with the event shapes torch 2.11 writes on an H200
(fixtures/traces/gpu-zoo holds the real ones); CPU paths on traces recorded here.
"""
from __future__ import annotations

import json

import pytest
import torch
from torch.profiler import record_function

from kernlint.errors import RuleFileError
from rule_helpers import outcome, rule, shipped

STEP = {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#3", "pid": 1, "tid": 1, "ts": 0, "dur": 1000}


def _op(name, ts, dur, ext):
    return {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur,
            "args": {"External id": ext}}


def _call(name, ts, corr, ext, dur=2):
    return {"ph": "X", "cat": "cuda_runtime", "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur,
            "args": {"correlation": corr, "External id": ext}}


def _memcpy(name, ts, corr):
    return {"ph": "X", "cat": "gpu_memcpy", "name": name, "pid": 0, "tid": 7, "ts": ts, "dur": 3,
            "args": {"correlation": corr}}


def _frame(name, ts, dur):
    return {"ph": "X", "cat": "python_function", "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur}


def _kernel(ts, corr):
    return {"ph": "X", "cat": "kernel", "name": "void at::native::vectorized_elementwise_kernel<4, "
            "at::native::FillFunctor<float>, std::array<char*, 1ul> >(int)", "pid": 0, "tid": 7, "ts": ts, "dur": 1,
            "args": {"correlation": corr}}


def _write(tmp_path, name, events):
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps({"traceEvents": events}))
    return path


def _dot_cpu(t0, ext, corr):
    """`.cpu()` of a device tensor: aten::to -> _to_copy -> copy_ -> a pageable DtoH copy and a synchronize."""
    return [_op("aten::to", t0, 50, ext), _op("aten::_to_copy", t0 + 1, 48, ext + 1),
            _op("aten::copy_", t0 + 5, 40, ext + 2),
            _call("cudaMemcpyAsync", t0 + 6, corr, ext + 2, dur=20),
            _call("cudaStreamSynchronize", t0 + 30, corr + 1, ext + 2),
            _memcpy("Memcpy DtoH (Device -> Pageable)", t0 + 10, corr)]


def test_a_dot_cpu_in_a_step_is_one_sync_not_two(tmp_path):
    trace = _write(tmp_path, "cpu", [STEP, *_dot_cpu(100, 10, 1), _op("aten::add", 300, 5, 20),
                                     _call("cudaLaunchKernel", 301, 9, 20), _kernel(310, 9)])
    o = outcome(trace, shipped("KL401"))
    assert o.status == "failed" and o.level == "kernel"
    (f,) = o.findings
    assert f.event == "cudaMemcpyAsync" and f.scope == "annotation ProfilerStep#3"
    assert "aten::copy_" in f.message


def test_item_of_a_device_tensor_counts_once_and_item_of_a_host_tensor_not_at_all(tmp_path):
    device_item = [_op("aten::is_nonzero", 100, 40, 1), _op("aten::item", 101, 38, 2),
                   _op("aten::_local_scalar_dense", 102, 36, 3), _call("cudaMemcpyAsync", 103, 1, 3),
                   _call("cudaStreamSynchronize", 110, 2, 3), _memcpy("Memcpy DtoH (Device -> Pinned)", 105, 1)]
    # x[mask] = 0.5 on a GPU: index_put_ reads the lifted CPU scalar with item(): no device read, no sync.
    host_item = [_op("aten::index_put_", 300, 30, 10), _op("aten::item", 301, 5, 11),
                 _op("aten::_local_scalar_dense", 302, 3, 12)]
    trace = _write(tmp_path, "items", [STEP, *device_item, *host_item, _op("aten::add", 500, 5, 20),
                                       _call("cudaLaunchKernel", 501, 9, 20), _kernel(510, 9)])
    o = outcome(trace, shipped("KL401"))
    (f,) = o.findings
    assert f.event == "aten::is_nonzero"


def test_the_profilers_own_stop_synchronize_is_not_the_programs(tmp_path):
    stop = [_frame("torch/profiler/profiler.py(820): stop", 800, 100),
            _call("cudaDeviceSynchronize", 810, 5, 0, dur=30)]
    trace = _write(tmp_path, "stop", [STEP, _frame("train.py(10): train_step", 10, 700),
                                      _op("aten::add", 20, 5, 20), _call("cudaLaunchKernel", 21, 9, 20),
                                      _kernel(30, 9), *stop])
    o = outcome(trace, shipped("KL401"))   # the profiler's sync is the trace's only one: nothing to judge
    assert o.status == "not-applicable" and "no host sync anywhere" in o.reason, o
    # The same call from the program's own frame is a finding.
    own = [_frame("train.py(40): log_metrics", 800, 100), _call("cudaDeviceSynchronize", 810, 5, 0, dur=30)]
    trace = _write(tmp_path, "own", [STEP, _op("aten::add", 20, 5, 20), _call("cudaLaunchKernel", 21, 9, 20),
                                     _kernel(30, 9), *own])
    (f,) = outcome(trace, shipped("KL401")).findings
    assert f.event == "cudaDeviceSynchronize"


def test_syncs_outside_hot_scopes_are_set_up(tmp_path):
    loader = [_frame("vllm/model_executor/model_loader/default_loader.py(260): load_weights", 0, 400),
              *_dot_cpu(100, 10, 1)]
    hot = [{**STEP, "name": "execute_model", "ts": 500, "dur": 100}, _op("aten::add", 510, 5, 20),
           _call("cudaLaunchKernel", 511, 9, 20), _kernel(520, 9)]
    o = outcome(_write(tmp_path, "setup", [*loader, *hot]), shipped("KL401"))
    assert o.status == "passed" and o.instances == 1


def _upload(kind):
    return [STEP, _op("aten::to", 100, 50, 1), _op("aten::_to_copy", 101, 48, 2), _op("aten::copy_", 105, 40, 3),
            _call("cudaMemcpyAsync", 106, 1, 3, dur=20), _memcpy(f"Memcpy HtoD ({kind} -> Device)", 120, 1)]


@pytest.mark.parametrize("kind, status", [("Pageable", "failed"), ("Pinned", "passed")])
def test_only_pageable_uploads_are_flagged(tmp_path, kind, status):
    o = outcome(_write(tmp_path, kind, _upload(kind)), shipped("KL501"))
    assert o.status == status
    if status == "failed":
        (f,) = o.findings
        assert f.launch_op == "aten::copy_" and f.top_op == "aten::to"


def test_pageable_uploads_need_device_events(record):
    trace = record(lambda: torch.tensor([1, 2, 3]))
    assert outcome(trace, shipped("KL501")).status == "not-applicable"


def test_kl502_sees_python_data_on_cpu_only_inside_hot_scopes(record):
    def step():
        setup = torch.tensor([4, 5, 6])                    # set-up: outside any hot scope
        with record_function("forward_decode"):
            return torch.tensor([1, 2, 3]) + setup
    (f,) = outcome(record(step), shipped("KL502")).findings
    assert f.event == "aten::lift_fresh" and f.scope == "annotation forward_decode"


def test_torch_cuda_graphs_own_synchronize_is_excluded_from_capture(tmp_path):
    events = [_frame("runner.py(10): capture_graph", 0, 500),
              _frame("torch/cuda/graphs.py(230): __enter__", 10, 60), _call("cudaDeviceSynchronize", 20, 1, 0),
              _call("cudaStreamBeginCapture", 80, 2, 0), _op("aten::add", 100, 5, 20),
              _call("cudaLaunchKernel", 101, 9, 20), _call("cudaStreamEndCapture", 200, 3, 0)]
    o = outcome(_write(tmp_path, "graph", events), shipped("KL491"))   # its only sync is torch.cuda.graph's
    assert o.status == "not-applicable" and "no host sync anywhere" in o.reason, o
    # A device read in the captured body is a finding.
    body = [_op("aten::item", 120, 30, 30), _op("aten::_local_scalar_dense", 121, 28, 31),
            _call("cudaMemcpyAsync", 122, 4, 31), _call("cudaStreamSynchronize", 130, 5, 31)]
    (f,) = outcome(_write(tmp_path, "graph-item", events + body), shipped("KL491")).findings
    assert f.event == "aten::item"


def test_users_name_their_own_hot_scopes(tmp_path, record):
    my_rule = rule(tmp_path, """
        [scope]
        annotations = ["^my_engine_tick$"]

        [check]
        type = "forbid-sync-in-scope"
        op-categories = ["sync", "sync_op"]
        """)
    x = torch.arange(6.0)

    def step():
        with record_function("my_engine_tick"):
            return x[x > 2].sum().item()
    o = outcome(record(step), my_rule)
    assert [f.event for f in o.findings] == ["aten::nonzero", "aten::item"]


def test_forbid_sync_in_scope_needs_a_filter(tmp_path):
    with pytest.raises(RuleFileError, match="needs at least one of"):
        rule(tmp_path, """
            [scope]
            annotations = ["^x$"]

            [check]
            type = "forbid-sync-in-scope"
            """)
