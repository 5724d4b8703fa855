"""torch.compile and activation checkpointing as production records them (issue 36).

torch's Python tracer records some frames apart from the time nesting, and the traces are intact: hooks on
the autograd engine's thread (checkpoint recomputes) name the first step's backward() frame on the main
thread; under Python 3.12 a C function that calls back into Python (a custom op's kernel) is left open to the
recording's close. Those frames nest where they can, are left out of the frame tree where they cannot, and are
said in a note; real frame damage stays damage (tests/test_load_robustness.py). And what torch's compiler and
graph-capture machinery issues itself (cudagraph trees, torch.cuda.graph, Dynamo) is set-up for every rule.

Fixtures: fixtures/traces/cpu-compile (the CPU recording, and the same trace as Python 3.12's hooks record
it) and fixtures/traces/gpu-compile (the H200), made by fixtures/gpu_programs/compile_frames.py.
"""
from __future__ import annotations

import copy
import gzip
import json

import numpy as np
import pytest

import kernlint
from conftest import FIXTURES
from kernlint.trace.damage import trace_damage
from kernlint.trace.load import load_trace
from kernlint.trace.scopes import ScopeIndex

CPU = FIXTURES / "traces" / "cpu-compile"
GPU = FIXTURES / "traces" / "gpu-compile"
RECORDED = CPU / "compiled-custom-op-checkpoint.pt.trace.json.gz"
CALLS_OPEN = CPU / "compiled-custom-op-checkpoint-py312-calls.pt.trace.json.gz"
FP8_DECODER = GPU / "compiled-fp8-decoder.pt.trace.json.gz"
CHECKPOINT = GPU / "checkpoint-train.pt.trace.json.gz"
GRAPHS = GPU / "compiled-graphs-cast-in-out.pt.trace.json.gz"
CAPTURE_WARM_UP = GPU / "compiled-graphs-capture-model-warm-up.pt.trace.json.gz"
NESTING = ["op", "parent_op", "top_op", "annotation", "module", "user_frame", "source"]


def _data(path) -> dict:
    return json.loads(gzip.decompress(path.read_bytes()))


def _write(tmp_path, data, name="t.json"):
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return path


def _statuses(report) -> dict[str, str]:
    return {o.rule: o.status for r in report.reports for o in r.outcomes}


# -- the frame tree ------------------------------------------------------------------------------------------

def test_calls_left_open_are_left_out_of_the_frame_tree():
    """The 12 custom-op calls Python 3.12 leaves open to the recording's close are no damage: they hold
    nothing, and every event nests as it does in the recording whose hooks saw their returns."""
    recorded, opened = load_trace(RECORDED), load_trace(CALLS_OPEN)
    assert trace_damage(recorded).summary() == [] and recorded.derived.frame_tree.notes() == []
    assert trace_damage(opened).summary() == []
    tree = opened.derived.frame_tree
    assert len(tree.unnested) == 12 and len(tree.across_threads) == 0
    name = opened.columns["name"]
    assert all(str(name[r]).startswith("<built-in method") and "pybind11" in str(name[r]) for r in tree.unnested)
    assert tree.notes() == ["12 Python frame(s) recorded ending after the frame their parent id names (calls "
                            "whose return the profiler did not see, under compiled regions and custom ops): left "
                            "out of the frame tree"]
    a, b = recorded.columns, opened.columns
    for column in NESTING:
        assert list(a[column]) == list(b[column]), column
    # The Python kernel a call ran nests in the frame around the call (the call holds nothing); every other
    # event in the frame it did.
    expected = np.array(a["frame"])
    left_out = np.isin(expected, tree.unnested)
    expected[left_out] = np.array(a["frame"])[expected[left_out]]
    assert np.array_equal(expected, b["frame"])
    assert left_out.sum() >= 12


def test_calls_left_open_are_no_scope_instance():
    """A rule naming such a frame as its scope would get the rest of the recording: the calls left open are
    no instance; the same calls, closed, are."""
    pattern = [r"^<built-in method  of pybind11"]
    recorded_table, opened_table = load_trace(RECORDED), load_trace(CALLS_OPEN)
    recorded = ScopeIndex.of(recorded_table).named_scopes(frames=pattern)
    opened = ScopeIndex.of(opened_table).named_scopes(frames=pattern)
    assert recorded and not {s.row for s in opened} & set(opened_table.derived.frame_tree.unnested.tolist())
    assert len(opened) < len(recorded)


def test_calls_left_open_leave_the_verdicts_as_they_were():
    recorded, opened = kernlint.check(str(RECORDED)), kernlint.check(str(CALLS_OPEN))
    assert opened.exit_code == recorded.exit_code == 0
    assert _statuses(opened) == _statuses(recorded)
    assert "incomplete" not in _statuses(opened).values()
    (report,) = opened.reports
    assert any("left out of the frame tree" in n for n in report.notes)


def test_compiled_fp8_decoder_on_the_h200_is_decided():
    """kernlint's reference FP8 decoder under torch.compile (custom ops with Python kernels), Python 3.12: 36
    calls left open. Before: every verdict incomplete, exit 4."""
    table = load_trace(FP8_DECODER)
    assert trace_damage(table).summary() == []
    assert len(table.derived.frame_tree.unnested) == 36
    result = kernlint.check(str(FP8_DECODER))
    assert result.exit_code == 0
    assert result.rule_status("KL001") == "passed"
    assert "incomplete" not in _statuses(result).values()


def test_checkpoint_recomputes_on_the_autograd_thread_nest_there():
    """Eager training with torch.utils.checkpoint on the H200: the recomputes' unpack_hook frames on the
    autograd engine's thread name the first step's run_backward frame, step after step."""
    table = load_trace(CHECKPOINT)
    assert trace_damage(table).summary() == []
    tree = table.derived.frame_tree
    assert len(tree.across_threads) == 40 and len(tree.unnested) == 0
    f = table.columns
    assert {str(f["name"][r]) for r in tree.across_threads} == {"torch/utils/checkpoint.py(1154): unpack_hook"}
    assert (f["frame"][tree.across_threads] < 0).all()   # top-level on their own thread
    # What the recompute ran nests under its hook, on the autograd thread.
    hooks = set(tree.across_threads.tolist())
    ops = np.flatnonzero(np.isin(f["user_frame"], list(hooks)) | np.isin(f["frame"], list(hooks)))
    assert len(ops) and all(f["thread"][r] == f["thread"][tree.across_threads[0]] for r in ops.tolist())
    result = kernlint.check(str(CHECKPOINT))
    assert result.exit_code == 0 and "incomplete" not in _statuses(result).values()


def test_a_frame_that_starts_before_its_parent_stays_damage(tmp_path):
    """A call left open starts inside its parent; moved to start before it, the frame is misplaced."""
    data = _data(CALLS_OPEN)
    frames = {e["args"]["Python id"]: e for e in data["traceEvents"] if e.get("cat") == "python_function"}
    opened = next(e for e in frames.values() if "pybind11" in e["name"] and e["dur"] > 1000)
    parent = frames[opened["args"]["Python parent id"]]
    opened["ts"] = parent["ts"] - 50
    damage = trace_damage(load_trace(_write(tmp_path, data)))
    assert len(damage.misplaced_frames) >= 1


def test_a_frame_on_another_thread_that_its_parent_did_not_start_stays_damage(tmp_path):
    """A hook on the autograd thread names a frame that started before it; one that names a later frame, or a
    frame of another process, is damage."""
    data = _data(CHECKPOINT)
    frames = {e["args"]["Python id"]: e for e in data["traceEvents"] if e.get("cat") == "python_function"}
    hooks = [e for e in frames.values() if e["name"].endswith("unpack_hook")
             and frames[e["args"]["Python parent id"]]["tid"] != e["tid"]]
    later = copy.deepcopy(data)
    moved = next(e for e in later["traceEvents"] if e.get("cat") == "python_function"
                 and e["args"].get("Python id") == hooks[0]["args"]["Python id"])
    moved["ts"] = frames[hooks[0]["args"]["Python parent id"]]["ts"] - 1000   # before its parent began
    assert len(trace_damage(load_trace(_write(tmp_path, later, "later.json"))).misplaced_frames) >= 1
    other = copy.deepcopy(data)
    for e in other["traceEvents"]:   # the whole autograd thread moved to another process
        if e.get("tid") == hooks[0]["tid"] and e.get("cat") == "python_function":
            e["pid"] = 4242
    assert len(trace_damage(load_trace(_write(tmp_path, other, "other.json"))).misplaced_frames) >= 1


# -- compiler and graph-capture machinery --------------------------------------------------------------------

def _rows(index, name: str, kind: str) -> list[int]:
    return [r for r in index.rows_of((kind,)).tolist() if str(index.name[r]) == name]


def test_cudagraph_tree_recording_syncs_are_set_up_and_the_model_is_not():
    """reduce-overhead, the graph recorded in the window's first step: cudagraph trees' synchronizes and
    torch.cuda.graph's on entry are machinery; the model's launches while it is recorded, the graph's
    replays and the program's own ops are not."""
    table = load_trace(GRAPHS)
    index = ScopeIndex.of(table)
    syncs = _rows(index, "cudaDeviceSynchronize", "runtime")
    assert len(syncs) == 6 and all(index.in_machinery(r) for r in syncs)   # 5 of the compiler, 1 profiler's
    assert sum(index.in_profiler(r) for r in syncs) == 1
    launches = [r for r in index.rows_of(("runtime",)).tolist() if str(index.name[r]) == "cuLaunchKernel"]
    assert launches and not any(index.in_machinery(r) for r in launches)
    replays = _rows(index, "cudaGraphLaunch", "runtime")
    assert len(replays) == 3 and not any(index.in_machinery(r) for r in replays)
    kernels = index.rows_of(("kernel",)).tolist()
    assert not any(index.in_machinery(r) for r in kernels if index.replay[r] >= 0)
    copies = _rows(index, "aten::_foreach_copy_", "op")
    assert copies and all(index.in_machinery(r) for r in copies)   # the replay's input copy: cudagraph trees'
    casts = _rows(index, "aten::to", "op")
    assert casts and not any(index.in_machinery(r) for r in casts)   # the program's own


def _machinery_trace(tmp_path, inner: list[dict]) -> ScopeIndex:
    """A make_graphed_callables-like trace: a user frame calls torch/cuda/graphs.py, which synchronizes
    itself and calls `inner` (frames and ops between ts 30 and 60)."""
    def frame(name, ts, dur, pid_, parent=None, **extra):
        args = {"Python id": pid_, **({"Python parent id": parent} if parent is not None else {})}
        return {"ph": "X", "cat": "python_function", "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur,
                "args": args, **extra}

    events = [
        frame("train.py(10): capture_graph", 0, 100, 1),
        frame("torch/cuda/graphs.py(400): make_graphed_callables", 1, 98, 2, 1),
        frame("torch/cuda/__init__.py(1152): synchronize", 5, 10, 3, 2),
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaDeviceSynchronize", "pid": 1, "tid": 1, "ts": 6,
         "dur": 8, "args": {"correlation": 1}},
        *inner,
    ]
    return ScopeIndex.of(load_trace(_write(tmp_path, {"traceEvents": events})))


def test_a_user_sync_under_graph_capture_machinery_is_the_programs(tmp_path):
    """torch.cuda.make_graphed_callables' own synchronize is set-up; the user's callable that it runs
    (a frame of the program's code between the machinery and the sync) is the program's."""
    inner = [
        {"ph": "X", "cat": "python_function", "name": "model.py(20): forward", "pid": 1, "tid": 1, "ts": 30,
         "dur": 30, "args": {"Python id": 4, "Python parent id": 2}},
        {"ph": "X", "cat": "cpu_op", "name": "aten::item", "pid": 1, "tid": 1, "ts": 35, "dur": 10},
    ]
    index = _machinery_trace(tmp_path, inner)
    (sync,) = _rows(index, "cudaDeviceSynchronize", "runtime")
    (item,) = _rows(index, "aten::item", "op")
    assert index.in_machinery(sync) and not index.in_machinery(item)


def test_a_module_opened_inside_machinery_is_the_programs(tmp_path):
    """An nn.Module opened inside a machinery frame (the model's forward under Dynamo's frame evaluation)
    holds the program's work, whatever library frames lie between."""
    inner = [
        {"ph": "X", "cat": "python_function", "name": "nn.Module: Net_0", "pid": 1, "tid": 1, "ts": 30,
         "dur": 30, "args": {"Python id": 4, "Python parent id": 2}},
        {"ph": "X", "cat": "python_function", "name": "torch/nn/functional.py(1): relu", "pid": 1, "tid": 1,
         "ts": 32, "dur": 20, "args": {"Python id": 5, "Python parent id": 4}},
        {"ph": "X", "cat": "cpu_op", "name": "aten::item", "pid": 1, "tid": 1, "ts": 35, "dur": 10},
    ]
    index = _machinery_trace(tmp_path, inner)
    (item,) = _rows(index, "aten::item", "op")
    assert not index.in_machinery(item)


@pytest.mark.parametrize("trace", [GRAPHS, CAPTURE_WARM_UP], ids=lambda p: p.name)
def test_compiler_syncs_are_no_finding_of_any_rule(trace):
    """KL401 and KL491 found the cudagraph trees' synchronizes before (KL401 at error in the warm-up
    trace, KL491 in its capture_model() frame); and KL302 the input cast into the graph, whose next use is
    the replay's input copy inside `Torch-Compiled Region` (an op that records no arguments)."""
    result = kernlint.check(str(trace))
    assert result.findings == [] and result.exit_code == 0
    assert result.rule_status("KL401") == "not-applicable"
    if trace == GRAPHS:
        assert result.rule_status("KL302") == "passed"
    else:
        assert result.rule_status("KL491") == "not-applicable"
