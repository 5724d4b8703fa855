"""Cross-rank rules at the right level, on the H200 NCCL tensor-parallel traces with one field of reality
changed: kernels of the previous step at the window's start, launches past its end, another kernel path
under the same op, an op that launched nothing. None of these is a divergence of the code. Each case is
checked serially and with the map in worker processes (--jobs 2): the same reports."""
from __future__ import annotations

import gzip
import json
from pathlib import Path

from conftest import FIXTURES
from kernlint.parallel import check_paths
from kernlint.rules.engine import check_traces, combine_checked, exit_status
from kernlint.rules.loader import load_rules
from kernlint.trace.load import DEFAULT_MAX_TRACE_BYTES, find_trace_files, load_trace

RUN = FIXTURES / "traces" / "gpu-tp2-nccl" / "fp8-tp-mlp"
RULES = [r for r in load_rules() if r.id in ("KL003", "KL004")]


def _ranks() -> dict[int, dict]:
    out = {}
    for path in sorted(RUN.glob("*.pt.trace.json.gz")):
        data = json.loads(gzip.decompress(path.read_bytes()))
        out[data["distributedInfo"]["rank"]] = data
    return out


def _write(folder: Path, ranks: dict[int, dict]) -> Path:
    folder.mkdir()
    for rank, data in ranks.items():
        (folder / f"rank-{rank}.json.gz").write_bytes(gzip.compress(json.dumps(data).encode()))
    return folder


def _group_report(folder: Path):
    """The reports of the serial path; the map in two worker processes must give the same ones."""
    files = find_trace_files([folder])
    reports = check_traces([load_trace(p) for p in files], RULES)
    checked = check_paths(files, RULES, max_bytes=DEFAULT_MAX_TRACE_BYTES, jobs=2, backend="processes")
    assert combine_checked(checked, RULES) == reports
    (group,) = [r for r in reports if r.ranks]
    return reports, group


def _outcome(report, rule_id):
    (o,) = [o for o in report.outcomes if o.rule == rule_id]
    return o


def _device(data):
    return [e for e in data["traceEvents"] if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]


def test_the_recorded_run_is_balanced(tmp_path):
    _reports, group = _group_report(_write(tmp_path / "run", _ranks()))
    assert _outcome(group, "KL003").status == "passed"
    assert group.outside_window == {}


def test_kernels_of_the_previous_step_and_launches_past_the_end_are_outside_the_window(tmp_path):
    """Rank 1: 64 kernels still running from the previous step when the window opened (no launch in the
    trace, ids older than every launch). Rank 0: 5 launches at the end whose kernels never ran in the
    window. Before, KL003 called each of them an imbalance."""
    ranks = _ranks()
    r1 = ranks[1]["traceEvents"]
    first = min(e["ts"] for e in _device(ranks[1]))
    template = _device(ranks[1])[0]
    for i in range(64):
        r1.append({**template, "name": "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<Adam>",
                   "ts": first - 500 + i, "dur": 3, "args": {**template["args"], "correlation": 1 + i % 5,
                                                              "External id": 1 + i % 5}})
    r0 = ranks[0]["traceEvents"]
    launch = next(e for e in r0 if e.get("name") == "cudaLaunchKernel")
    last = max(e["ts"] for e in r0 if e.get("cat") == "cuda_runtime")
    for i in range(5):
        r0.append({**launch, "ts": last + 10 + i, "args": {**launch["args"], "correlation": 90000 + i}})
    reports, group = _group_report(_write(tmp_path / "run", ranks))
    o = _outcome(group, "KL003")
    assert o.status == "passed", [f.message for f in o.findings]
    assert group.outside_window == {"device events launched before the window opened": 64,
                                    "launches whose device work falls past the window's end": 5}
    assert any("rank 1: 64 device events launched before the window opened" in n for n in group.notes)
    assert exit_status(reports) == 0


def test_another_kernel_path_or_an_empty_launch_under_the_same_op_is_info(tmp_path):
    """Rank 1 took another GEMM kernel under the same aten op (a library's size-dependent choice) and one
    of its elementwise ops launched nothing (an empty tensor): info findings, exit 0."""
    ranks = _ranks()
    r1 = ranks[1]["traceEvents"]
    gemm = next(e for e in _device(ranks[1]) if e["name"].startswith("nvjet"))
    gemm["name"] = "sm90_xmma_gemm_e4m3bf16_e4m3f32_f32_tn_n_tilesize128x128x128_warpgroupsize1x1x1_execute_kernel"
    ew = next(e for e in _device(ranks[1]) if "elementwise_kernel" in e["name"])
    corr = ew["args"]["correlation"]
    ranks[1]["traceEvents"] = [e for e in r1 if not (
        e.get("cat") in ("kernel", "cuda_runtime", "ac2g") and (e.get("args") or {}).get("correlation") == corr)
        and not (e.get("cat") == "ac2g" and e.get("id") == corr)]
    reports, group = _group_report(_write(tmp_path / "run", ranks))
    o = _outcome(group, "KL003")
    assert o.status == "passed"
    assert len(o.findings) == 2 and {f.severity for f in o.findings} == {"info"}
    messages = " | ".join(f.message for f in o.findings)
    assert "sm90_xmma_gemm" in messages and "no device work" in messages
    assert exit_status(reports) == 0


def test_an_extra_op_on_one_rank_is_still_an_error_with_its_line():
    run = FIXTURES / "traces" / "gpu-tp2-nccl" / "fp8-tp-mlp-rank1-sync"
    reports, group = _group_report(run)
    o = _outcome(group, "KL003")
    assert o.status == "failed"
    assert {f.event for f in o.findings} == {"aten::abs", "aten::amax", "aten::item"}
    assert all(f.rank == 1 and f.source and "workloads.py:" in f.source for f in o.findings)
    assert exit_status(reports) == 1


def test_the_group_verdict_reads_each_ranks_stream_not_its_table():
    """run_group gets each rank's RankStream (the kind's rank part): the findings carry rank, line and cost
    without a table in sight."""
    import pickle

    from kernlint.rules.engine import summarize_trace

    run = FIXTURES / "traces" / "gpu-tp2-nccl" / "fp8-tp-mlp-rank1-sync"
    checked = [pickle.loads(pickle.dumps(summarize_trace(load_trace(p), RULES))) for p in find_trace_files([run])]
    (group,) = [r for r in combine_checked(checked, RULES) if r.ranks]
    findings = _outcome(group, "KL003").findings
    assert {f.event for f in findings} == {"aten::abs", "aten::amax", "aten::item"}
    assert all(f.rank == 1 and f.device_us is not None and f.function for f in findings)
