"""Issue 37, item 6: the contexts that demote a right KL401 finding to info (kernlint.rules.noise) and the
syncs kernlint.trace.syncs confirms, on traces built from the shapes the real ones showed. Each test fails on
the code before its fix."""
from __future__ import annotations

import json
from pathlib import Path

from rule_helpers import outcome, shipped

_corr = iter(range(1, 10_000))


def _op(name, ts, dur, tid=1):
    return {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": tid, "ts": ts, "dur": dur, "args": {}}


def _range(name, ts, dur):
    return {"ph": "X", "cat": "user_annotation", "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur}


def _call(name, ts, dur, corr=None, cat="cuda_runtime"):
    args = {"correlation": corr} if corr is not None else {}
    return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur, "args": args}


def _gemm(ts):
    """aten::mm at `ts` launching a GEMM kernel that runs 10 us later."""
    c = next(_corr)
    return [_op("aten::mm", ts, 5), _call("cudaLaunchKernel", ts + 1, 2, c),
            {"ph": "X", "cat": "kernel", "name": "nvjet_sm90_tst_128x128_64x4_TN", "pid": 0, "tid": 7,
             "ts": ts + 10, "dur": 5, "args": {"correlation": c}}]


def _readback(ts, blocked):
    """`.to("cpu")` at `ts`: aten::to -> aten::copy_ -> a pageable DtoH cudaMemcpyAsync blocking `blocked` us."""
    c = next(_corr)
    return [_op("aten::to", ts, blocked + 10), _op("aten::copy_", ts + 2, blocked + 6),
            _call("cudaMemcpyAsync", ts + 3, blocked, c),
            {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy DtoH (Device -> Pageable)", "pid": 0, "tid": 7,
             "ts": ts + 4, "dur": 2, "args": {"correlation": c}}]


def _write(tmp_path: Path, name: str, events: list) -> Path:
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps({"traceEvents": events}))
    return path


def _contexts(path: Path) -> tuple[str, list[tuple[str, str | None]]]:
    found = outcome(path, shipped("KL401"))
    return found.status, [(f.severity, f.context) for f in found.findings]


def test_a_synchronize_inside_a_range_within_the_step_is_no_step_edge(tmp_path):
    """A bare synchronize at the end of a profiler step is the harness timing it (info); one inside a
    `decode_step` range within the step, after its GEMM, is the program's own sync (an error). Before, any
    bare synchronize with no kernel after it was a step edge."""
    edge = [_range("ProfilerStep#1", 0, 200), *_gemm(10), _call("cudaDeviceSynchronize", 150, 20)]
    assert _contexts(_write(tmp_path, "edge", edge)) == ("passed", [("info", "step edge")])
    inside = [_range("ProfilerStep#1", 0, 200), *_gemm(10), _range("decode_step", 30, 160), *_gemm(40),
              _call("cudaDeviceSynchronize", 150, 20)]
    assert _contexts(_write(tmp_path, "inside", inside)) == ("failed", [("error", None)])


def test_a_readback_that_blocks_the_host_long_is_no_result_readback(tmp_path):
    """The last step's `.to("cpu")` after its last kernel is the program reading its result (info) when it
    blocks the host little; one that blocks it 777 us (torchrec's KJTListAwaitable.wait) is a sync to fix."""
    def steps(blocked):
        return [_range("ProfilerStep#1", 0, 1000), *_gemm(10), _range("ProfilerStep#2", 1000, 2000),
                *_gemm(1010), *_readback(1100, blocked)]
    assert _contexts(_write(tmp_path, "cheap", steps(20))) == ("passed", [("info", "result readback")])
    assert _contexts(_write(tmp_path, "costly", steps(777))) == ("failed", [("error", None)])


def test_an_op_that_waits_on_a_device_to_host_copy_is_a_host_sync(tmp_path):
    """MTIA: `aten::equal` waits ~0.5 ms on two device-to-host DMAs whose runtime calls the names table does
    not know as copies. The DtoH copies launched under it make it a sync (before: "no host sync anywhere");
    an `aten::equal` with nothing copied under it still reads host tensors."""
    def equal(ts, copies):
        events = [_op("aten::equal", ts, 500)]
        for k in range(copies):
            c = next(_corr)
            events += [_call("mtiaDmaTransfer", ts + 10 + 200 * k, 150, c, cat="mtia_runtime"),
                       {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy DtoH (Device -> Host)", "pid": 0,
                        "tid": 7, "ts": ts + 20 + 200 * k, "dur": 100, "args": {"correlation": c}}]
        return events

    def trace(copies):
        return [_range("ProfilerStep#1", 0, 2000), _call("mtiaLaunchKernel", 5, 2, cat="mtia_runtime"),
                *equal(100, copies), *equal(700, copies)]
    read = outcome(_write(tmp_path, "dma", trace(2)), shipped("KL401"))
    assert read.status == "failed" and [f.event for f in read.findings] == ["aten::equal"] * 2, read
    host = outcome(_write(tmp_path, "host", trace(0)), shipped("KL401"))
    assert host.status == "not-applicable" and "no host sync anywhere" in host.reason, host
