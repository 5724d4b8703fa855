"""Run identity: which traces are ranks of one run and one profiling cycle (kernlint.trace.runs), and
`kernlint run` writing every invocation into a run folder of its own."""
from __future__ import annotations

import functools
import gzip
import json
import shutil
from pathlib import Path

import pytest

from conftest import FIXTURES, REPO, load_program
from kernlint.capture import distributed as distributed_module
from kernlint.capture import runner as runner_module
from kernlint.capture.runner import capture, new_run_dir
from kernlint.checkout import import_path
from kernlint.trace.load import discover_traces, load_trace
from kernlint.trace.runs import RunIdentity, group_runs, ranks_text, run_identity

EXTERNAL = FIXTURES / "external"
HTA_2RANK = EXTERNAL / "hta__trace_filter_2rank"
CPU_RUNS = FIXTURES / "traces" / "cpu-runs"
GPU_TP2 = FIXTURES / "traces" / "gpu-tp2-nccl" / "fp8-tp-mlp"
V100 = EXTERNAL / "hta__ns_resolution_trace__rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"
A100 = EXTERNAL / "hta__critical_path__alexnet__benchmark_result_2869224_1695835535_trace.json.gz"
BASE_NS = 1_790_857_026_000_000_000


def _load_folder(*folders: Path):
    return [load_trace(p) for p in discover_traces(folders).files]


# ---- real traces --------------------------------------------------------------------------------------------

def test_the_two_real_hta_ranks_form_one_group_with_the_missing_ranks_noted():
    grouping = group_runs(_load_folder(HTA_2RANK))
    assert grouping.unmatched == []
    (group,) = grouping.groups
    assert group.ranks == [0, 1] and group.world_size == 128 and group.missing_ranks_count == 126
    assert [Path(t.path).name for t in group.tables] == ["trace_filter__sampled_rank-0.json.gz",
                                                        "trace_filter__sampled_rank-1.json.gz"]
    assert "126 of 128 ranks missing: cross-rank rules compare only ranks 0, 1" in group.notes
    assert group.evidence == "time"
    assert group.label == f"{HTA_2RANK} ProfilerStep#551-552 (ranks 0, 1 of 128)"
    # No baseTimeNanoseconds there: ts are epoch microseconds (2023-04-29).
    ident = group.identities[0]
    assert ident.time_basis == "epoch-us" and ident.start_ns == 1_682_725_897_226_747_000
    assert ident.steps == (551, 552) and ident.backend == "nccl" and ident.gpu_models == ()


@pytest.fixture(scope="module")
def two_unrelated_ranks(tmp_path_factory):
    """A V100 trace and an A100 trace from unrelated jobs, rewritten to claim ranks 0 and 1 of world size 2."""
    folder = tmp_path_factory.mktemp("unrelated")
    for src, rank in ((V100, 0), (A100, 1)):
        trace = json.loads(gzip.decompress(src.read_bytes()))
        trace["distributedInfo"] = {"backend": "nccl", "rank": rank, "world_size": 2}
        (folder / f"rank-{rank}.json.gz").write_bytes(gzip.compress(json.dumps(trace).encode(), compresslevel=1))
    return folder


def test_unrelated_real_traces_that_both_claim_world_size_2_are_not_grouped(two_unrelated_ranks):
    tables = _load_folder(two_unrelated_ranks)
    assert sorted(t.meta.rank for t in tables) == [0, 1]
    grouping = group_runs(tables)
    assert grouping.groups == []
    reasons = {Path(u.path).name: u.reason for u in grouping.unmatched}
    assert set(reasons) == {"rank-0.json.gz", "rank-1.json.gz"}
    assert reasons["rank-0.json.gz"].startswith("GPU model Tesla V100-SXM2-32GB differs from NVIDIA A100-PG509-200")
    assert reasons["rank-1.json.gz"].startswith("GPU model NVIDIA A100-PG509-200 differs from Tesla V100-SXM2-32GB")


def test_unrelated_traces_are_not_grouped_even_when_their_times_overlap(two_unrelated_ranks, tmp_path):
    # Shift the A100 trace onto the V100 trace's time: only the GPU model tells them apart now.
    v100, a100 = (load_trace(two_unrelated_ranks / f"rank-{r}.json.gz") for r in (0, 1))
    shift_us = (run_identity(v100).start_ns - run_identity(a100).start_ns) / 1000
    trace = json.loads(gzip.decompress((two_unrelated_ranks / "rank-1.json.gz").read_bytes()))
    for e in trace["traceEvents"]:
        if isinstance(e.get("ts"), (int, float)):
            e["ts"] += shift_us
    shifted = tmp_path / "rank-1.json"
    shifted.write_text(json.dumps(trace))
    a100 = load_trace(shifted)
    ia, iv = run_identity(a100), run_identity(v100)
    assert ia.start_ns < iv.end_ns and iv.start_ns < ia.end_ns
    grouping = group_runs([v100, a100])
    assert grouping.groups == [] and len(grouping.unmatched) == 2
    assert all(u.reason.startswith("GPU model") for u in grouping.unmatched)


def test_two_profiling_cycles_per_rank_in_one_folder_make_two_groups():
    folder = CPU_RUNS / "repeat2"
    grouping = group_runs(_load_folder(folder))
    assert grouping.unmatched == []
    assert [g.label for g in grouping.groups] == [f"{folder} run 1 cycle 1 ProfilerStep#1 (ranks 0, 1 of 2)",
                                                  f"{folder} run 1 cycle 2 ProfilerStep#3 (ranks 0, 1 of 2)"]
    for group, step in zip(grouping.groups, (1, 3)):
        assert group.ranks == [0, 1] and group.missing_ranks_count == 0 and group.notes == []
        assert {i.steps for i in group.identities} == {(step,)}
    # One process per rank, each in both cycles.
    assert {i.pids for i in grouping.groups[0].identities} == {i.pids for i in grouping.groups[1].identities}
    # Rank 1 called .item() in every step of both cycles; rank 0 never did.
    for group in grouping.groups:
        items = [int((t.frame["name"] == "aten::item").sum()) for t in group.tables]
        assert items == [0, 1]


def test_two_invocations_into_one_folder_make_two_groups():
    folder = CPU_RUNS / "two-invocations"
    grouping = group_runs(_load_folder(folder))
    assert grouping.unmatched == []
    assert [g.label for g in grouping.groups] == [f"{folder} run 1 ProfilerStep#1 (ranks 0, 1 of 2)",
                                                  f"{folder} run 2 ProfilerStep#1 (ranks 0, 1 of 2)"]
    first, second = ({p for i in g.identities for p in i.pids} for g in grouping.groups)
    assert len(first) == len(second) == 2 and not first & second
    assert grouping.groups[0].start_ns < grouping.groups[1].start_ns


def test_every_multi_rank_fixture_together():
    tables = _load_folder(CPU_RUNS, HTA_2RANK, FIXTURES / "traces" / "gpu-tp2-nccl", FIXTURES / "traces" / "cpu-gloo")
    grouping = group_runs(tables)
    assert grouping.unmatched == []
    assert len(grouping.groups) == 2 + 2 + 1 + 4 + 3
    assert all(g.ranks == [0, 1] for g in grouping.groups)
    grouped = [t.path for g in grouping.groups for t in g.tables]
    assert sorted(grouped) == sorted(t.path for t in tables)


def _recorder():
    module = import_path(REPO / "scripts" / "record_cpu_runs.py", "record_cpu_runs")
    return module


def test_a_fresh_recording_with_repeat_2_makes_two_groups(tmp_path):
    _recorder().launch(tmp_path, repeat=2)  # one torchrun launch, two gloo ranks, a few seconds
    grouping = group_runs(_load_folder(tmp_path))
    assert grouping.unmatched == [] and [g.ranks for g in grouping.groups] == [[0, 1], [0, 1]]
    assert [i.steps for g in grouping.groups for i in g.identities] == [(1,), (1,), (3,), (3,)]


def test_run_identity_of_a_torch_2_11_h200_rank():
    tables = _load_folder(GPU_TP2)
    r0, r1 = sorted((run_identity(t) for t in tables), key=lambda i: i.rank)
    assert (r0.rank, r1.rank) == (0, 1)
    for ident, pid in ((r0, 660), (r1, 661)):
        assert ident.world_size == 2 and ident.backend == "nccl" and ident.pg_count == 1
        assert ident.nccl_version == "2.28.9" and ident.default_pg_size == 2
        assert ident.gpu_models == ("NVIDIA H200",)
        assert ident.host == "vm" and ident.pids == (pid,)  # host from `vm_<pid>.<ms>.pt.trace.json.gz`
        assert ident.time_basis == "base+ts" and ident.steps == ()
        assert ident.trace_id and len(ident.trace_id) == 32
    assert r0.trace_id != r1.trace_id  # kineto's trace_id is per trace, not per run
    # Absolute time is baseTimeNanoseconds + ts: the trace ends just before `kernlint run` wrote the .run.json.
    for ident in (r0, r1):
        meta = json.loads(Path(ident.path.replace(".pt.trace.json.gz", ".run.json")).read_text())
        assert 0 < meta["created_unix"] - ident.end_ns / 1e9 < 1.0
    table = next(t for t in tables if t.meta.rank == 0)
    assert r0.start_ns == BASE_NS + round(table.frame["ts"].min() * 1000)
    assert run_identity(table) is r0  # cached on the table
    (group,) = group_runs(tables).groups
    assert group.ranks == [0, 1] and group.world_size == 2 and group.missing_ranks_count == 0
    assert group.label == f"{GPU_TP2} (ranks 0, 1 of 2)" and group.notes == []


def test_external_traces_time_bases():
    bases = {p.relative_to(EXTERNAL).parts[0].split("__")[1]: run_identity(load_trace(p)).time_basis
             for p in discover_traces([EXTERNAL]).files}
    assert bases == {
        "amd_trace": "base+ts", "cpu_only": "base+ts", "triton_example": "base+ts",
        "critical_path": "epoch-us", "cupti_profiler": "epoch-us", "ns_resolution_trace": "epoch-us",
        "with_gpu_user_annotation": "epoch-us", "resnet50_num_workers_0": "epoch-us",
        "trace_filter_2rank": "epoch-us", "large_integer_trace": None, "vllm_piecewise": "base+ts"}
    cpu_only = run_identity(load_trace(EXTERNAL / "hta__cpu_only__rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz"))
    # 2024-07-15 17:52:39 UTC; the file name says Jul 15 10:52:41 (Pacific time)
    assert 1_721_065_959 <= cpu_only.start_ns / 1e9 < 1_721_065_961


# ---- synthetic traces: one rule at a time ------------------------------------------------------------------

def _trace(folder: Path, name: str, rank: int | None, *, world: int | None = 2, backend: str | None = "nccl",
           gpus=("NVIDIA H100",), start_s: float | None = 100.0, dur_s: float = 1.0, base: int | None = BASE_NS,
           steps=(), pid: int = 1000, host: str | None = None, pg_count: int | None = None, trace_id=None) -> Path:
    """A small kineto-like trace: distributedInfo, deviceProperties, one op per step (or one op)."""
    dist = {k: v for k, v in (("backend", backend), ("rank", rank), ("world_size", world),
                              ("pg_count", pg_count)) if v is not None}
    top = {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": g} for g in gpus]}
    if rank is not None:
        top["distributedInfo"] = dist
    if base is not None:
        top["baseTimeNanoseconds"] = base
    if host:
        top["host_name"] = host
    if trace_id:
        top["trace_id"] = trace_id
    t0 = (start_s if start_s is not None else 5.0) * 1e6
    events = [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": pid, "tid": 1, "ts": t0, "dur": dur_s * 1e6}]
    for k, step in enumerate(steps):
        events.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{step}", "pid": pid, "tid": 1,
                       "ts": t0 + k, "dur": 1.0})
    top["traceEvents"] = events
    path = folder / name
    path.write_text(json.dumps(top))
    return path


def _group(*paths):
    return group_runs([load_trace(p) for p in paths])


def test_overlapping_windows_group_and_distant_ones_do_not(tmp_path):
    a = _trace(tmp_path, "a.json", 0, start_s=100, pid=1)
    b = _trace(tmp_path, "b.json", 1, start_s=100.5, pid=2)
    c = _trace(tmp_path, "c.json", 1, start_s=200, pid=3)
    grouping = _group(a, b, c)
    (group,) = grouping.groups
    assert [Path(t.path).name for t in group.tables] == ["a.json", "b.json"]
    (alone,) = grouping.unmatched
    assert alone.path == str(c) and alone.rank == 1
    assert alone.reason == ("no other rank of this run in the input: compatible traces of other ranks were "
                            "recorded at other times (nearest 99.0 s apart)")


def test_a_lone_rank_is_unmatched_with_a_reason(tmp_path):
    a = _trace(tmp_path, "a.json", 0)
    b = _trace(tmp_path, "b.json", 1, start_s=500, pid=2)
    grouping = _group(a, b)
    assert grouping.groups == []
    assert {u.reason for u in grouping.unmatched} == {
        "no other rank of this run in the input: compatible traces of other ranks were recorded at other times "
        "(nearest 399.0 s apart)"}
    (only,) = _group(a).unmatched
    assert only.reason == "no other rank of this run in the input"


def test_clock_skew_is_allowed_between_hosts_but_not_on_one_host(tmp_path):
    a = _trace(tmp_path, "a.json", 0, start_s=100, dur_s=2, host="node-a", pid=1)
    b = _trace(tmp_path, "b.json", 1, start_s=102.5, dur_s=2, host="node-b", pid=1)  # 0.5 s after a ends
    (group,) = _group(a, b).groups
    assert group.ranks == [0, 1]
    assert any("do not overlap" in n and "0.50 s" in n for n in group.notes)
    c = _trace(tmp_path, "c.json", 1, start_s=102.5, dur_s=2, host="node-a", pid=2)  # same host: one clock
    assert _group(a, c).groups == []
    d = _trace(tmp_path, "d.json", 1, start_s=104, dur_s=2, host="node-b", pid=1)  # 2 s apart: beyond the slack
    assert _group(a, d).groups == []


def test_two_traces_of_one_process_are_never_ranks_of_one_group(tmp_path):
    a = _trace(tmp_path, "a.json", 0, host="h", pid=7)
    b = _trace(tmp_path, "b.json", 1, host="h", pid=7)
    grouping = _group(a, b)
    assert grouping.groups == [] and len(grouping.unmatched) == 2


def test_a_rank_twice_at_the_same_time_is_not_separable(tmp_path):
    paths = [_trace(tmp_path, f"{job}{r}.json", r, pid=10 * i + r, host=f"host-{job}")
             for i, job in enumerate("xy") for r in (0, 1)]
    grouping = _group(*paths)
    assert grouping.groups == [] and len(grouping.unmatched) == 4
    for u in grouping.unmatched:
        assert u.reason.startswith(f"rank {u.rank} appears 2 times among compatible traces recorded at "
                                   f"overlapping times")


def test_a_copied_trace_is_named_as_such(tmp_path):
    a = _trace(tmp_path, "a.json", 0, pid=1, trace_id="AAAA")
    b = _trace(tmp_path, "b.json", 1, pid=2, trace_id="BBBB")
    copy = tmp_path / "a-copy.json"
    shutil.copy(a, copy)
    grouping = _group(a, b, copy)
    assert grouping.groups == []
    reasons = {Path(u.path).name: u.reason for u in grouping.unmatched}
    assert "is the same trace (equal trace_id)" in reasons["a.json"]


def test_without_absolute_time_equal_profiler_steps_decide(tmp_path):
    a = _trace(tmp_path, "a.json", 0, base=None, start_s=5, steps=(7, 8), pid=1)
    b = _trace(tmp_path, "b.json", 1, base=None, start_s=9, steps=(7, 8), pid=2)
    c = _trace(tmp_path, "c.json", 1, base=None, start_s=5, steps=(9, 10), pid=3)
    grouping = _group(a, b, c)
    (group,) = grouping.groups
    assert group.evidence == "steps" and [Path(t.path).name for t in group.tables] == ["a.json", "b.json"]
    assert group.label.endswith("ProfilerStep#7-8 (ranks 0, 1 of 2)")
    assert any("absolute time unknown" in n for n in group.notes)
    (alone,) = grouping.unmatched
    assert alone.path == str(c) and "ProfilerStep#9-10" in alone.reason
    d = _trace(tmp_path, "d.json", 1, base=None, steps=(7, 8), pid=4)  # a second rank 1 with the same steps
    grouping = _group(a, b, d)
    assert grouping.groups == [] and all("with the same ProfilerStep numbers" in u.reason
                                         for u in grouping.unmatched)


def test_without_time_or_steps_only_an_unambiguous_set_is_grouped(tmp_path):
    a = _trace(tmp_path, "a.json", 0, base=None, pid=1)
    b = _trace(tmp_path, "b.json", 1, base=None, pid=2)
    (group,) = _group(a, b).groups
    assert group.evidence == "none"
    assert any(n.startswith("membership inferred without time or step evidence") for n in group.notes)
    c = _trace(tmp_path, "c.json", 1, base=None, pid=3)
    grouping = _group(a, b, c)
    assert grouping.groups == []
    reasons = {Path(u.path).name: u.reason for u in grouping.unmatched}
    assert reasons["b.json"].startswith("rank 1 appears 2 times among traces without absolute time")
    assert "rank 1 twice" in reasons["a.json"]


def test_compatibility_fields(tmp_path):
    a = _trace(tmp_path, "a.json", 0, pid=1, pg_count=3)
    assert _group(a, _trace(tmp_path, "b.json", 1, pid=2, backend="gloo")).groups == []
    assert _group(a, _trace(tmp_path, "c.json", 1, pid=2, pg_count=4)).groups == []
    assert _group(a, _trace(tmp_path, "d.json", 1, pid=2, world=4)).groups == []
    assert _group(a, _trace(tmp_path, "e.json", 1, pid=2, gpus=())).groups == []
    assert _group(a, _trace(tmp_path, "f.json", 1, pid=2, world=None)).groups == []
    # missing on one side: fine for backend and process-group count
    (group,) = _group(a, _trace(tmp_path, "g.json", 1, pid=2, backend=None)).groups
    (group,) = _group(a, _trace(tmp_path, "h.json", 1, pid=2, pg_count=None)).groups
    reasons = [u.reason for u in _group(a, _trace(tmp_path, "i.json", 1, pid=2, backend="gloo")).unmatched]
    assert reasons[0] == f"backend nccl differs from gloo of {tmp_path / 'i.json'}"


def test_single_rank_and_unranked_traces_take_no_part(tmp_path):
    a = _trace(tmp_path, "a.json", 0, world=1, pid=1)
    b = _trace(tmp_path, "b.json", None, pid=2)
    grouping = _group(a, b)
    assert grouping.groups == [] and grouping.unmatched == []


def test_grouping_runs_from_identities_alone(tmp_path):
    a = _trace(tmp_path, "a.json", 0, pid=1)
    b = _trace(tmp_path, "b.json", 1, pid=2, start_s=100.2)
    idents = [run_identity(load_trace(p)) for p in (b, a)]
    assert all(isinstance(i, RunIdentity) for i in idents)
    (group,) = group_runs(idents).groups
    assert group.tables == [idents[1], idents[0]] and group.ranks == [0, 1]


def test_grouping_runs_from_per_trace_summaries_as_from_tables():
    """What a --jobs worker leaves of each trace (kernlint.rules.summary.TraceSummary: its `identity`) groups
    exactly as the tables do: several runs, cycles and ranks of one folder."""
    import pickle

    from kernlint.rules.engine import summarize_trace

    tables = _load_folder(CPU_RUNS, GPU_TP2)
    summaries = [pickle.loads(pickle.dumps(summarize_trace(t, []).summary)) for t in tables]
    by_tables, by_summaries = group_runs(tables), group_runs(summaries)
    assert by_summaries.unmatched == by_tables.unmatched
    assert len(by_summaries.groups) == len(by_tables.groups) >= 4
    for a, b in zip(by_tables.groups, by_summaries.groups):
        assert (a.label, a.ranks, a.notes, a.identities) == (b.label, b.ranks, b.notes, b.identities)
        assert [t.path for t in a.tables] == [s.path for s in b.tables]


def test_ranks_text():
    assert ranks_text([0, 1]) == "0, 1"
    assert ranks_text([5, 0, 1, 2, 3, 7, 8]) == "0-3, 5, 7, 8"


# ---- `kernlint run`: one folder per invocation -------------------------------------------------------------

def test_capture_twice_into_one_out_dir_writes_two_run_folders(tmp_path):
    step = load_program("placeholder_new_empty").build("cpu")
    first = capture(step, tmp_path, "client", device="cpu")
    second = capture(step, tmp_path, "client", device="cpu")
    assert first.run_dir != second.run_dir
    assert first.run_dir.parent == second.run_dir.parent == tmp_path / "client"
    for result in (first, second):
        assert result.trace.parent == result.metadata.parent == result.run_dir
        assert sorted(p.name for p in result.run_dir.iterdir()) == sorted([result.trace.name, result.metadata.name])
    assert sorted(p.name for p in (tmp_path / "client").iterdir()) == sorted([first.run_dir.name,
                                                                              second.run_dir.name])


def test_a_new_run_folder_is_never_shared(tmp_path, monkeypatch):
    """Names are microsecond stamps, increasing within a process; another process that comes up with the
    same name (same microsecond, same suffix) loses the mkdir and draws again."""
    suffixes = iter(["aaaaaa", "aaaaaa", "bbbbbb"])
    monkeypatch.setattr(runner_module.secrets, "token_hex", lambda n: next(suffixes))
    monkeypatch.setattr(runner_module.time, "time_ns", lambda: 250_000_000)
    monkeypatch.setattr(runner_module, "_last_stamp_us", 0)
    first = new_run_dir(tmp_path, "w")
    monkeypatch.setattr(runner_module, "_last_stamp_us", 0)   # as if another process, same microsecond
    second = new_run_dir(tmp_path, "w")
    assert first.name == "19700101T000000.250000Z-aaaaaa" and second.name == "19700101T000000.250001Z-bbbbbb"
    assert sorted(p.name for p in (tmp_path / "w").iterdir()) == [first.name, second.name]


class _FakeRank:
    """Stands in for one rank process (subprocess.Popen): does its work at once and has exited with `code`."""

    def __init__(self, cmd, *, env, stdout, work, **_kwargs):
        self.returncode = work(cmd, int(env["RANK"]), stdout)

    def poll(self):
        return self.returncode

    def wait(self, timeout=None):
        return self.returncode

    def terminate(self):
        pass

    kill = terminate


def test_each_distributed_launch_gets_a_run_folder_of_its_own(tmp_path, monkeypatch):
    """launch() makes the folder and hands it to every rank (--kl-run-dir); the ranks (faked here by copying
    a recorded two-rank run, one trace a rank) write into it."""
    recorded = sorted((CPU_RUNS / "two-invocations").glob("*.pt.trace.json.gz"))
    pairs = iter([recorded[:2], recorded[2:]])
    seen = []

    def work(cmd, rank, _log):
        run_dir = Path(cmd[cmd.index("--kl-run-dir") + 1])
        if rank == 0:
            seen.append((run_dir, next(pairs)))
            assert run_dir.is_dir() and not any(run_dir.iterdir())
        src = seen[-1][1][rank]
        shutil.copy(src, run_dir / src.name)
        return 0

    monkeypatch.setattr(distributed_module.subprocess, "Popen", functools.partial(_FakeRank, work=work))
    first = distributed_module.launch("fp8-tp-mlp", 2, "cpu", tmp_path, "fp8-tp-mlp")
    second = distributed_module.launch("fp8-tp-mlp", 2, "cpu", tmp_path, "fp8-tp-mlp")
    dirs = [d for d, _ in seen]
    assert len(first) == len(second) == 2 and dirs[0] != dirs[1]
    assert {p.parent for p in first} == {dirs[0]} and {p.parent for p in second} == {dirs[1]}
    grouping = group_runs(_load_folder(tmp_path / "fp8-tp-mlp"))
    assert grouping.unmatched == []
    assert [g.label for g in grouping.groups] == [f"{dirs[0]} ProfilerStep#1 (ranks 0, 1 of 2)",
                                                  f"{dirs[1]} ProfilerStep#1 (ranks 0, 1 of 2)"]


def test_a_failed_launch_leaves_no_empty_run_folder(tmp_path, monkeypatch):
    def work(_cmd, rank, log):
        if rank == 1:
            log.write(b"kernlint-rank-error: rank 1: boom\n")
            return 1
        return 0

    monkeypatch.setattr(distributed_module.subprocess, "Popen", functools.partial(_FakeRank, work=work))
    with pytest.raises(Exception, match="boom"):
        distributed_module.launch("fp8-tp-mlp", 2, "cpu", tmp_path, "fp8-tp-mlp")
    assert list((tmp_path / "fp8-tp-mlp").iterdir()) == []
