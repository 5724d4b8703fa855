"""Issue 24's precision causes that need a trace built from the shapes real traces showed (the ones recorded on
the H200 are rule cases in fixtures/cases): each test fails on the code before its fix."""
from __future__ import annotations

import gzip
import json
from pathlib import Path

from conftest import FIXTURES
from kernlint.rules.engine import check_traces
from kernlint.rules.loader import load_rules
from kernlint.trace.load import find_trace_files, load_trace
from rule_helpers import outcome, shipped
from test_cross_rank import _ranks as _tp_ranks  # the H200 TP ranks, decoded fresh each call


def _op(name, ts, dur, tid=1, **args):
    return {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": tid, "ts": ts, "dur": dur, "args": args}


def _scalar_read(ts, parent: str | None):
    """`aten::item` -> `_local_scalar_dense`, under `parent` (an op that took a 0-dim tensor) or alone."""
    events = [_op("aten::item", ts + 1, 3, **{"Input Dims": [[]], "Input type": ["float"]}),
              _op("aten::_local_scalar_dense", ts + 2, 1)]
    if parent:
        events.insert(0, _op(parent, ts, 6, **{"Input Dims": [[64, 256], []], "Input type": ["float", "float"]}))
    return events


def _step_trace(tmp_path, name: str, events: list, runtime: bool) -> Path:
    """A ProfilerStep holding `events`; with `runtime`, also a kernel launch (the trace records a device runtime)."""
    base = [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0, "dur": 100}]
    if runtime:
        base += [_op("aten::mm", 80, 5),
                 {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 81,
                  "dur": 2, "args": {"correlation": 1}},
                 {"ph": "X", "cat": "kernel", "name": "nvjet_sm90_tst_128x128_64x4_TN", "pid": 0, "tid": 7,
                  "ts": 90, "dur": 3, "args": {"correlation": 1}}]
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps({"traceEvents": base + events}))
    return path


def test_a_scalar_read_under_an_op_is_not_a_host_sync_without_a_runtime(tmp_path):
    """Cause 1: on a trace without a device runtime (MTIA host code, CPU activity only), an item under
    aten::mul reads its 0-dim CPU argument; an item of its own still counts (the CPU audit stands in for the
    GPU run there)."""
    kl401 = shipped("KL401")
    nested = outcome(_step_trace(tmp_path, "nested", _scalar_read(10, "aten::mul"), runtime=False), kl401)
    assert nested.status == "not-applicable" and "no host sync anywhere" in nested.reason, nested
    alone = outcome(_step_trace(tmp_path, "alone", _scalar_read(10, None), runtime=False), kl401)
    assert alone.status == "failed" and [f.event for f in alone.findings] == ["aten::item"]


def test_an_item_needs_a_sync_or_copy_under_it_where_a_runtime_is_recorded(tmp_path):
    """Cause 1, traces with a device runtime but no device events (CUPTI-less, a cut window): an item with no
    synchronize or copy under it read a CPU value; one with a device copy under it is a sync."""
    kl401 = shipped("KL401")
    bare = outcome(_step_trace(tmp_path, "bare", _scalar_read(10, None), runtime=True), kl401)
    assert bare.status == "not-applicable" and "no host sync anywhere" in bare.reason, bare
    copied = _scalar_read(10, None) + [{"ph": "X", "cat": "cuda_runtime", "name": "cudaMemcpyAsync", "pid": 1,
                                        "tid": 1, "ts": 12.2, "dur": 0.5, "args": {"correlation": 2}}]
    synced = outcome(_step_trace(tmp_path, "copied", copied, runtime=True), kl401)
    assert synced.status == "failed" and [f.event for f in synced.findings] == ["aten::item"]


def _group(tmp_path, ranks: dict[int, dict], rule_ids: tuple[str, ...]):
    folder = tmp_path / "run"
    folder.mkdir()
    for rank, data in ranks.items():
        (folder / f"rank-{rank}.json.gz").write_bytes(gzip.compress(json.dumps(data).encode()))
    rules = [r for r in load_rules() if r.id in rule_ids]
    reports = check_traces([load_trace(p) for p in find_trace_files([folder])], rules)
    (group,) = [r for r in reports if r.ranks]
    return {o.rule: o for o in group.outcomes}


def test_cross_rank_rules_apply_the_same_sync_test(tmp_path):
    """Cause 1 across ranks: rank 1 reads a CPU scalar (an item under aten::mul, nothing under it) where
    rank 0 does not. That is no sync (KL004) and no device work (KL003); a real item with its DtoH copy is."""
    ranks = _tp_ranks()
    data = ranks[1]
    mul = next(e for e in data["traceEvents"] if e.get("name") == "aten::mul")
    tid, ts = mul["tid"], mul["ts"]
    for e in _scalar_read(0, None):   # the item inside the existing aten::mul: its 0-dim argument read
        e.update(pid=mul["pid"], tid=tid, ts=ts + e["ts"] + 1)
        data["traceEvents"].append(e)
    outcomes = _group(tmp_path, ranks, ("KL003", "KL004"))
    assert outcomes["KL004"].status == "passed", [f.message for f in outcomes["KL004"].findings]
    assert outcomes["KL003"].status == "passed", [f.message for f in outcomes["KL003"].findings]

    ranks = _tp_ranks()
    data = ranks[1]
    mul = next(e for e in data["traceEvents"] if e.get("name") == "aten::mul")
    end = mul["ts"] + mul["dur"]
    for e in _scalar_read(0, None):   # a top-level item after the mul, with its device-to-host copy call
        e.update(pid=mul["pid"], tid=mul["tid"], ts=end + e["ts"] + 1)
        data["traceEvents"].append(e)
    data["traceEvents"].append({"ph": "X", "cat": "cuda_runtime", "name": "cudaStreamSynchronize", "pid": mul["pid"],
                                "tid": mul["tid"], "ts": end + 3.2, "dur": 0.5, "args": {}})
    (tmp_path / "second").mkdir()
    outcomes = _group(tmp_path / "second", ranks, ("KL004",))
    assert outcomes["KL004"].status == "failed"
    assert [f.event for f in outcomes["KL004"].findings] == ["aten::item"]



def _append_ops(data: dict, ops: list[tuple[str, float, float]]) -> None:
    """Ops after the rank's last op, on its thread: (name, offset from there, dur)."""
    last = max((e for e in data["traceEvents"] if e.get("cat") == "cpu_op"), key=lambda e: e["ts"] + e["dur"])
    t0 = last["ts"] + last["dur"] + 5
    for name, offset, dur in ops:
        data["traceEvents"].append({"ph": "X", "cat": "cpu_op", "name": name, "pid": last["pid"], "tid": last["tid"],
                                    "ts": t0 + offset, "dur": dur, "args": {}})


def test_ranks_that_nest_zero_duration_ops_differently_run_the_same_program(tmp_path):
    """Cause 2 (DLRM, 8 ranks, identical ops): zero-duration ops at one timestamp nest one way on a rank and
    the other way on another, so the outermost counts differ. The multisets agree: no divergence. An op
    really issued on one rank only is still one."""
    ranks = _tp_ranks()
    _append_ops(ranks[0], [("aten::add", 0, 0), ("aten::mul", 0, 0)])
    _append_ops(ranks[1], [("aten::add", 0, 0.001), ("aten::mul", 0, 0)])   # mul lands inside add here
    kl003 = _group(tmp_path, ranks, ("KL003",))["KL003"]
    assert kl003.status == "passed", [f.message for f in kl003.findings]
    assert "nested differently" in kl003.note

    ranks = _tp_ranks()
    _append_ops(ranks[0], [("aten::add", 0, 0), ("aten::mul", 0, 0)])
    _append_ops(ranks[1], [("aten::add", 0, 0)])
    (tmp_path / "second").mkdir()
    kl003 = _group(tmp_path / "second", ranks, ("KL003",))["KL003"]
    assert kl003.status == "failed" and "1 more aten::mul" in kl003.findings[0].message


def _frame(name, ts, dur, tid, pid_, parent=None):
    args = {"Python id": pid_}
    if parent is not None:
        args["Python parent id"] = parent
    return {"ph": "X", "cat": "python_function", "name": name, "pid": 1, "tid": tid, "ts": ts, "dur": dur,
            "args": args}


def test_autograd_thread_hooks_and_window_edges_are_not_frame_damage(tmp_path):
    """Cause 9: a Python hook on the autograd engine's thread names the main thread's backward() frame as its
    parent; a frame cut at the window's start no longer holds its child's start. Neither is damage (55
    verdicts were incomplete on 7 intact traces). A frame moved to another thread inside its parent's
    thread is still damage."""
    from kernlint.trace.damage import trace_damage

    def damage_of(events):
        path = tmp_path / f"t{len(list(tmp_path.iterdir()))}.json"
        path.write_text(json.dumps({"traceEvents": events}))
        return trace_damage(load_trace(path)).misplaced_frames

    main = [_frame("train.py(10): step", 0, 100, 1, 1), _frame("torch/_tensor.py(520): backward", 20, 60, 1, 2, 1)]
    hook = _frame("train.py(30): grad_hook", 40, 5, 2, 3, 2)   # on the autograd thread
    assert len(damage_of(main + [hook])) == 0
    cut = [_frame("run.py(1): <module>", 0.4, 99.6, 1, 1), _frame("run.py(5): main", 0, 100, 1, 2, 1)]
    assert len(damage_of(cut)) == 0
    # Held by a frame of its own thread, yet naming the main thread's frame: the tree disagrees.
    moved = main + [_frame("x.py(1): outer", 30, 40, 2, 7), _frame("x.py(2): inner", 40, 5, 2, 8, 2)]
    assert len(damage_of(moved)) == 1


def test_the_2021_schema_input_dims_are_read(tmp_path):
    """Cause 9: the 2021 kineto schema keeps shapes in `Input dims` (lower-case d), its `Input type` often
    empty: the trace has input shapes, and a rule that follows tensors by shape is not "no input shapes"."""
    from kernlint.rules.evidence import op_args

    ev = [{"ph": "X", "cat": "Operator", "name": "aten::repeat", "pid": 1, "tid": 1, "ts": 0, "dur": 5,
           "args": {"Input dims": [[64, 128], []], "Input type": ["", ""]}}]
    path = tmp_path / "old.json"
    path.write_text(json.dumps({"traceEvents": ev}))
    args = op_args(load_trace(path))
    assert len(args) == 1 and args[0].dims == [[64, 128], []]


def test_compiled_regions_recorded_with_stacks_are_not_damaged():
    """Cause 11: torch.compile'd blocks (default, and reduce-overhead's CUDA-graph trees) recorded on the H200
    with stacks: their Python frames are whole, so no verdict there is incomplete for frame damage."""
    from kernlint.trace.damage import trace_damage

    for name in ("compiled-decoder", "compiled-decoder-graphs"):
        table = load_trace(FIXTURES / "traces" / "gpu-precision" / f"{name}.pt.trace.json.gz")
        assert table.has_stacks and table.has_device_events, name
        assert trace_damage(table).summary() == [], name
