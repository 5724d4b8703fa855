"""CUDA-graph replays attributed to their captures (kernlint.trace.graphs, kernlint.trace.pairing).

Traces: fixtures/traces/gpu-graphs, recorded on the H200 by fixtures/gpu_programs/graph_decoder.py (a 4-layer
FP8 decoder, 2 Fp8BlockLinear a layer, graphs for batch sizes 8 and 16); the TraceLens vLLM piecewise pair in
fixtures/external (a replay trace and the capture trace vLLM wrote for it, on an MI300X).
KL001's verdicts on them are rule cases (fixtures/cases/KL001.toml); here: the attribution itself.
"""
from __future__ import annotations

import gzip
import json
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from fresh_cli import run_fresh
from kernlint.errors import TraceError
from kernlint.rules.engine import check_trace
from kernlint.rules.loader import load_rules
from kernlint.trace.graphs import capture_windows, graph_replays
from kernlint.trace.load import load_trace
from kernlint.trace.pairing import pair_captures
from kernlint.trace.scopes import ScopeIndex

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
GRAPHS = FIXTURES / "traces" / "gpu-graphs"
EXTERNAL = FIXTURES / "external"
VLLM_REPLAY = EXTERNAL / "tracelens__vllm_piecewise__graph_execution.json.gz"
VLLM_CAPTURE = EXTERNAL / "tracelens__vllm_piecewise__graph_capture_rank_0.1773709679453551615.pt.trace.json.gz"
LIMIT = 1 << 30


def _graph(name: str) -> Path:
    return GRAPHS / f"graph-{name}.pt.trace.json.gz"


@pytest.fixture(scope="module")
def kl001():
    return [r for r in load_rules() if r.id == "KL001"]


@pytest.fixture(scope="module")
def vllm_tables():
    """The real vLLM replay trace alone and with its capture trace (read once: the checks only read them)."""
    return load_trace(VLLM_REPLAY), load_trace(VLLM_REPLAY, captures=[VLLM_CAPTURE])


def test_the_vllm_piecewise_pair_is_attributed_whole(vllm_tables):
    """The issue's target: >= 95% of the replayed kernels and of their device time; the pair gives all."""
    alone = graph_replays(vllm_tables[0])
    assert (alone.replays, alone.kernels, alone.attributed_kernels, alone.captures) == (25, 361, 0, 0)
    stats = graph_replays(vllm_tables[1])
    assert (stats.replays, stats.kernels, stats.captures, stats.unmatched_replays) == (25, 361, 25, 0)
    assert stats.attributed_kernels / stats.kernels >= 0.95
    assert stats.attributed_device_us / stats.device_us >= 0.95
    assert stats.attributed_kernels == 361


def test_replayed_kernels_take_the_captured_launchs_op_module_and_line():
    table = load_trace(_graph("new-ones-replay"), captures=[_graph("new-ones-capture")])
    f = table.frame
    kernels = f[(f["kind"] == "kernel") & (f["replay"] >= 0)]
    assert len(kernels) == 204 and (kernels["launcher"] != kernels["replay"]).all()
    fills = kernels[kernels["name"].str.contains("FillFunctor")]
    assert len(fills) == 24          # 3 replays x 8 linears
    ops = {f["name"].iat[int(o)] for o in fills["op"]}
    assert ops == {"aten::fill_"}
    assert set(fills["source"]) == {"regressed/fp8_linear_new_ones.py:17"}
    modules = Counter(f["name"].iat[int(m)] for m in fills["module"])
    assert all(name.startswith("nn.Module: Fp8BlockLinearNewOnes_") for name in modules)
    # Each replay's kernels come from one capture: replays 1 and 3 ran batch size 16, replay 2 batch size 8.
    by_replay = {r: sorted(set(f["thread"].iat[int(lr)] for lr in group["launcher"]))
                 for r, group in kernels.groupby("replay")}
    assert len(by_replay) == 3 and all(len(threads) == 1 for threads in by_replay.values())
    assert all(t.startswith("capture:") for threads in by_replay.values() for t in threads)


def test_replays_cycle_through_captures_of_one_kernel_sequence_in_capture_order():
    """Piecewise graphs: 8 pieces per batch size of two kernel sequences; replays take them in order."""
    table = load_trace(_graph("new-ones-piecewise"))
    windows = capture_windows(table.columns)
    assert len(windows) == 16
    stats = graph_replays(table)
    assert (stats.replays, stats.attributed_kernels, stats.kernels, stats.ambiguous_replays) == (16, 136, 136, 16)
    f = table.frame
    fills = f[(f["kind"] == "kernel") & (f["replay"] >= 0) & f["name"].str.contains("FillFunctor")]
    # Each captured module row (8 linears x 2 batch sizes) is attributed once: the replay of batch size 16
    # took the pieces captured for 16, layer by layer, and the replay of 8 those captured for 8.
    rows = Counter(int(m) for m in fills["module"])
    assert len(rows) == 16 and set(rows.values()) == {1}
    names = Counter(f["name"].iat[m] for m in rows)
    assert len(names) == 8 and set(names.values()) == {2}


def test_a_kernel_order_mismatch_leaves_the_replay_unattributed_and_says_so(tmp_path, kl001):
    data = json.loads(gzip.open(_graph("new-ones-in-window")).read())
    events = data["traceEvents"]
    begins = sorted((e for e in events if e.get("name") == "cudaStreamBeginCapture"), key=lambda e: e["ts"])
    ends = sorted((e for e in events if e.get("name") == "cudaStreamEndCapture"), key=lambda e: e["ts"])
    # Drop one captured launch from each capture: no capture has the replays' kernel count any more.
    for b, e in zip(begins, ends):
        launch = next(x for x in sorted(events, key=lambda x: x.get("ts", 0))
                      if x.get("name") == "cudaLaunchKernel" and b["ts"] < x["ts"] < e["ts"])
        events.remove(launch)
    path = tmp_path / "cut.json"
    path.write_text(json.dumps(data))
    table = load_trace(path)
    stats = graph_replays(table)
    assert (stats.replays, stats.attributed_kernels, stats.unmatched_replays) == (2, 0, 2)
    report = check_trace(table, kl001)
    assert any("0 (0%" in w and "matched no capture" in w for w in report.warnings), report.warnings
    outcome = report.outcomes[0]
    # The eager warm-ups are still scoped; the replays are judged by kernel order, and say so.
    assert outcome.status == "failed"
    order_only = [x for x in outcome.findings if "kernel order only" in x.message]
    assert len(order_only) == 16 and "replayed from CUDA graphs" in outcome.note


def test_scope_lookups_see_one_replay_at_a_time():
    table = load_trace(_graph("new-ones-replay"), captures=[_graph("new-ones-capture")])
    index = ScopeIndex.of(table)
    f = table.frame
    fill = int(f.index[(f["kind"] == "kernel") & (f["replay"] >= 0) & f["name"].str.contains("FillFunctor")][0])
    thread, at = index.thread[fill], float(index.launch_ts[fill])
    assert fill not in index.device_events_between(thread, at, at + 1e-3).tolist()   # eager lookups: none
    seen = []
    for replay in index.replays:
        with index.in_replay(replay):
            seen.append(len(index.device_events_between(thread, at, at + 1e-3)))
    assert len(index.replays) == 3 and seen.count(1) == 2 and seen.count(0) == 1   # capture 1 runs twice


def test_a_capture_trace_with_its_replay_trace_is_paired_by_process_and_time(tmp_path):
    files = sorted(GRAPHS.glob("*.json.gz"))
    pairing = pair_captures(files, LIMIT)
    assert pairing.captures == {
        str(_graph(v + s + "-replay")): [str(_graph(v + s + "-capture"))]
        for v in ("new-empty", "new-ones") for s in ("", "-nostack")}
    assert len(pairing.checked) == len(files) - 4
    assert not any("capture.pt" in str(p) for p in pairing.checked)
    # One trace alone is never read for pairing; the TraceLens pair is found in the external folder.
    assert pair_captures([_graph("new-ones-replay")], LIMIT).captures == {}
    external = pair_captures(sorted(EXTERNAL.rglob("*.json.gz")), LIMIT)
    assert external.captures == {str(VLLM_REPLAY): [str(VLLM_CAPTURE)]}


def test_a_capture_file_that_records_no_capture_is_an_error():
    with pytest.raises(TraceError, match="records no CUDA-graph capture"):
        pair_captures([_graph("new-ones-replay")], LIMIT, explicit=[_graph("new-ones-replay")])
    with pytest.raises(TraceError, match="records no CUDA-graph capture"):
        load_trace(_graph("new-ones-replay"), captures=[_graph("new-ones-replay")])


def _cli(*args) -> subprocess.CompletedProcess:
    return run_fresh(args, timeout=300)


def test_check_reports_the_graphs_block_and_attributes_with_capture(tmp_path):
    out = tmp_path / "r.json"
    proc = _cli("check", _graph("new-ones-replay"), "--capture", _graph("new-ones-capture"), "--select", "KL001",
                "--format", "json", "-o", out, "--isolated")
    assert proc.returncode == 1, proc.stderr
    report = json.loads(out.read_text())
    (trace,) = report["traces"]
    assert trace["graphs"] == {"replays": 3, "kernels": 204, "attributed_kernels": 204,
                               "device_us": trace["graphs"]["device_us"],
                               "attributed_device_us": trace["graphs"]["device_us"], "captures": 2,
                               "by_node_id": 0, "unmatched_replays": 0, "ambiguous_replays": 3}
    assert len(report["findings"]) == 24
    # the recorded regressed/... mapped to the repository's file (the CLI maps sources into the checkout)
    assert {f["source"] for f in report["findings"]} == {"fixtures/regressed/fp8_linear_new_ones.py:17"}
    assert Counter(f["message"].rsplit("(graph replay ", 1)[1][0] for f in report["findings"]) == \
        {"1": 8, "2": 8, "3": 8}
    # Alone, the replay trace warns that nothing was attributed; the text says it in one line.
    alone = _cli("check", _graph("new-empty-replay"), "--select", "KL001", "--isolated")
    assert alone.returncode == 0, alone.stderr
    assert "0 (0%, 0% of their device time) attributed" in alone.stdout
    bad = _cli("check", _graph("new-empty-replay"), "--capture", _graph("new-empty-replay"), "--isolated")
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1
    assert "records no CUDA-graph capture" in bad.stderr and "Traceback" not in bad.stderr


def test_attribution_adds_no_finding_on_the_real_vllm_replay(vllm_tables):
    """The replay alone and with its capture: the same findings of every rule (vLLM's execute_model sync; its
    input prep's lift_fresh comes from torch.from_numpy, zero-copy, and is no KL502), and KL701 judges the
    attributed pieces instead of the coarse execute_model frame."""
    rules = load_rules()
    keys = [{(x.rule, x.scope, x.event) for x in check_trace(t, rules).findings}
            for t in vllm_tables]
    assert keys[0] == keys[1]
    assert {k[0] for k in keys[1]} == {"KL401"}


def _with_node_ids(tmp_path, crossed: bool = False) -> Path:
    """The in-window H200 trace with CUPTI-style graph node ids: each launch made during capture w gets node
    id (w + 1) * 10**6 + i, and the i-th kernel of replay r the id of launch i of the capture it replays
    (replay r of capture r; `crossed`: of the other capture). The capture calls themselves are removed, so
    only the node ids can link replays to launches."""
    data = json.loads(gzip.open(_graph("new-ones-in-window")).read())
    events = data["traceEvents"]
    rt = sorted((e for e in events if e.get("cat") in ("cuda_runtime", "cuda_driver")), key=lambda e: e["ts"])
    begins = [e for e in rt if e["name"] == "cudaStreamBeginCapture"]
    ends = [e for e in rt if e["name"] == "cudaStreamEndCapture"]
    for w, (b, e) in enumerate(zip(begins, ends)):
        launches = [x for x in rt if b["ts"] < x["ts"] < e["ts"] and "Launch" in x["name"]]
        for i, x in enumerate(launches):
            x["args"]["graph node id"] = (w + 1) * 10**6 + i
    graph_launches = [x for x in rt if x["name"] == "cudaGraphLaunch"]
    for r, g in enumerate(graph_launches):
        ran = sorted((k for k in events if k.get("cat") == "kernel" and k["args"].get("correlation") ==
                      g["args"]["correlation"]), key=lambda k: k["ts"])
        w = (1 - r) if crossed else r
        for i, k in enumerate(ran):
            k["args"]["graph node id"] = (w + 1) * 10**6 + i
    data["traceEvents"] = [e for e in events if e not in begins and e not in ends]
    path = tmp_path / f"node-ids{'-crossed' if crossed else ''}.json"
    path.write_text(json.dumps(data))
    return path


def test_graph_node_ids_attribute_replays_without_the_capture_calls(tmp_path, kl001):
    table = load_trace(_with_node_ids(tmp_path))
    assert capture_windows(table.columns) == []
    stats = graph_replays(table)
    assert (stats.replays, stats.by_node_id, stats.attributed_kernels, stats.kernels) == (2, 2, 136, 136)
    outcome = check_trace(table, kl001).outcomes[0]
    assert outcome.status == "failed" and len(outcome.findings) == 32   # 2 eager warm-ups + 2 replays, x 8
    assert {f.source for f in outcome.findings} == {"regressed/fp8_linear_new_ones.py:17"}


def test_graph_node_ids_decide_over_kernel_order(tmp_path):
    """Crossed node ids send replay 1 to the launches of capture 2: the node ids are followed, not the order."""
    straight, crossed = (load_trace(_with_node_ids(tmp_path, c)) for c in (False, True))

    def modules_of_first_replay(table):
        f = table.frame
        first = f.loc[f["replay"] >= 0, "replay"].min()
        return set(f.loc[f["replay"] == first, "module"].tolist())

    assert modules_of_first_replay(straight).isdisjoint(modules_of_first_replay(crossed))
    assert graph_replays(crossed).by_node_id == 2


def test_a_baseline_of_the_fixed_replays_catches_the_fill_in_every_replay():
    """KL801 on graph replays: the fixed decoder's replay + capture is the baseline; the new_ones one adds a
    fill before the quant kernel in each linear's module, at the placeholder's line. A window without profiler
    steps is compared per replay (each replay a run: 2 of batch 16, 1 of batch 8), so the 8 fills are the
    added launches of one step, not 24 of the whole window."""
    from kernlint.baseline import build_baseline, profile_traces
    from kernlint.pipeline import check_tables

    fixed = load_trace(_graph("new-empty-replay"), captures=[_graph("new-empty-capture")])
    regressed = load_trace(_graph("new-ones-replay"), captures=[_graph("new-ones-capture")])
    baseline = build_baseline(profile_traces([fixed]))
    rules = [r for r in load_rules() if r.id in ("KL801", "KL805")]
    against_itself = check_tables([load_trace(_graph("new-empty-replay"), captures=[_graph("new-empty-capture")])],
                                  rules, baseline=baseline)
    assert not [f for rep in against_itself for f in rep.findings]
    reports = check_tables([regressed], rules, baseline=baseline)
    added = [f for rep in reports for f in rep.findings if f.rule == "KL801"]
    assert len(added) == 8 and all("FillFunctor" in f.event for f in added)
    program = next(iter(baseline.programs.values()))
    assert (program.runs, program.other_sequences) == (2, 1)
    assert {f.source for f in added} == {"regressed/fp8_linear_new_ones.py:17"}
    assert {f.scope for f in added} == {f"module Fp8BlockLinearNewOnes_{i}" for i in range(8)}
    assert not [f for rep in reports for f in rep.findings if f.rule == "KL805"]


def test_replay_findings_say_which_replay_and_capture(tmp_path):
    out = tmp_path / "r.json"
    _cli("check", _graph("new-ones-replay"), _graph("new-ones-capture"), "--select", "KL001", "--format", "json",
         "-o", out, "--isolated")
    details = [f["details"] for f in json.loads(out.read_text())["findings"]]
    assert Counter(d["graph_replay"] for d in details) == {1: 8, 2: 8, 3: 8}
    assert {d["capture"] for d in details} == {"capture 1", "capture 2"} and all(d["attributed"] for d in details)
    alone = tmp_path / "alone.json"
    _cli("check", _graph("new-ones-replay"), "--select", "KL001", "--format", "json", "-o", alone, "--isolated")
    details = [f["details"] for f in json.loads(alone.read_text())["findings"]]
    assert len(details) == 24 and not any(d["attributed"] or d["capture"] for d in details)


def test_a_sync_inside_a_stream_capture_still_fails_kl491(tmp_path):
    """KL491 counts only syncs inside BeginCapture .. EndCapture where the trace records captures: one put
    inside the first capture is a finding; the warm-up sync before it is not."""
    data = json.loads(gzip.open(_graph("new-empty-in-window")).read())
    events = data["traceEvents"]
    begin = min((e for e in events if e.get("name") == "cudaStreamBeginCapture"), key=lambda e: e["ts"])
    end = min((e for e in events if e.get("name") == "cudaStreamEndCapture"), key=lambda e: e["ts"])
    # Right after the 10th launch recorded into the graph: in the model's own code, mid-capture.
    launch = sorted((e for e in events if e.get("name") == "cudaLaunchKernel" and begin["ts"] < e["ts"] < end["ts"]),
                    key=lambda e: e["ts"])[9]
    events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaStreamSynchronize", "pid": begin["pid"],
                   "tid": begin["tid"], "ts": launch["ts"] + launch["dur"] + 0.01, "dur": 0.01,
                   "args": {"correlation": 10**9}})
    path = tmp_path / "sync-in-capture.json"
    path.write_text(json.dumps(data))
    kl491 = [r for r in load_rules() if r.id == "KL491"]
    outcome = check_trace(load_trace(path), kl491).outcomes[0]
    assert outcome.status == "failed" and [f.event for f in outcome.findings] == ["cudaStreamSynchronize"]
    assert "outside its stream captures" in outcome.note
