"""Where the device time goes (kernlint.trace.time_breakdown) on real traces, with every figure the test
checks computed again here from the raw JSON (kernel names, durations, launch times, step ranges)."""
from __future__ import annotations

import gzip
import json
import pickle
import re
from pathlib import Path

import pytest

from kernlint.rules.engine import check_trace
from kernlint.trace.load import load_trace
from kernlint.trace.time_breakdown import GRAPH_REPLAY, PROFILED_WINDOW, PROFILER_STEP, time_breakdown

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
EXTERNAL = FIXTURES / "external"
RESNET = EXTERNAL / "kineto__resnet50_num_workers_0__worker0.1623143089861.pt.trace.json.gz"
VLLM = EXTERNAL / "tracelens__vllm_piecewise__graph_execution.json.gz"
DECODE = FIXTURES / "traces" / "gpu-decode" / "decode-clean-steps.pt.trace.json.gz"
CPU_ONLY = EXTERNAL / "hta__cpu_only__rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz"

_DEVICE_CATS = {"kernel", "gpu_memcpy", "gpu_memset", "memcpy", "memset"}
_LAUNCH_CATS = {"cuda_runtime", "cuda_driver", "runtime"}


def _raw(path: Path) -> list[dict]:
    with gzip.open(path, "rt") as fh:
        data = json.load(fh)
    return data["traceEvents"] if isinstance(data, dict) else data


def _device_events(events: list[dict]) -> list[tuple[str, float, float, float]]:
    """(name, start, end, launch time) of every device event with a duration; launch time from the runtime
    call of the same correlation id, else the event's own start."""
    launch = {e["args"]["correlation"]: float(e["ts"]) for e in events
              if str(e.get("cat", "")).lower() in _LAUNCH_CATS and "correlation" in e.get("args", {})}
    out = []
    for e in events:
        if str(e.get("cat", "")).lower() in _DEVICE_CATS and float(e.get("dur", 0)) > 0:
            ts = float(e["ts"])
            out.append((e["name"], ts, ts + float(e["dur"]), launch.get(e.get("args", {}).get("correlation"), ts)))
    return out


def _steps(events: list[dict]) -> list[tuple[float, float]]:
    return sorted((float(e["ts"]), float(e["ts"]) + float(e["dur"])) for e in events
                  if re.fullmatch(r"ProfilerStep#\d+", str(e.get("name"))) and e.get("ph") == "X"
                  and str(e.get("cat", "")).lower() != "gpu_user_annotation")


def _in_steps(device, steps):
    return [d for d in device if any(lo <= d[3] < hi for lo, hi in steps)]


def _summed(events, pattern: str) -> float:
    return sum(end - start for name, start, end, _ in events if re.search(pattern, name))


def _union(intervals: list[tuple[float, float]], lo: float, hi: float) -> float:
    covered, reach = 0.0, lo
    for start, end in sorted(intervals):
        start, end = max(start, reach), min(end, hi)
        if end > start:
            covered += end - start
            reach = end
    return covered


def _category(breakdown, name: str) -> float:
    return next((c.us_per_step for c in breakdown.categories if c.category == name), 0.0)


@pytest.fixture(scope="module")
def resnet():
    return load_trace(RESNET), _raw(RESNET)


def test_resnet50_steps_norm_and_layout_shares_match_the_raw_trace(resnet):
    table, events = resnet
    b = time_breakdown(table)
    steps = _steps(events)
    mine = _in_steps(_device_events(events), steps)
    used = {i for d in mine for i, (lo, hi) in enumerate(steps) if lo <= d[3] < hi}
    assert b.basis == PROFILER_STEP and b.steps == len(used) > 1
    # cuDNN's batch norm kernels are the norm category.
    norm = _summed(mine, r"bn_fw|bn_bw")
    assert norm > 0 and _category(b, "norm") * b.steps == pytest.approx(norm, rel=1e-4)
    # The NCHW <-> NHWC layout transforms are in copy/layout.
    layout = _summed(mine, r"nchwToNhwc|nhwcToNchw")
    assert layout > 0 and _category(b, "copy/layout") * b.steps >= layout * (1 - 1e-9)
    # Convolutions and GEMMs dominate a ResNet-50 training step.
    assert b.categories[0].category == "gemm"
    # Idle: the steps tile the device timeline from the first step's first kernel to the last step's last end.
    lo = min(d[1] for d in mine)
    hi = max(d[2] for d in mine if d[3] >= max(steps[i][0] for i in used))
    busy = _union([(d[1], d[2]) for d in _device_events(events)], lo, hi)
    assert b.wall_us * b.steps == pytest.approx(hi - lo, rel=1e-4)
    assert b.idle.us_per_step * b.steps == pytest.approx(hi - lo - busy, rel=1e-4)
    assert sum(c.share for c in b.categories) + b.idle.share == pytest.approx(1.0, abs=0.01)   # one stream


def test_vllm_piecewise_graphs_show_attention_and_gemm():
    table, events = load_trace(VLLM), _raw(VLLM)
    b = time_breakdown(table)
    assert b.basis == GRAPH_REPLAY and b.steps > 1
    device = _device_events(events)
    # Eager attention between graph pieces is counted: every device event from the first replay's on is.
    graph_launches = {e["args"]["correlation"] for e in events if re.match(r"(cuda|hip)GraphLaunch", e["name"])
                      and str(e.get("cat", "")).lower() in _LAUNCH_CATS}
    first = min(float(e["ts"]) for e in events if str(e.get("cat", "")).lower() in _DEVICE_CATS
                and e.get("args", {}).get("correlation") in graph_launches)
    attention = _summed([d for d in device if d[1] >= first], r"unified_attention")
    assert attention > 0 and _category(b, "attention") * b.steps == pytest.approx(attention, rel=1e-4)
    assert b.categories[0].category == "gemm" and _category(b, "gemm") > 10 * _category(b, "attention")
    assert _category(b, "norm") > 0   # CK's Rmsnorm2dFwd
    assert b.top[0].category == "gemm" and b.top[0].name.startswith("_matmul_ogs")


def test_h200_decode_steps_match_the_raw_trace():
    table, events = load_trace(DECODE), _raw(DECODE)
    b = time_breakdown(table)
    steps = _steps(events)
    mine = _in_steps(_device_events(events), steps)
    assert b.basis == PROFILER_STEP and b.steps == len(steps)
    assert b.kernel_us * b.steps == pytest.approx(sum(d[2] - d[1] for d in mine), rel=1e-4)
    norm = _summed(mine, r"layer_norm")
    attention = _summed(mine, r"sdpa|flash|fmha|softmax")
    assert norm > 0 and _category(b, "norm") * b.steps == pytest.approx(norm, rel=1e-4)
    assert attention > 0 and _category(b, "attention") * b.steps == pytest.approx(attention, rel=1e-4)
    # The top costs are the short names with the most device time, largest first.
    assert [t.us_per_step for t in b.top] == sorted((t.us_per_step for t in b.top), reverse=True)
    assert b.top[0].share == pytest.approx(b.top[0].us_per_step / b.wall_us)


def test_a_trace_without_steps_is_one_profiled_window():
    b = time_breakdown(load_trace(FIXTURES / "traces" / "gpu-decode" / "decode-clean-plain.pt.trace.json.gz"))
    assert b.basis == PROFILED_WINDOW and b.steps == 1


def test_a_cpu_only_trace_has_no_breakdown_and_the_report_says_none():
    table = load_trace(CPU_ONLY)
    assert time_breakdown(table) is None
    assert check_trace(table, []).time is None


def test_the_breakdown_travels_in_the_report_across_processes():
    report = check_trace(load_trace(DECODE), [])
    assert report.time["basis"] == PROFILER_STEP and report.time["categories"]
    assert pickle.loads(pickle.dumps(report)).time == report.time


def test_a_finding_cost_names_its_breakdown_category_and_every_format_shows_the_breakdown():
    from kernlint.report import RenderContext, renderer
    from kernlint.rules.engine import check_traces
    from kernlint.rules.loader import load_rules
    from kernlint.rules.result import CheckResult

    table = load_trace(FIXTURES / "traces" / "gpu" / "block_regressed.pt.trace.json.gz")
    rules = [r for r in load_rules() if r.id == "KL001"]
    result = CheckResult(check_traces([table], rules), rules, 1, tables=[table])
    fills = result.findings
    assert fills and all(f.cost.category == "memset/fill" for f in fills)
    data = json.loads(renderer("json")(result, RenderContext()))
    assert data["traces"][0]["time"]["categories"] and data["findings"][0]["cost"]["category"] == "memset/fill"
    text = renderer("text")(result, RenderContext()).plain_text()
    assert "where the time goes: device time" in text and "in memset/fill" in text
    assert "Where the time goes" in renderer("markdown")(result, RenderContext())
    html = renderer("html")(result, RenderContext())
    assert 'id="time-0"' in html and 'href="#time-0"' in html


def test_h200_decode_launch_delay_and_per_step_times_match_the_raw_trace():
    """Launch delay (queue time): each kernel's start minus its launch call's start, per step and overall."""
    import statistics

    table, events = load_trace(DECODE), _raw(DECODE)
    b = time_breakdown(table)
    steps = _steps(events)
    per_step = [[max(d[1] - d[3], 0.0) for d in _device_events(events) if lo <= d[3] < hi] for lo, hi in steps]
    delays = [d for step in per_step for d in step]
    assert b.launch_delay.launches_per_step == pytest.approx(len(delays) / len(steps))
    assert b.launch_delay.mean_us == pytest.approx(statistics.fmean(delays), rel=1e-6)
    assert b.launch_delay.median_us == pytest.approx(statistics.median(delays), rel=1e-6)
    assert b.launch_delay.max_us == pytest.approx(max(delays))
    assert [s.label for s in b.per_step] == [f"ProfilerStep#{i}" for i in (1, 2, 3)]
    for s, mine in zip(b.per_step, per_step):
        assert s.launches == len(mine) and s.launch_delay_mean_us == pytest.approx(statistics.fmean(mine))
        assert s.launch_delay_max_us == pytest.approx(max(mine))
        # One stream: the categories and idle add up to the step's wall time.
        assert sum(s.categories.values()) + s.idle_us == pytest.approx(s.wall_us, rel=1e-6)
    assert sum(s.wall_us for s in b.per_step) / b.steps == pytest.approx(b.wall_us)
    assert b.comm_us == 0 and b.comm_overlap_share is None


def _two_streams(path: Path) -> Path:
    """An all-reduce on stream 2 from 10 to 40 µs, a GEMM on stream 1 from 25 to 55 µs and another from 60 to
    70 µs: 15 µs of the 30 µs of communication overlapped by compute. Launch calls at 1, 2 and 3 µs."""
    kernels = [("ncclDevKernel_AllReduce_Sum_bf16_RING_LL", 10, 30, 2, 1), ("nvjet_sm90_tst_gemm", 25, 30, 1, 2),
               ("nvjet_sm90_tst_gemm", 60, 10, 1, 3)]
    events = []
    for name, ts, dur, stream, corr in kernels:
        events += [{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": corr,
                    "dur": 0.5, "args": {"correlation": corr}},
                   {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": stream, "ts": ts, "dur": dur,
                    "args": {"correlation": corr, "device": 0, "stream": stream}}]
    path.write_text(json.dumps({"traceEvents": events}))
    return path


def test_communication_overlap_is_the_part_of_the_collectives_that_compute_covers(tmp_path):
    b = time_breakdown(load_trace(_two_streams(tmp_path / "two_streams.json")))
    assert b.basis == PROFILED_WINDOW and b.wall_us == pytest.approx(60)      # 10 to 70
    assert b.busy_us == pytest.approx(55) and b.kernel_us == pytest.approx(70)
    assert b.comm_us == pytest.approx(30) and b.comm_overlap_us == pytest.approx(15)
    assert b.comm_overlap_share == pytest.approx(0.5)
    (step,) = b.per_step
    assert (step.comm_us, step.comm_overlap_us, step.idle_us) == pytest.approx((30, 15, 5))
    assert step.categories == pytest.approx({"communication": 30, "gemm": 40})
    assert b.launch_delay.mean_us == pytest.approx((9 + 23 + 57) / 3) and b.launch_delay.max_us == pytest.approx(57)
