"""Where the time goes on the H200 recordings of costly patterns (fixtures/traces/gpu-costly): layout
transforms around an NCHW convolution, eager vs fused attention, a fused RMSNorm; NCCL overlapping compute;
and the breakdown through `--jobs` workers. Every figure is computed again here from the raw JSON."""
from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from conftest import FIXTURES
from kernlint.cli import main
from kernlint.trace.load import load_trace
from kernlint.trace.time_breakdown import PROFILER_STEP, time_breakdown
from test_time_breakdown import _union as _union_within  # the independent interval union

COSTLY = FIXTURES / "traces" / "gpu-costly"
TWO_STREAMS = FIXTURES / "external" / "hta__trace_filter_2rank" / "trace_filter__sampled_rank-0.json.gz"
DEVICE_CATS = ("kernel", "gpu_memcpy", "gpu_memset")
LAYOUT = r"nchwToNhwc|nhwcToNchw"


def _raw(path: Path) -> list[dict]:
    with gzip.open(path) as f:
        return json.load(f)["traceEvents"]


def _by_step(events: list[dict]) -> list[list[dict]]:
    """The device events of each ProfilerStep#N range that launched any, by their launch call's time."""
    steps = sorted((e["ts"], e["ts"] + e["dur"]) for e in events
                   if e.get("cat") == "user_annotation" and e.get("name", "").startswith("ProfilerStep#"))
    launch = {e["args"]["correlation"]: e["ts"] for e in events
              if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})}
    out: list[list[dict]] = [[] for _ in steps]
    for e in events:
        if e.get("cat") in DEVICE_CATS and e.get("dur", 0) > 0:
            t = launch.get(e["args"].get("correlation"), e["ts"])
            for i, (lo, hi) in enumerate(steps):
                if lo <= t < hi:
                    out[i].append(e)
    return [s for s in out if s]


def _mean(steps: list[list[dict]], pattern: str = "") -> float:
    found = re.compile(pattern)
    return sum(e["dur"] for s in steps for e in s if found.search(e["name"])) / len(steps)




def _categories(bd) -> dict[str, float]:
    return {c.category: c.us_per_step for c in bd.categories}


def test_nchw_conv_layout_transforms_are_copy_layout_with_wall_and_idle_recounted():
    path = COSTLY / "conv-nchw.pt.trace.json.gz"
    bd, events = time_breakdown(load_trace(path)), _raw(path)
    steps = _by_step(events)
    assert bd.basis == PROFILER_STEP and bd.steps == len(steps) == 3
    assert bd.kernel_us == pytest.approx(_mean(steps), rel=1e-6)
    layout = _mean(steps, LAYOUT)
    assert 0.2 < layout / bd.kernel_us < 0.45   # cuDNN's transforms: ~31% of this recording's kernel time
    assert {t.category for t in bd.top if re.search(LAYOUT, t.name)} == {"copy/layout"}
    assert _categories(bd)["copy/layout"] >= layout
    assert _categories(bd)["gemm"] == pytest.approx(_mean(steps, r"fprop|implicit_gemm"), rel=1e-6)
    # A step's wall runs from its first device event to the next step's first (the last: to its last end).
    firsts = [min(e["ts"] for e in s) for s in steps]
    edges = list(zip(firsts, firsts[1:] + [max(e["ts"] + e["dur"] for e in steps[-1])]))
    every = [(e["ts"], e["ts"] + e["dur"]) for e in events if e.get("cat") in DEVICE_CATS and e.get("dur", 0) > 0]
    wall = sum(hi - lo for lo, hi in edges) / 3
    busy = sum(_union_within(every, lo, hi) for lo, hi in edges) / 3
    assert bd.wall_us == pytest.approx(wall, rel=1e-6) and bd.idle.us_per_step == pytest.approx(wall - busy, rel=1e-6)
    assert sum(c.share for c in bd.categories) + bd.idle.share == pytest.approx(1.0, abs=1e-6)   # one stream


def test_channels_last_conv_has_no_layout_transforms():
    bd = time_breakdown(load_trace(COSTLY / "conv-channels-last.pt.trace.json.gz"))
    assert "gemm" in _categories(bd) and not any(re.search(LAYOUT, t.name) for t in bd.top)


@pytest.mark.parametrize("trace, category, kernels", [
    ("eager-attention", "attention", r"softmax_warp_forward"),   # eager attention: its softmax
    ("sdpa-attention", "attention", r"_sdpa_.*flash_fprop"),     # cuDNN's fused SDPA
    ("rmsnorm-fused", "norm", r"rms_norm"),
])
def test_attention_and_norm_hold_exactly_their_kernels(trace, category, kernels):
    path = COSTLY / f"{trace}.pt.trace.json.gz"
    expected = _mean(_by_step(_raw(path)), kernels)
    assert expected > 0
    assert _categories(time_breakdown(load_trace(path)))[category] == pytest.approx(expected, rel=1e-6)


def test_nccl_on_its_own_stream_sums_past_busy_and_idle_is_of_the_union():
    bd = time_breakdown(load_trace(TWO_STREAMS))
    assert bd.kernel_us > bd.busy_us and bd.idle.us_per_step == pytest.approx(bd.wall_us - bd.busy_us)
    assert sum(_categories(bd).values()) == pytest.approx(bd.kernel_us)
    assert {"communication", "embedding", "gemm"} <= set(_categories(bd))


def _cli(*args) -> dict:
    return json.loads(CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False).output)


def test_the_breakdown_is_the_same_from_worker_processes():
    traces = [COSTLY / "conv-nchw.pt.trace.json.gz", COSTLY / "sdpa-attention.pt.trace.json.gz"]
    serial = _cli("check", *traces, "--format", "json", "--exit-zero")
    jobs = _cli("check", *traces, "--format", "json", "--exit-zero", "--jobs", "2", "--backend", "processes")
    assert all(t["time"] for t in serial["traces"])
    assert [t["time"] for t in jobs["traces"]] == [t["time"] for t in serial["traces"]]
