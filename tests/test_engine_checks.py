"""The five matchers on traces the test records itself on the CPU torch."""
from __future__ import annotations

import torch
from torch.profiler import record_function

from kernlint.rules.engine import check_trace, exit_status
from kernlint.trace.load import load_trace
from rule_helpers import outcome, rule, shipped


def _decode_step():
    x = torch.randn(32, 32)

    def step():
        for _ in range(3):
            with record_function("decode_step_body"):
                y = x @ x
                if bool((y > 0).any()):  # a host sync on a GPU: aten::is_nonzero / item
                    y = y + 1

    return step


def test_forbid_in_scope_flags_each_matching_op(tmp_path, record):
    r = rule(tmp_path, """
        [scope]
        annotations = ["^decode_step_body$"]
        [check]
        type = "forbid-in-scope"
        op-categories = ["sync_op"]
        """)
    o = outcome(record(_decode_step()), r)
    assert o.status == "failed" and o.instances == 3
    assert len(o.findings) == 3
    assert all(f.event in ("aten::is_nonzero", "aten::item") for f in o.findings)
    assert all(f.scope == "annotation decode_step_body" for f in o.findings)


def test_max_count_per_scope_instance(tmp_path, record):
    trace = record(_decode_step())
    few = rule(tmp_path, """
        [scope]
        annotations = ["^decode_step_body$"]
        [check]
        type = "max-count"
        op-categories = ["gemm"]
        max = 0
        """)
    o = outcome(trace, few)
    assert o.status == "failed" and len(o.findings) == 3
    assert "1 matching events" in o.findings[0].message
    enough = rule(tmp_path, few_body := """
        [scope]
        annotations = ["^decode_step_body$"]
        [check]
        type = "max-count"
        op-categories = ["gemm"]
        max = 1
        """, rid="KL902")
    assert few_body and outcome(trace, enough).status == "passed"


def test_require_anchor(tmp_path, record):
    x = torch.randn(8, 8)

    def step():
        with record_function("layer_a"):
            with record_function("quantize"):
                x.abs()
        with record_function("layer_b"):
            x.abs()

    r = rule(tmp_path, """
        [anchor]
        op = "^quantize$"
        [scope]
        annotations = ["^layer_"]
        [check]
        type = "require-anchor"
        """)
    o = outcome(record(step), r)
    assert o.status == "failed" and o.instances == 2
    assert [f.scope for f in o.findings] == ["annotation layer_b"]


def test_forbid_temporary_alloc_ignores_buffers_that_outlive_the_scope(tmp_path, record):
    keep = []

    def step():
        with record_function("init_weights"):
            keep.append(torch.empty(128, dtype=torch.float8_e4m3fn))      # outlives the scope: fine
            tmp = torch.zeros(256, dtype=torch.float16).to(torch.float8_e5m2)  # temporary
            del tmp

    r = rule(tmp_path, """
        [scope]
        annotations = ["^init_weights$"]
        [check]
        type = "forbid-temporary-alloc"
        dtypes = ["float8_e4m3fn", "float8_e5m2"]
        """)
    o = outcome(record(step), r)
    assert o.status == "failed"
    assert [f.event for f in o.findings] == ["float8_e5m2 temporary (256 B)"]


def test_forbid_before_anchor_op_level_reports_the_outermost_op(tmp_path, record):
    x = torch.randn(4, 256, dtype=torch.bfloat16)

    def step():
        with record_function("my_linear"):
            x.new_empty(1)                 # allocation only: fine
            x.view(-1, 128)                # view: fine
            x.to(torch.bfloat16)           # same dtype: a no-op, fine
            x.float()                      # a cast: flagged once, as aten::to
            with record_function("scale_1x128"):
                x.abs().amax()
            x @ x.t()

    r = rule(tmp_path, """
        [anchor]
        op = "^scale_1x128$"
        [check]
        type = "forbid-before-anchor"
        op-categories = ["*"]
        """)
    o = outcome(record(step), r)
    assert o.level == "op" and o.status == "failed"
    assert [f.event for f in o.findings] == ["aten::to"]
    assert o.findings[0].scope == "annotation my_linear"


def test_device_only_rule_is_not_applicable_on_cpu_traces(tmp_path, record):
    r = rule(tmp_path, """
        requires-device = true
        [scope]
        annotations = [".*"]
        [check]
        type = "forbid-in-scope"
        device-categories = ["fill"]
        """)
    o = outcome(record(lambda: torch.ones(3)), r)
    assert o.status == "not-applicable" and "no GPU events" in o.reason


def test_rule_without_anchor_match_is_not_applicable_never_passed(tmp_path, record):
    r = rule(tmp_path, """
        [anchor]
        kernel = "scale_1x128"
        op = "^scale_1x128$"
        [check]
        type = "forbid-before-anchor"
        device-categories = ["*"]
        op-categories = ["*"]
        """)
    o = outcome(record(lambda: torch.ones(3) + 1), r)
    assert o.status == "not-applicable" and o.findings == []
    assert exit_status([check_trace(load_trace(record(lambda: torch.ones(3))), [r])]) == 0


def _synthetic(tmp_path, launcher_name: str):
    """A linear module on one thread: a fill kernel then a scale_1x128 kernel, both from `launcher_name`."""
    import json

    events = [
        {"ph": "X", "cat": "python_function", "name": "nn.Module: Linear_0", "pid": 1, "tid": 1, "ts": 0, "dur": 100},
        {"ph": "X", "cat": "cpu_op", "name": "aten::fill_", "pid": 1, "tid": 1, "ts": 10, "dur": 5},
        {"ph": "X", "cat": "cuda_runtime", "name": launcher_name, "pid": 1, "tid": 1, "ts": 11, "dur": 2,
         "args": {"correlation": 1}},
        {"ph": "X", "cat": "cuda_driver", "name": "cuLaunchKernelEx", "pid": 1, "tid": 1, "ts": 30, "dur": 2,
         "args": {"correlation": 2}},
        {"ph": "X", "cat": "cpu_op", "name": "aten::_scaled_mm", "pid": 1, "tid": 1, "ts": 40, "dur": 5},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 41, "dur": 2,
         "args": {"correlation": 3}},
        {"ph": "X", "cat": "kernel", "name": "void at::native::vectorized_elementwise_kernel<4, "
         "at::native::FillFunctor<float>, std::array<char*, 1ul> >(int)", "pid": 0, "tid": 7, "ts": 50, "dur": 1,
         "args": {"correlation": 1}},
        {"ph": "X", "cat": "kernel", "name": "scale_1x128_kernel", "pid": 0, "tid": 7, "ts": 52, "dur": 1,
         "args": {"correlation": 2 if launcher_name != "cudaGraphLaunch" else 1}},
        {"ph": "X", "cat": "kernel", "name": "nvjet_sm90_qqtst_128x128_128x6_TN", "pid": 0, "tid": 7, "ts": 54,
         "dur": 1, "args": {"correlation": 3}},
    ]
    if launcher_name == "cudaGraphLaunch":  # one replay runs both kernels: no launch of the anchor's own
        events = [e for e in events if e["name"] != "cuLaunchKernelEx"]
    path = tmp_path / f"{launcher_name}.json"
    path.write_text(json.dumps({"traceEvents": events}))
    return path


def test_kernel_level_flags_the_fill_in_the_module(tmp_path):
    kl001 = shipped("KL001")
    o = outcome(_synthetic(tmp_path, "cudaLaunchKernel"), kl001)
    assert o.level == "kernel" and o.status == "failed"
    (f,) = o.findings
    assert f.event == "vectorized_elementwise_kernel[FillFunctor<float>]" and f.scope == "module Linear_0"
    assert f.launch_op == "aten::fill_" and f.anchor == "scale_1x128_kernel"


def test_anchors_replayed_from_cuda_graphs_without_a_capture_are_judged_by_kernel_order(tmp_path):
    """One replay runs the fill and the quant kernel, no capture attributes them: the replay is its own scope,
    and the fill between the replay's start (no GEMM before) and the anchor is a finding that says so."""
    kl001 = shipped("KL001")
    o = outcome(_synthetic(tmp_path, "cudaGraphLaunch"), kl001)
    assert o.status == "failed" and o.instances == 1
    (finding,) = o.findings
    assert "FillFunctor" in finding.event and finding.scope == "graph replay 1"
    assert "kernel order only: no capture attributes the replayed kernels" in finding.message
    assert "checked from the kernel order only" in o.note


def test_temporary_alloc_check_needs_memory_events(tmp_path):
    from torch.profiler import ProfilerActivity, profile

    w = torch.empty(64, 64, dtype=torch.float8_e4m3fn)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True, profile_memory=False, with_stack=True) as p:
        with record_function("dummy_init"):
            w.copy_(w.to(torch.float16).uniform_(-1, 1).to(w.dtype))
    path = tmp_path / "nomem.json"
    p.export_chrome_trace(str(path))
    kl002 = shipped("KL002")
    o = outcome(path, kl002)
    assert o.status == "not-applicable" and "profile_memory" in o.reason


def test_compiled_region_is_coarse_and_unplaced_anchors_are_reported(tmp_path):
    """torch.compile traces: one "Torch-Compiled Region" range, no modules or frames inside. The norm
    kernel before the quant kernel must not be blamed, and an anchor with no scope is not a pass."""
    import json

    events = [
        {"ph": "X", "cat": "user_annotation", "name": "Torch-Compiled Region: 0/0", "pid": 1, "tid": 1, "ts": 0,
         "dur": 100},
        {"ph": "X", "cat": "cuda_driver", "name": "cuLaunchKernel", "pid": 1, "tid": 1, "ts": 10, "dur": 2,
         "args": {"correlation": 1}},
        {"ph": "X", "cat": "cuda_driver", "name": "cuLaunchKernelEx", "pid": 1, "tid": 1, "ts": 20, "dur": 2,
         "args": {"correlation": 2}},
        {"ph": "X", "cat": "kernel", "name": "triton_red_fused_mean_mul_pow_rsqrt_0", "pid": 0, "tid": 7, "ts": 30,
         "dur": 1, "args": {"correlation": 1}},
        {"ph": "X", "cat": "kernel", "name": "scale_1x128_kernel", "pid": 0, "tid": 7, "ts": 32, "dur": 1,
         "args": {"correlation": 2}},
    ]
    path = tmp_path / "compiled.json"
    path.write_text(json.dumps({"traceEvents": events}))
    kl001 = shipped("KL001")
    o = outcome(path, kl001)
    assert o.status == "not-applicable" and o.findings == []
    assert "no anchor lies in a unit of one layer" in o.reason


def test_partly_unplaced_anchors_are_named_in_the_note(tmp_path):
    import json

    events = [
        {"ph": "X", "cat": "cuda_driver", "name": "cuLaunchKernelEx", "pid": 1, "tid": 1, "ts": 5, "dur": 2,
         "args": {"correlation": 1}},                                    # no enclosing unit at all
        {"ph": "X", "cat": "python_function", "name": "nn.Module: Linear_0", "pid": 1, "tid": 1, "ts": 10,
         "dur": 50},
        {"ph": "X", "cat": "cuda_driver", "name": "cuLaunchKernelEx", "pid": 1, "tid": 1, "ts": 20, "dur": 2,
         "args": {"correlation": 2}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 30, "dur": 2,
         "args": {"correlation": 3}},
        {"ph": "X", "cat": "kernel", "name": "scale_1x128_kernel", "pid": 0, "tid": 7, "ts": 40, "dur": 1,
         "args": {"correlation": 1}},
        {"ph": "X", "cat": "kernel", "name": "scale_1x128_kernel", "pid": 0, "tid": 7, "ts": 42, "dur": 1,
         "args": {"correlation": 2}},
        {"ph": "X", "cat": "kernel", "name": "nvjet_sm90_gemm", "pid": 0, "tid": 7, "ts": 44, "dur": 1,
         "args": {"correlation": 3}},
    ]
    path = tmp_path / "partly.json"
    path.write_text(json.dumps({"traceEvents": events}))
    kl001 = shipped("KL001")
    o = outcome(path, kl001)
    assert o.status == "passed" and o.instances == 2
    assert o.note.startswith("1 of 2 anchor(s) lie in no unit of one layer")


def test_inductor_kernels_named_after_a_fused_quant_input_are_not_anchors(tmp_path):
    """torch.compile names `triton_red_fused__fused_rms_norm_scale_1x128_0` after the ops it fused (an RMSNorm
    feeding the quant): it matched @act-quant-1x128-kernel and doubled KL001's anchors (issue 24, cause 11)."""
    import json

    path = _synthetic(tmp_path, "cudaLaunchKernel")
    data = json.loads(path.read_text())
    data["traceEvents"] += [
        {"ph": "X", "cat": "cuda_driver", "name": "cuLaunchKernelEx", "pid": 1, "tid": 1, "ts": 25, "dur": 2,
         "args": {"correlation": 4}},
        {"ph": "X", "cat": "kernel", "name": "triton_red_fused__fused_rms_norm_scale_1x128_0", "pid": 0, "tid": 7,
         "ts": 51, "dur": 0.5, "args": {"correlation": 4}},
    ]
    path.write_text(json.dumps(data))
    o = outcome(path, shipped("KL001"))
    assert o.instances == 1 and o.level == "kernel"
    assert any("FillFunctor" in f.event for f in o.findings)   # the real anchor is still judged


def test_a_tensor_from_numpy_is_not_built_from_python_data(tmp_path, record):
    """KL502: torch.from_numpy shares the array (zero-copy); its aten::lift_fresh is not data built from Python
    objects (issue 24, cause 4). torch.tensor(list) in the same forward still is."""
    import numpy as np

    array = np.arange(16, dtype=np.float32)

    def forward_from_numpy():
        return torch.from_numpy(array) * 2

    def forward_from_list():
        return torch.from_numpy(array) * torch.tensor([1.0, 2.0]).sum()

    kl502 = shipped("KL502")
    clean = outcome(record(forward_from_numpy), kl502)
    # from_numpy's lift is the trace's only one: nothing of the rule's kind (issue 24, cause 9)
    assert clean.status == "not-applicable" and "nothing of the rule's kind" in clean.reason, clean
    listed = outcome(record(forward_from_list), kl502)
    assert listed.status == "failed" and len(listed.findings) == 1, [f.message for f in listed.findings]


def test_kl001_judges_forward_layers_not_backward_nodes(tmp_path):
    """A backward node recomputes a LayerNorm or casts back before the gradient's quant: its own work, not a
    forward layer's fill (issue 24, cause 6). The same fill and anchor under a backward node are not judged."""
    import json

    forward = outcome(_synthetic(tmp_path, "cudaLaunchKernel"), shipped("KL001"))
    assert forward.status == "failed"
    path = _synthetic(tmp_path, "cudaLaunchKernel")
    data = json.loads(path.read_text())
    data["traceEvents"].insert(0, {"ph": "X", "cat": "cpu_op", "pid": 1, "tid": 1, "ts": 0, "dur": 100,
                                   "name": "autograd::engine::evaluate_function: LinearBackward0"})
    backward_path = tmp_path / "backward.json"
    backward_path.write_text(json.dumps(data))
    o = outcome(backward_path, shipped("KL001"))
    assert o.status == "not-applicable" and "backward node" in o.reason
