"""CUDA-graph replays attributed to their captures (kernlint.trace.graphs, kernlint.trace.pairing).

Traces: fixtures/traces/gpu-graphs, recorded on the H200 by fixtures/gpu_programs/graph_decoder.py (a 4-layer
FP8 decoder, 2 Fp8BlockLinear a layer, graphs for batch sizes 8 and 16); the TraceLens vLLM piecewise pair in
fixtures/external (a replay trace and the capture trace vLLM wrote for it, on an MI300X).
KL001's verdicts on them are rule cases (fixtures/cases/KL001.toml); here: the attribution itself.
Issue 36: replays aligned with captures that hold a launch or two more (xDiT: graph-new-ones-xdit-style, made by
scripts/make_graph_fixtures.py), capture traces paired with replay traces by content (fixtures/traces/graph-pairing:
the TraceLens pair as another graph configuration, same script), PyTorch's own graph evidence (kernel annotations,
per-node stacks) and CUDAGraph.replay()'s prologue fills.
"""
from __future__ import annotations

import gzip
import json
import subprocess
from collections import Counter
from pathlib import Path

import numpy as np
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


def _cut_captures(tmp_path, dropped: int) -> Path:
    """The in-window H200 trace with the first `dropped` launches of each capture removed."""
    data = json.loads(gzip.open(_graph("new-ones-in-window")).read())
    events = data["traceEvents"]
    begins = sorted((e for e in events if e.get("name") == "cudaStreamBeginCapture"), key=lambda e: e["ts"])
    ends = sorted((e for e in events if e.get("name") == "cudaStreamEndCapture"), key=lambda e: e["ts"])
    ordered = sorted(events, key=lambda x: x.get("ts", 0))
    for b, e in zip(begins, ends):
        launches = [x for x in ordered if x.get("name") == "cudaLaunchKernel" and b["ts"] < x["ts"] < e["ts"]]
        for launch in launches[:dropped]:
            events.remove(launch)
    path = tmp_path / f"cut-{dropped}.json"
    path.write_text(json.dumps(data))
    return path


def test_a_capture_missing_a_launch_still_aligns_with_its_replays(tmp_path):
    """Alignment, not equality: one launch fewer in each capture (68 kernels replayed, 67 launches captured)
    attributes 67 of each replay's kernels; the one left over stays linked to its graph launch."""
    stats = graph_replays(load_trace(_cut_captures(tmp_path, 1)))
    assert (stats.replays, stats.kernels, stats.attributed_kernels, stats.unmatched_replays) == (2, 136, 134, 0)
    assert [(m.method, m.attributed, m.kernels, m.edits) for m in stats.matches] == [("aligned", 67, 68, 1)] * 2
    assert stats.low_share() == [] and stats.report_lines()[1] == []


def test_a_replay_attributed_below_90_percent_is_a_warning(tmp_path, kl001):
    """7 launches missing of 68: aligned within the edit bound, 61 of 68 kernels (89.7%) attributed, below 90%:
    a warning that names the replays and their share, never a silent pass."""
    table = load_trace(_cut_captures(tmp_path, 7))
    stats = graph_replays(table)
    assert [(m.method, m.attributed, m.kernels) for m in stats.matches] == [("aligned", 61, 68)] * 2
    assert len(stats.low_share()) == 2
    report = check_trace(table, kl001)
    low = [w for w in report.warnings if "below 90%" in w]
    assert len(low) == 1 and "replay 1: 61 of 68 (89.7%, aligned with capture 1)" in low[0], report.warnings
    assert report.graphs["low_share_replays"] == 2


def test_a_kernel_order_mismatch_leaves_the_replay_unattributed_and_says_so(tmp_path, kl001):
    """Half of each capture's launches missing: beyond the edit bound, no capture fits the replays; they are
    judged by kernel order, and the report says so."""
    table = load_trace(_cut_captures(tmp_path, 34))
    stats = graph_replays(table)
    assert (stats.replays, stats.attributed_kernels, stats.unmatched_replays) == (2, 0, 2)
    assert {m.method for m in stats.matches} == {"kernel-order"}
    report = check_trace(table, kl001)
    assert any("0 (0%" in w and "matched no capture" in w for w in report.warnings), report.warnings
    outcome = report.outcomes[0]
    # The eager warm-ups are still scoped; the replays are judged by kernel order, and say so.
    assert outcome.status == "failed"
    order_only = [x for x in outcome.findings if "kernel order only" in x.message]
    assert len(order_only) == 16 and "replayed from CUDA graphs" in outcome.note


def test_an_xdit_style_capture_one_gemm_longer_than_its_replay_is_attributed(kl001):
    """xDiT's capture traces hold capture and replay in one file, the capture one GEMM longer than the replay:
    0 attributed before (exact match only); aligned now, every replayed kernel attributed, and KL001 judges
    the replays in their modules as on the trace they were made from (2 warm-ups + 2 replays, x 8 linears)."""
    table = load_trace(_graph("new-ones-xdit-style"))
    stats = graph_replays(table)
    assert (stats.replays, stats.kernels, stats.captures) == (2, 134, 2)
    assert stats.attributed_kernels / stats.kernels >= 0.9
    assert [(m.method, m.attributed, m.kernels, m.edits) for m in stats.matches] == [("aligned", 67, 67, 1)] * 2
    outcome = check_trace(table, kl001).outcomes[0]
    assert outcome.status == "failed" and len(outcome.findings) == 32
    assert not [f for f in outcome.findings if "kernel order" in f.message]
    assert {f.source for f in outcome.findings} == {"regressed/fp8_linear_new_ones.py:17"}


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
    # Every capture trace is checked too, outside its capture windows (they are judged in its replay trace).
    assert pairing.checked == files
    assert pairing.outside_captures == {str(_graph(v + s + "-capture")) for v in ("new-empty", "new-ones")
                                        for s in ("", "-nostack")}
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
    per_replay = [{"replay": n, "kernels": 68, "attributed_kernels": 68, "share": 1.0, "method": "exact",
                   "capture": c, "edits": 0} for n, c in ((1, "capture 1"), (2, "capture 2"), (3, "capture 1"))]
    assert trace["graphs"] == {"replays": 3, "kernels": 204, "attributed_kernels": 204,
                               "device_us": trace["graphs"]["device_us"],
                               "attributed_device_us": trace["graphs"]["device_us"], "captures": 2,
                               "by_node_id": 0, "unmatched_replays": 0, "ambiguous_replays": 3,
                               "aligned_replays": 0, "low_share_replays": 0, "methods": {"exact": 3},
                               "per_replay": per_replay}
    assert len(report["findings"]) == 24
    # the recorded regressed/... mapped to the repository's file (the CLI maps sources into the checkout), at the
    # statement that issued the op (the def of _placeholder_scale is line 17)
    assert {f["source"] for f in report["findings"]} == {"fixtures/regressed/fp8_linear_new_ones.py:18"}
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
    findings = json.loads(out.read_text())["findings"]
    details = [f["details"] for f in findings if f["trace"].endswith("replay.pt.trace.json.gz")]
    assert Counter(d["graph_replay"] for d in details) == {1: 8, 2: 8, 3: 8}
    assert {d["capture"] for d in details} == {"capture 1", "capture 2"} and all(d["attributed"] for d in details)
    # The capture trace is checked on its own outside its captures: its two eager warm-ups (batch 16 and 8),
    # not the captured launches again (those are the replays' findings).
    warm_ups = [f for f in findings if f["trace"].endswith("capture.pt.trace.json.gz")]
    assert len(warm_ups) == 16   # no replay's details (the CLI's source refinement adds only `source_line`)
    assert not any(set(f["details"] or {}) - {"source_line", "def_line"} for f in warm_ups)
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


# ---- issue 36: the TraceLens pair's replays in JSON, pairing by content, capture traces checked on their own ----

PAIRING = FIXTURES / "traces" / "graph-pairing"
FULL_REPLAY = PAIRING / "tracelens-vllm-fullgraph-replay.pt.trace.json.gz"
FULL_CAPTURE = PAIRING / "tracelens-vllm-fullgraph-capture.pt.trace.json.gz"
SHARED = FIXTURES.parent.parent / "shared" / "traces-external"


def _folder(tmp_path, *paths: Path) -> Path:
    folder = tmp_path / "traces"
    folder.mkdir(exist_ok=True)
    for p in paths:
        (folder / p.name).symlink_to(p.resolve())
    return folder


def test_the_vllm_pair_reports_each_replays_share_in_json(tmp_path):
    """The shared TraceLens vLLM pair (../shared/traces-external, the same files as fixtures/external): every
    one of the 25 piecewise replays attributed exactly, each with its share, method and capture in JSON."""
    replay = SHARED / VLLM_REPLAY.name if (SHARED / VLLM_REPLAY.name).exists() else VLLM_REPLAY
    capture = SHARED / VLLM_CAPTURE.name if (SHARED / VLLM_CAPTURE.name).exists() else VLLM_CAPTURE
    out = tmp_path / "r.json"
    proc = _cli("check", _folder(tmp_path, replay, capture), "--select", "KL001", "--format", "json", "-o", out,
                "--isolated")
    assert proc.returncode in (0, 1), proc.stderr
    report = json.loads(out.read_text())
    graphs = next(t["graphs"] for t in report["traces"] if t["graphs"])
    assert (graphs["replays"], graphs["kernels"], graphs["attributed_kernels"]) == (25, 361, 361)
    assert len(graphs["per_replay"]) == 25 and {r["method"] for r in graphs["per_replay"]} == {"exact"}
    assert min(r["share"] for r in graphs["per_replay"]) >= 0.9
    assert len({r["capture"] for r in graphs["per_replay"]}) == 25   # each piece replayed once, in capture order
    assert any("25 of 25 graph replay(s) align with the capture trace(s)" in n for n in report["notes"])


def test_capture_traces_pair_with_the_replay_traces_they_align_with():
    """Two graph configurations of one process and rank in one folder (TraceLens' vllm_decode_full and
    vllm_prefilldecode_piecewise; here the piecewise pair and the same run as one full graph): by process, rank
    and time the piecewise replays would take the full-graph capture (recorded last before them) and match
    nothing; by content each replay trace takes its own."""
    files = [VLLM_REPLAY, VLLM_CAPTURE, FULL_REPLAY, FULL_CAPTURE]
    pairing = pair_captures(files, LIMIT)
    assert pairing.captures == {str(VLLM_REPLAY): [str(VLLM_CAPTURE)], str(FULL_REPLAY): [str(FULL_CAPTURE)]}
    assert pairing.checked == files and pairing.outside_captures == {str(VLLM_CAPTURE), str(FULL_CAPTURE)}
    assert f"{VLLM_REPLAY}: 25 of 25 graph replay(s) align with the capture trace(s) {VLLM_CAPTURE}: attributed " \
           "with them" in pairing.notes
    replay = load_trace(VLLM_REPLAY, captures=pairing.captures[str(VLLM_REPLAY)])
    assert graph_replays(replay).attributed_kernels == 361


def test_a_capture_trace_that_aligns_with_nothing_is_not_said_to_attribute_anything():
    """The piecewise replay trace beside the other configuration's capture trace only: not paired, the note
    says its replays went unattributed, and the capture trace is checked whole, on its own."""
    pairing = pair_captures([VLLM_REPLAY, FULL_CAPTURE], LIMIT)
    assert pairing.captures == {} and pairing.outside_captures == set()
    assert pairing.checked == [VLLM_REPLAY, FULL_CAPTURE]
    assert not any("attributed with" in n for n in pairing.notes)
    assert f"{VLLM_REPLAY}: none of its 25 graph replay(s) aligns with the capture trace(s) {FULL_CAPTURE}: not " \
           "attributed (judged from the kernel order only)" in pairing.notes
    assert any(n.startswith(f"{FULL_CAPTURE}: a capture trace whose captures align with no graph") and
               n.endswith("checked on its own, whole") for n in pairing.notes)


def test_an_eager_trace_with_an_empty_capture_is_still_checked(tmp_path):
    """Issue 38 item 2: a regressed eager trace (KL001 fails on it) that also records one empty stream capture,
    beside a clean replay trace of the same process: it used to become that replay trace's capture trace, only
    its (empty) capture merged, the rest never checked (exit 0). Its capture aligns with no replay: it is
    checked on its own and fails."""
    replay = _graph("new-empty-replay")
    head = json.loads(gzip.open(replay).read())
    pid = next(e["pid"] for e in head["traceEvents"] if e.get("name") == "cudaGraphLaunch")
    data = json.loads(gzip.open(FIXTURES / "traces" / "gpu" / "placeholder_new_ones.pt.trace.json.gz").read())
    events = data["traceEvents"]
    host = {e["pid"] for e in events if e.get("cat") in ("cuda_runtime", "cuda_driver")}
    for e in events:
        if e.get("pid") in host:
            e["pid"] = pid
    last = max(e["ts"] for e in events if isinstance(e.get("ts"), (int, float)))
    tid = next(e["tid"] for e in events if e.get("cat") == "cuda_runtime")
    events += [{"ph": "X", "cat": "cuda_runtime", "name": name, "pid": pid, "tid": tid, "ts": last + 10 + i, "dur": 0.5,
                "args": {"correlation": 10**7 + i}}
               for i, name in enumerate(("cudaStreamBeginCapture", "cudaStreamEndCapture"))]
    data["baseTimeNanoseconds"] = head["baseTimeNanoseconds"] - 10**12   # recorded before the replay trace
    eager = tmp_path / "eager.pt.trace.json"
    eager.write_text(json.dumps(data))
    folder = _folder(tmp_path, replay, eager)
    proc = _cli("check", folder, "--select", "KL001", "--isolated")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "eager.pt.trace.json" in proc.stdout and "FillFunctor" in proc.stdout
    pairing = pair_captures(sorted(folder.iterdir()), LIMIT)
    assert pairing.captures == {} and len(pairing.checked) == 2


def test_a_capture_trace_loaded_outside_its_captures_keeps_the_rest():
    """What a paired capture trace is checked on: its events outside its stream captures (the capture calls
    themselves kept, so that a sync between two captures is still set-up, KL491); the captures' events are the
    ones merged into the replay trace."""
    whole = load_trace(_graph("new-ones-capture"))
    outside = load_trace(_graph("new-ones-capture"), outside_captures=True)
    windows = capture_windows(whole.columns)
    inside = sum(len(w.launches) for w in windows)
    assert len(windows) == 2 and inside == 136
    left = capture_windows(outside.columns)
    assert len(left) == 2 and all(len(w.launches) == 0 for w in left)
    kinds = Counter(outside.columns["kind"].tolist())
    assert kinds["kernel"] == Counter(whole.columns["kind"].tolist())["kernel"]   # the warm-ups' kernels all stay
    assert len(outside) < len(whole) / 10


# ---- issue 36: PyTorch's own graph evidence; CUDAGraph.replay()'s prologue fills ----

def _with_graph_evidence(tmp_path, annotations: bool, stacks: bool) -> Path:
    """The H200 replay trace (3 replays, no capture) with what PyTorch's graph evidence would give (the assumed
    format, kernlint.trace.graph_evidence): each replayed kernel gets a graph node id (one per captured launch,
    so replays of one graph share them); with `annotations`, the range active at capture in its args (here
    the linear module's name, `Fp8BlockLinearNewOnes_N`) and its lane moved to that annotation (else to
    `default_stream`); with `stacks`, a `*.kernel_py_stacks.json` beside it mapping node id -> the Python stack
    at capture (outermost first). What the evidence says is taken from the real capture trace."""
    table = load_trace(_graph("new-ones-replay"), captures=[_graph("new-ones-capture")])
    c = table.columns
    node_of: dict[int, int] = {}
    by_kernel, stack_of = {}, {}
    for r in np.flatnonzero(c["replay"] >= 0).tolist():
        launch = int(c["launcher"][r])
        node = node_of.setdefault(launch, 1000 + len(node_of))
        m = int(c["module"][launch])
        frames, f = [], int(c["frame"][launch])
        while f >= 0:
            frames.append(str(c["name"][f]))
            f = int(c["frame"][f])
        stack_of[node] = [x for x in reversed(frames) if not x.startswith("nn.Module")]
        by_kernel[(str(c["name"][r]), round(float(c["ts"][r]), 3))] = (
            node, str(c["name"][m]).removeprefix("nn.Module: ") if m >= 0 else None)
    data = json.loads(gzip.open(_graph("new-ones-replay")).read())
    for e in data["traceEvents"]:
        hit = by_kernel.get((e.get("name"), round(float(e.get("ts", 0)), 3))) if e.get("cat") == "kernel" else None
        if hit is None:
            continue
        e["args"]["graph node id"], label = hit
        if annotations and label:
            e["args"]["cuda_graph_annotation"] = label
        e["tid"] = label if annotations and label else "default_stream"
    folder = tmp_path / f"evidence-{int(annotations)}{int(stacks)}"
    folder.mkdir()
    path = folder / "replay.pt.trace.json"
    path.write_text(json.dumps(data))
    if stacks:
        (folder / "replay.kernel_py_stacks.json").write_text(json.dumps({str(n): s for n, s in stack_of.items()}))
    return path


def test_graph_annotations_attribute_replays_without_a_capture(tmp_path, kl001):
    """cuda_graph_annotations: every replayed kernel attributed through its node id to the range it was captured
    in, and KL001 judges each linear's range (today: kernel order only, nothing attributed)."""
    table = load_trace(_with_graph_evidence(tmp_path, annotations=True, stacks=False))
    stats = graph_replays(table)
    assert (stats.replays, stats.kernels, stats.attributed_kernels, stats.by_node_id) == (3, 204, 204, 3)
    assert stats.methods() == {"pytorch-evidence": 3}
    outcome = check_trace(table, kl001).outcomes[0]
    assert outcome.status == "failed" and len(outcome.findings) == 24
    assert {f.scope for f in outcome.findings} == {f"annotation Fp8BlockLinearNewOnes_{i}" for i in range(8)}
    assert not [f for f in outcome.findings if "kernel order" in f.message]


def test_per_node_stacks_give_replayed_kernels_their_source_lines(tmp_path, kl001):
    """dump_kernel_py_stacks: each replayed kernel takes its node's capture-time stack, so its frames and source
    line; KL001 then scopes the replays by their frames, as on an eager trace with stacks and no modules (the
    frame that launches the quantization and the GEMM), never by kernel order."""
    table = load_trace(_with_graph_evidence(tmp_path, annotations=False, stacks=True))
    assert graph_replays(table).methods() == {"pytorch-evidence": 3}
    f = table.frame
    fills = f[(f["replay"] >= 0) & f["name"].str.contains("FillFunctor")]
    assert len(fills) == 24 and set(fills["source"]) == {"regressed/fp8_linear_new_ones.py:17"}
    outcome = check_trace(table, kl001).outcomes[0]
    assert outcome.status == "passed" and "kernel order" not in (outcome.note or "")
    both = load_trace(_with_graph_evidence(tmp_path, annotations=True, stacks=True)).frame
    fills = both[(both["replay"] >= 0) & both["name"].str.contains("FillFunctor")]
    assert set(fills["source"]) == {"regressed/fp8_linear_new_ones.py:17"}
    assert {both["name"].iat[int(a)] for a in fills["annotation"]} == {f"Fp8BlockLinearNewOnes_{i}" for i in range(8)}


def test_unreadable_graph_evidence_leaves_the_kernel_order_path(tmp_path):
    """A stack file that is not the assumed format is no evidence (never an error): kernel order, as before."""
    path = _with_graph_evidence(tmp_path, annotations=False, stacks=True)
    (path.parent / "replay.kernel_py_stacks.json").write_text('{"not": "a stack map"}')
    stats = graph_replays(load_trace(path))
    assert (stats.attributed_kernels, stats.methods()) == (0, {"kernel-order": 3})


_LONG_FILL = ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<long>, std::array<char*, 1ul> "
              ">(int, at::native::FillFunctor<long>, std::array<char*, 1ul>)")


def _with_replay_prologue(tmp_path, stacks: bool) -> Path:
    """The clean eager FP8 linear (H200) with a graph replay inside its module before the quantization: as
    CUDAGraph.replay() runs it, two `fill_` of one int64 (the RNG seed and offset), then the graph launch (one
    kernel); then the next input's copy into a one-element int64 buffer. With `stacks`, under torch's replay
    frame; without, only the order says it."""
    data = json.loads(gzip.open(FIXTURES / "traces" / "gpu" / "placeholder_new_empty.pt.trace.json.gz").read())
    host, gpu, t = {"pid": 602, "tid": 602}, {"pid": 0, "tid": 7}, 5111274365700.0   # inside Fp8BlockLinear_0
    add = []
    if stacks:
        add += [{"ph": "X", "cat": "python_function", "name": "torch/cuda/graphs.py(137): replay", "ts": t, "dur": 28,
                 **host, "args": {"Python id": 9001, "Python parent id": 41}},
                {"ph": "X", "cat": "python_function", "name": "<built-in method replay of PyCapsule object at 0x7f00>",
                 "ts": t + 1, "dur": 26, **host, "args": {"Python id": 9002, "Python parent id": 9001}}]
    for i, at in enumerate((t + 2, t + 10)):
        ext, corr = 90001 + i, 90011 + i
        add += [{"ph": "X", "cat": "cpu_op", "name": "aten::fill_", "ts": at, "dur": 6, **host,
                 "args": {"External id": ext, "Input Dims": [[1], []], "Input type": ["long int", "Scalar"],
                          "Input Strides": [[1], []], "Concrete Inputs": ["", "0"]}},
                {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": at + 1, "dur": 3, **host,
                 "args": {"correlation": corr, "External id": ext}},
                {"ph": "X", "cat": "kernel", "name": _LONG_FILL, "ts": at + 30, "dur": 1, **gpu,
                 "args": {"correlation": corr, "device": 0, "stream": 7, "External id": ext}}]
    add += [{"ph": "X", "cat": "cuda_runtime", "name": "cudaGraphLaunch", "ts": t + 20, "dur": 3, **host,
             "args": {"correlation": 90030}},
            {"ph": "X", "cat": "kernel", "name": "void at::native::vectorized_elementwise_kernel<4, "
             "at::native::CUDAFunctor_add<c10::BFloat16>, std::array<char*, 3ul> >(int, "
             "at::native::CUDAFunctor_add<c10::BFloat16>, std::array<char*, 3ul>)", "ts": t + 50, "dur": 2, **gpu,
             "args": {"correlation": 90030, "device": 0, "stream": 7}},
            {"ph": "X", "cat": "cpu_op", "name": "aten::copy_", "ts": t + 29, "dur": 0.5, **host,
             "args": {"External id": 90040, "Input Dims": [[1], [1], []],
                      "Input type": ["long int", "long int", "Scalar"], "Input Strides": [[1], [1], []],
                      "Concrete Inputs": ["", "", "False"]}}]
    data["traceEvents"] += add
    path = tmp_path / f"prologue{'' if stacks else '-nostack'}.json"
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize("stacks", [True, False], ids=["stacks", "no-stacks"])
def test_replay_prologue_fills_are_context_not_findings(tmp_path, stacks):
    """CUDAGraph.replay()'s own seed and offset fills: KL001 (device work before the quantization in the
    module) and KL101 (the offset fill overwritten whole by the next copy) name them at info severity with
    the context `graph replay prologue`, never as errors or warnings. The graph's own kernel stays a KL001
    finding: it is the layer's work."""
    table = load_trace(_with_replay_prologue(tmp_path, stacks))
    rules = [r for r in load_rules() if r.id in ("KL001", "KL101")]
    outcomes = {o.rule: o for o in check_trace(table, rules).outcomes}
    fills = [f for f in outcomes["KL001"].findings if "FillFunctor<long>" in f.event]
    assert len(fills) == 2 and {(f.severity, f.context) for f in fills} == {("info", "graph replay prologue")}
    assert [f.severity for f in outcomes["KL001"].findings if f not in fills] == ["error"]
    dead = outcomes["KL101"].findings
    assert len(dead) == 1 and (dead[0].severity, dead[0].context) == ("info", "graph replay prologue")
    assert outcomes["KL101"].status == "passed"


def test_a_users_fill_before_a_replay_is_not_prologue_with_stacks(tmp_path):
    """With stacks, only fills under torch's replay frame are the prologue: the same fills outside it (the
    program's own, before it calls replay()) stay findings."""
    path = _with_replay_prologue(tmp_path, stacks=True)
    data = json.loads(path.read_text())
    for e in data["traceEvents"]:
        if e.get("name") == "torch/cuda/graphs.py(137): replay":
            e["ts"], e["dur"] = e["ts"] + 19, 9   # the replay frame now starts after the two fills
        elif e.get("name", "").startswith("<built-in method replay"):
            e["ts"], e["dur"] = e["ts"] + 19, 7
    path.write_text(json.dumps(data))
    table = load_trace(path)
    kl001 = [r for r in load_rules() if r.id == "KL001"]
    fills = [f for f in check_trace(table, kl001).outcomes[0].findings if "FillFunctor<long>" in f.event]
    assert len(fills) == 2 and {f.severity for f in fills} == {"error"} and not any(f.context for f in fills)


# ---- the alignment itself (kernlint.trace.graph_align) ----

def _tokens(launches: str, kernels: str):
    from kernlint.trace.graph_align import KernelTokens, LaunchTokens, Vocabulary

    vocab = Vocabulary()
    a = LaunchTokens.make(["kernel"] * len(launches), list(launches), [None] * len(launches), vocab)
    b = KernelTokens.make(["kernel"] * len(kernels), list(kernels), ["other"] * len(kernels), vocab)
    return a, b


def _lcs(a: str, b: str) -> int:
    table = [[0] * (len(b) + 1) for _ in range(len(a) + 1)]
    for i, x in enumerate(a):
        for j, y in enumerate(b):
            table[i + 1][j + 1] = table[i][j] + 1 if x == y else max(table[i][j + 1], table[i + 1][j])
    return table[-1][-1]


def test_the_alignment_is_a_longest_common_subsequence_in_order():
    import random

    from kernlint.trace.graph_align import align

    rng = random.Random(36)
    for _ in range(400):
        kernels = "".join(rng.choice("abc") for _ in range(rng.randint(1, 25)))
        launches = list(kernels)
        for _ in range(rng.randint(0, 4)):
            at = rng.randrange(len(launches) + 1)
            if rng.random() < 0.5 and launches:
                launches.pop(min(at, len(launches) - 1))
            else:
                launches.insert(at, rng.choice("abcd"))
        launches = "".join(launches)
        found = align(*_tokens(launches, kernels), max_edits=100)
        best = _lcs(launches, kernels)
        if found is None:
            assert not launches or 2 * best < len(kernels)
            continue
        pairs = [(i, j) for i, j in enumerate(found.launch.tolist()) if j >= 0]
        assert all(launches[j] == kernels[i] for i, j in pairs)
        if found.how != "reordered":
            assert [j for _, j in pairs] == sorted({j for _, j in pairs})
            assert found.matched == best


def test_the_alignment_bounds_its_edits_and_reorders_streams():
    from kernlint.trace.graph_align import align

    exact = align(*_tokens("abcabc", "abcabc"))
    assert (exact.how, exact.matched, exact.edits) == ("exact", 6, 0)
    reordered = align(*_tokens("abcabc", "acbabc"))
    assert (reordered.how, reordered.matched) == ("reordered", 6)
    aligned = align(*_tokens("abcabcX", "abcabc"))
    assert (aligned.how, aligned.matched, aligned.edits) == ("aligned", 6, 1)
    assert align(*_tokens("abc" * 20, "abc" * 20 + "xyzxyzxy")) is None    # 8 edits > 7 (a tenth of 68)
    assert align(*_tokens("abc" * 20, "abc" * 20 + "xyzxyzxy"), max_edits=8).matched == 60
    assert align(*_tokens("xyzxyz", "abcabc"), max_edits=100) is None              # nothing in common
