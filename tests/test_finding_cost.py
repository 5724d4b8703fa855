"""Every finding's cost (kernlint.rules.cost), checked against the events of recorded traces, computed here
from the raw trace JSON without kernlint's table."""
from __future__ import annotations

import gzip
import json
import math

import pytest

from conftest import FIXTURES
from kernlint.pipeline import CheckRequest, Inputs, run_check
from kernlint.report import renderer
from kernlint.rules.cost import per_run_cost
from kernlint.rules.loader import load_rules

ITEM_SYNC = FIXTURES / "traces" / "gpu-decode" / "decode-item-sync-steps.pt.trace.json.gz"
UPLOAD = FIXTURES / "traces" / "gpu-decode" / "decode-host-tensor-upload-steps.pt.trace.json.gz"
BLOCK_REGRESSED = FIXTURES / "traces" / "gpu" / "block_regressed.pt.trace.json.gz"
CPU_STEPS = FIXTURES / "traces" / "cpu-runs" / "repeat2" / "vm_6924.1796004622045774631.pt.trace.json.gz"
DEVICE_CATEGORIES = {"kernel", "gpu_memcpy", "gpu_memset"}


def _events(path) -> list[dict]:
    with gzip.open(path, "rt") as f:
        return [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]


def _check(path, *rule_ids):
    rules = [r for r in load_rules() if r.id in rule_ids]
    return run_check(CheckRequest(rules=rules, inputs=Inputs(paths=[path])))


def _step_of(events, ts) -> dict:
    steps = [e for e in events if e["name"].startswith("ProfilerStep#") and e.get("cat") == "user_annotation"]
    return next(s for s in steps if s["ts"] <= ts < s["ts"] + s["dur"])


def _sync_cost(events, op) -> tuple[float, float]:
    """(µs, share): the synchronize under the op, plus the device idle after it returned; over its step."""
    inside = [e for e in events if e.get("cat") == "cuda_runtime" and e.get("tid") == op.get("tid")
              and op["ts"] <= e["ts"] < op["ts"] + op["dur"]]
    (sync,) = [e for e in inside if "Synchronize" in e["name"]]
    returned = sync["ts"] + sync["dur"]
    device = [e for e in events if e.get("cat") in DEVICE_CATEGORIES]
    assert not any(e["ts"] < returned < e["ts"] + e["dur"] for e in device)   # the device was idle
    last_end = max(e["ts"] + e["dur"] for e in device if e["ts"] + e["dur"] <= returned)
    next_start = min(e["ts"] for e in device if e["ts"] >= returned)
    us = sync["dur"] + (next_start - last_end)
    return us, us / _step_of(events, op["ts"])["dur"]


def test_a_sync_costs_the_host_block_and_the_device_idle_after_it():
    result = _check(ITEM_SYNC, "KL401")
    findings = sorted(result.findings, key=lambda f: f.ts)
    assert len(findings) == 3
    events = _events(ITEM_SYNC)
    ops = sorted((e for e in events if e["name"] == "aten::is_nonzero"), key=lambda e: e["ts"])
    assert len(ops) == 3
    for f, op in zip(findings, ops, strict=True):
        us, share = _sync_cost(events, op)
        assert f.cost.basis == "host blocked + device idle" and f.cost.of == "the step"
        assert f.cost.us > 0 and math.isclose(f.cost.us, us, rel_tol=1e-9, abs_tol=1e-6)
        assert 0 < f.cost.share <= 1 and math.isclose(f.cost.share, share, rel_tol=1e-6)
        assert f.device_us == pytest.approx(1.408, abs=1e-3)   # unchanged: the DtoH copy's device time
    first = findings[0].cost
    assert first.us == pytest.approx(6.989 + (5164984025898.62 - 5164984025870.908), abs=1e-6)   # 34.701 µs
    assert first.share == pytest.approx(first.us / 2582.451, rel=1e-6)


def test_an_upload_costs_its_copy_and_the_host_block():
    result = _check(UPLOAD, "KL501")
    events = _events(UPLOAD)
    runtime = {e["args"]["correlation"]: e for e in events if e.get("cat") == "cuda_runtime"}
    copies = sorted((e for e in events if e["name"].startswith("Memcpy HtoD (Pageable")), key=lambda e: e["ts"])
    findings = sorted(result.findings, key=lambda f: f.ts)
    assert len(findings) == len(copies) == 3
    for f, copy in zip(findings, copies, strict=True):
        call = runtime[copy["args"]["correlation"]]
        assert f.cost.basis == "copy + host blocked"
        assert f.cost.us == pytest.approx(copy["dur"] + call["dur"], abs=1e-6)
        assert 0 < f.cost.share <= 1


def test_a_fill_costs_its_device_time():
    result = _check(BLOCK_REGRESSED, "KL001")
    events = _events(BLOCK_REGRESSED)
    launches = {e["ts"]: e for e in events if e.get("cat") == "cuda_runtime"}
    kernels = {e["args"]["correlation"]: e for e in events if e.get("cat") == "kernel"}
    assert result.findings
    for f in result.findings:
        kernel = kernels[launches[f.ts]["args"]["correlation"]]
        assert "FillFunctor" in kernel["name"]
        assert f.cost.basis == "device time" and f.cost.us == pytest.approx(kernel["dur"]) == f.device_us
        # no ProfilerStep: the module instance; a fill is a share of the device time the scope launched
        assert f.cost.of == "the scope's device time" and 0 < f.cost.share <= 1


def test_a_cpu_trace_finding_is_costed_on_its_step():
    result = _check(CPU_STEPS, "KL401")
    (f,) = result.findings
    events = _events(CPU_STEPS)
    (item,) = [e for e in events if e["name"] == "aten::item" and math.isclose(e["ts"], f.ts, abs_tol=1e-3)]
    step = _step_of(events, item["ts"])
    assert f.cost.basis == "host time"   # no device runtime recorded: the op's own time
    assert f.cost.us == pytest.approx(item["dur"])
    assert f.cost.of == "the step" and f.cost.share == pytest.approx(item["dur"] / step["dur"], rel=1e-6)


def test_a_baseline_cost_is_per_run_without_a_share():
    cost = per_run_cost(12.5)
    assert (cost.us, cost.share, cost.basis) == (12.5, None, "per run") and cost.reason
    assert per_run_cost(float("nan")).us is None


def test_every_format_shows_the_cost():
    result = _check(ITEM_SYNC, "KL401")
    data = json.loads(renderer("json")(result))
    cost = data["findings"][0]["cost"]
    assert set(cost) >= {"us", "share", "basis"} and cost["us"] > 0
    assert data["causes"][0]["cost"]["us"] == pytest.approx(sum(f.cost.us for f in result.findings))
    sarif = json.loads(renderer("sarif")(result))
    props = sarif["runs"][0]["results"][0]["properties"]
    assert props["cost_us"] > 0 and 0 < props["cost_share"] <= 1
    assert "host blocked + device idle" in renderer("markdown")(result)
