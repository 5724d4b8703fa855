"""Op-level rule semantics, scopes by structure and named patterns, on traces recorded here on the CPU.

Each test reproduces a defect seen on real traces (issue: real-trace correctness): a custom rule that
flagged the copy_ aten::linear runs internally, a module pattern that never matched the printed name, "*"
counting Python frames, KL002 passing on vLLM's `_dummy_run`, coarse ranges decided by name.
"""
from __future__ import annotations

import json

import torch
from torch.profiler import ProfilerActivity, profile, record_function

from rule_helpers import outcome, rule, shipped


def _record_with_stack(fn, path):
    """Record on the CPU with stacks, shapes and memory (like a user's with_stack trace)."""
    fn()
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True, profile_memory=True, with_stack=True) as p:
        fn()
    p.export_chrome_trace(str(path))
    return path


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.up = torch.nn.Linear(16, 32)
        self.down = torch.nn.Linear(32, 16)

    def forward(self, x):
        return self.down(torch.relu(self.up(x)))


def test_nested_ops_are_not_counted_again_unless_asked(tmp_path, record):
    """aten::linear runs aten::addmm, which runs aten::copy_ (bias broadcast) on the CPU: a rule against
    aten::copy_ in decode_step must not flag it; an explicit copy in the step is flagged; nested = true
    asks for the internal ones too."""
    lin = torch.nn.Linear(8, 8)
    x = torch.randn(4, 8)

    def clean():
        with torch.no_grad(), record_function("decode_step"):
            lin(x)

    def regressed():
        with torch.no_grad(), record_function("decode_step"):
            lin(x).clone().copy_(x)

    body = """
        [scope]
        annotations = ["^decode_step$"]
        [check]
        type = "forbid-in-scope"
        names = ["^aten::copy_$"]
        """
    r = rule(tmp_path, body)
    assert outcome(record(clean), r).status == "passed"
    o = outcome(record(regressed), r)
    assert o.status == "failed" and [f.event for f in o.findings] == ["aten::copy_"]
    nested = rule(tmp_path, body + "nested = true\n", rid="KL902")
    o = outcome(record(clean), nested)
    assert o.status == "failed" and o.findings[0].launch_op == "aten::copy_"
    assert o.findings[0].top_op == "aten::linear"


def test_module_patterns_match_the_printed_name(tmp_path):
    """The trace names the module `nn.Module: MLP_0`; the output prints `MLP_0`; `^MLP` must match."""
    model = MLP()
    x = torch.randn(4, 16)

    def step():
        with torch.no_grad():
            model(x)

    trace = _record_with_stack(step, tmp_path / "mlp.json")
    r = rule(tmp_path, """
        [scope]
        modules = ["^MLP"]
        [check]
        type = "max-count"
        op-categories = ["gemm"]
        max = 1
        """)
    o = outcome(trace, r)
    assert o.status == "failed" and o.instances == 1
    assert o.findings[0].scope == "module MLP_0"
    assert "2 matching events" in o.findings[0].message


def test_star_means_working_categories_not_python_frames(tmp_path):
    """max-count with "*" counts the working ops of the step (two linears and a relu), not the Python
    frames and module frames that the stack recording adds around them."""
    model = MLP()
    x = torch.randn(4, 16)

    def step():
        with torch.no_grad(), record_function("decode_step"):
            model(x)

    trace = _record_with_stack(step, tmp_path / "star.json")
    body = """
        [scope]
        annotations = ["^decode_step$"]
        [check]
        type = "max-count"
        device-categories = ["*"]
        op-categories = ["*"]
        max = {max}
        """
    o = outcome(trace, rule(tmp_path, body.format(max=3)))
    assert o.status == "passed", [f.message for f in o.findings]
    tight = rule(tmp_path, body.format(max=2), rid="KL902")
    o = outcome(trace, tight)
    assert o.status == "failed" and "3 matching events" in o.findings[0].message


def _dummy_run_program(tmp_path):
    """vLLM-like warm-up: `_dummy_run` runs the model on a dummy batch and makes an FP8 temporary while at
    it. It is not weight init."""
    w = torch.randn(256, 256)

    def _dummy_run():
        x = torch.randn(8, 256)
        tmp = (x @ w).to(torch.float8_e4m3fn)
        return tmp.float().sum()

    def step():
        with torch.no_grad():
            _dummy_run()

    return _record_with_stack(step, tmp_path / "dummy_run.json")


def test_kl002_does_not_take_dummy_run_for_weight_init(tmp_path):
    o = outcome(_dummy_run_program(tmp_path), shipped("KL002"))
    assert o.status == "not-applicable", o
    assert "scope" in o.reason


def test_coarse_ranges_are_decided_by_what_they_hold(tmp_path):
    """A DeepSeek-like trace: ranges `attn(F)` / `mlp(F)` around whole sub-layers (norm, two linears each),
    no modules, no stacks. Each quantization anchor's innermost range holds two GEMMs and two anchors: it
    is coarse, so no unit of one layer encloses the anchor, and nothing (the norm, the other linear) is
    blamed; KL001 says why it could not check. The same linears each inside their own range are checked,
    and the placeholder fill is caught."""
    def ev(name, cat, ts, dur, **args):
        e = {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur}
        if cat == "kernel":
            e.update(pid=0, tid=7)
        if args:
            e["args"] = args
        return e

    def linear(t0, corr, fill: bool, wrap: str | None):
        out = []
        if wrap:
            out.append(ev(wrap, "user_annotation", t0, 40))
        if fill:
            out += [ev("aten::new_ones", "cpu_op", t0 + 1, 5), ev("aten::fill_", "cpu_op", t0 + 2, 3),
                    ev("cudaLaunchKernel", "cuda_runtime", t0 + 3, 1, correlation=corr),
                    ev("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>()",
                       "kernel", t0 + 100, 1, correlation=corr)]
        out += [ev("cuLaunchKernelEx", "cuda_driver", t0 + 10, 2, correlation=corr + 1),
                ev("per_token_cast_to_fp8_kernel", "kernel", t0 + 102, 1, correlation=corr + 1),
                ev("aten::_scaled_mm", "cpu_op", t0 + 20, 10),
                ev("cudaLaunchKernel", "cuda_runtime", t0 + 21, 2, correlation=corr + 2),
                ev("nvjet_sm90_tst_128x128_64x4_1x2_h_bz_coopA_NNT", "kernel", t0 + 104, 5, correlation=corr + 2)]
        return out

    def layer(fill: bool, fine: bool):
        events = [ev("attn(F)", "user_annotation", 0, 1000),
                  ev("aten::rms_norm", "cpu_op", 5, 5),
                  ev("cudaLaunchKernel", "cuda_runtime", 6, 1, correlation=1),
                  ev("rms_norm_kernel", "kernel", 50, 1, correlation=1)]
        events += linear(100, 10, fill, "q_proj(F)" if fine else None)
        events += linear(300, 20, fill, "o_proj(F)" if fine else None)
        return events

    kl001 = shipped("KL001")
    for fill in (False, True):
        path = tmp_path / f"coarse_{fill}.json"
        path.write_text(json.dumps({"traceEvents": layer(fill, fine=False)}))
        o = outcome(path, kl001)
        assert o.status == "not-applicable" and o.findings == [], o
        assert "no anchor lies in a unit of one layer" in o.reason
    clean = tmp_path / "fine_clean.json"
    clean.write_text(json.dumps({"traceEvents": layer(False, fine=True)}))
    assert outcome(clean, kl001).status == "passed"
    regressed = tmp_path / "fine_regressed.json"
    regressed.write_text(json.dumps({"traceEvents": layer(True, fine=True)}))
    o = outcome(regressed, kl001)
    assert o.status == "failed" and len(o.findings) == 2
    assert {f.scope for f in o.findings} == {"annotation q_proj(F)", "annotation o_proj(F)"}
    assert all("FillFunctor" in f.event and f.anchor == "per_token_cast_to_fp8_kernel" for f in o.findings)
