"""Finding fingerprints (kernlint.rules.fingerprint): the same finding in two recordings of the same code has
one fingerprint, whatever the process, thread, step number, profiling cycle, rank, graph replay, heap address
or folder of the recording, so that a suppressions file written from one recording silences the other and
GitHub code scanning keeps its alerts (SARIF partialFingerprints).

Recordings: fixtures/traces/cpu-runs/repeat2 (two cycles of a scheduled profiler: KL401 in ProfilerStep#1 and
ProfilerStep#3), and a small program recorded here twice, in two processes started from two folders (its
cycles, and a trace with no step whose scope names its thread)."""
from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kernlint
from conftest import FIXTURES, kernlint_in
from kernlint.rules.result import Finding

REPEAT2 = FIXTURES / "traces" / "cpu-runs" / "repeat2"
# rank 0 and rank 1 of each cycle (file names: host_pid.time)
CYCLE_1 = [REPEAT2 / "vm_6923.1796004622048708508.pt.trace.json.gz",
           REPEAT2 / "vm_6924.1796004622045774631.pt.trace.json.gz"]
CYCLE_2 = [REPEAT2 / "vm_6923.1796004622061419732.pt.trace.json.gz",
           REPEAT2 / "vm_6924.1796004622061427303.pt.trace.json.gz"]

# A step with a host sync (`.item()`, KL401), profiled with a schedule of two cycles (ProfilerStep#1 and #3),
# then once with no step at all (the rule checks the profiled window, whose scope names the thread).
PROGRAM = '''
import sys
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile, schedule

OUT = Path(sys.argv[1])
X = torch.randn(32, 32)


def work(x):
    y = torch.relu(x @ x)
    return y.sum().item()


cycles = iter(range(1, 10))
with profile(activities=[ProfilerActivity.CPU], schedule=schedule(wait=0, warmup=1, active=1, repeat=2),
             with_stack=True, record_shapes=True,
             on_trace_ready=lambda p: p.export_chrome_trace(str(OUT / f"cycle{next(cycles)}.pt.trace.json"))) as prof:
    for _ in range(4):
        work(X)
        prof.step()
with profile(activities=[ProfilerActivity.CPU], with_stack=True, record_shapes=True) as prof:
    work(X)
prof.export_chrome_trace(str(OUT / "window.pt.trace.json"))
'''


def _finding(**changes) -> Finding:
    base = Finding(rule="KL401", name="host-sync-in-hot-scope", severity="error", message="m", trace="a.json",
                   scope="annotation ProfilerStep#1", event="aten::item", event_kind="op", event_category="sync_op",
                   launch_op="aten::item", top_op="aten::item", source="/home/alice/repo/pkg/model.py:12",
                   anchor=None, ts=1.0, rank=0)
    return dataclasses.replace(base, **changes)


def _same(**changes_a_and_b) -> bool:
    a = {k: v[0] for k, v in changes_a_and_b.items()}
    b = {k: v[1] for k, v in changes_a_and_b.items()}
    return _finding(**a).fingerprint == _finding(**b).fingerprint


# -- the normalizer --------------------------------------------------------------------------------------


def test_step_numbers_and_profiler_spans_are_not_in_the_fingerprint():
    assert _same(scope=("annotation ProfilerStep#1", "annotation ProfilerStep#553"))
    assert _same(scope=("annotation ProfilerStep#12 (backward, autograd thread)",
                        "annotation ProfilerStep#3 (backward, autograd thread)"))
    assert _same(event=("PyTorch Profiler (0)", "PyTorch Profiler (2)"))
    assert "ProfilerStep#1|" not in _finding().fingerprint
    # A range that merely ends in a number is the code's own name.
    assert not _same(scope=("annotation layer_1", "annotation layer_2"))


def test_process_and_thread_ids_are_not_in_the_fingerprint():
    window = "the profiled window (no hot scope in the trace, thread {})"
    assert _same(scope=(window.format("2543932:2543932"), window.format("17:18")))
    assert _same(scope=(window.format("capture:12:34"), window.format("capture:56:78")))
    assert "2543932" not in _finding(scope=window.format("2543932:2543932")).fingerprint


def test_ranks_replays_times_and_trace_paths_are_not_in_the_fingerprint():
    assert _same(scope=("ranks 0, 1", "ranks 2, 3, 4"), rank=(0, 3))
    assert _same(scope=("graph replay 3 of capture_16_FULL", "graph replay 41 of capture_16_FULL"))
    assert _same(trace=("/tmp/run1/rank0.json", "/data/run7/rank5.json.gz"), ts=(1.0, 99.5),
                 message=("at ProfilerStep#1", "at ProfilerStep#9"))
    # The captured graph is the code: another capture is another fingerprint.
    assert not _same(scope=("graph replay 3 of capture_16_FULL", "graph replay 3 of capture_32_FULL"))


def test_addresses_go_but_template_arguments_and_instances_stay():
    builtin = "<built-in method item of Tensor object at {}>"
    assert _same(event=(builtin.format("0x7f3b2c1d0e90"), builtin.format("0x7f00aa55bb10")))
    assert "0x7f3b" not in _finding(event=builtin.format("0x7f3b2c1d0e90")).fingerprint
    assert not _same(event=("kernel<0x10>", "kernel<0x20>"))                 # a short constant stays
    assert not _same(event=("vectorized_elementwise_kernel<4, FillFunctor<float>>",
                            "vectorized_elementwise_kernel<8, FillFunctor<float>>"))
    assert not _same(scope=("module Linear_0", "module Linear_1"))
    assert not _same(scope=("module model.layers.3.mlp", "module model.layers.4.mlp"))
    assert not _same(event=("aten::clone float32 [8, 4, 64]", "aten::clone float32 [8, 4, 128]"))


def test_the_source_is_its_file_and_line_wherever_it_was_recorded():
    assert _same(source=("/home/alice/repo/pkg/model.py:12", "/home/runner/work/repo/repo/pkg/model.py:12"))
    assert _same(source=("pkg/model.py:12", "/usr/lib/python3/site-packages/pkg/model.py:12"))
    assert _same(source=("model.py:12", "C:\\work\\repo\\pkg\\model.py:12"))
    assert _same(scope=("frame /tmp/a/prog.py(10): step", "frame prog.py(10): step"))
    assert not _same(source=("pkg/model.py:12", "pkg/model.py:13"))          # another statement
    assert not _same(source=("pkg/model.py:12", "pkg/other.py:12"))
    assert not _same(source=("pkg/model.py:12", None))
    assert _finding().fingerprint.endswith("|model.py:12")


def test_the_normalizer_keeps_the_scheme_1_fingerprint_for_old_suppressions_files():
    from kernlint.rules.fingerprint import FINGERPRINT_SCHEME, fingerprint_of, legacy_fingerprint

    f = _finding()
    assert FINGERPRINT_SCHEME == 2 and fingerprint_of(f) == f.fingerprint
    assert legacy_fingerprint(f) == fingerprint_of(f, 1) == "KL401|annotation ProfilerStep#1|aten::item|aten::item|"


_ids = st.integers(min_value=0, max_value=2**31)
_hex = st.integers(min_value=0x100000, max_value=2**48).map(hex)
_folder = st.lists(st.from_regex(r"[A-Za-z0-9_.-]{1,8}", fullmatch=True).filter(lambda s: s not in (".", "..")),
                   max_size=4).map(lambda parts: "/".join(["", *parts]))


@settings(max_examples=60, deadline=None)
@given(pid=_ids, tid=_ids, step=_ids, ranks=st.lists(st.integers(0, 4096), min_size=1, max_size=4), replay=_ids,
       address=_hex, folder=_folder, rank=st.one_of(st.none(), st.integers(0, 4096)))
def test_property_what_a_recording_numbers_never_changes_the_fingerprint(pid, tid, step, ranks, replay, address,
                                                                         folder, rank):
    def recorded(pid, tid, step, ranks, replay, address, folder, rank) -> list[Finding]:
        return [
            _finding(scope=f"annotation ProfilerStep#{step}", source=f"{folder}/pkg/model.py:12", rank=rank),
            _finding(scope=f"the profiled window (no hot scope in the trace, thread {pid}:{tid})",
                     event=f"<built-in method item of Tensor object at {address}>"),
            _finding(scope="ranks " + ", ".join(map(str, ranks)), rank=rank),
            _finding(scope=f"graph replay {replay} of capture_16_FULL", anchor="scale_1x128_kernel"),
            _finding(scope=f"frame {folder}/pkg/model.py(10): forward", source=f"{folder}/pkg/model.py:12"),
        ]

    canonical = recorded(1, 1, 1, [0, 1], 1, "0x7f0000000000", "", 0)
    assert [f.fingerprint for f in recorded(pid, tid, step, ranks, replay, address, folder, rank)] == \
        [f.fingerprint for f in canonical]


# -- recordings ------------------------------------------------------------------------------------------


def _findings(*paths) -> list[Finding]:
    """The findings of a check of `paths` (kernlint.check: sources as recorded, not mapped to a checkout)."""
    return kernlint.check([str(p) for p in paths]).findings


def test_a_scheduled_profilers_two_cycles_give_the_same_fingerprints_and_one_suppressions_file(tmp_path):
    first, second = _findings(*CYCLE_1), _findings(*CYCLE_2)
    assert {f.scope for f in first if f.rule == "KL401"} == {"annotation ProfilerStep#1"}
    assert {f.scope for f in second if f.rule == "KL401"} == {"annotation ProfilerStep#3"}
    assert sorted(f.fingerprint for f in first) == sorted(f.fingerprint for f in second)
    written = kernlint_in(tmp_path, "check", *CYCLE_1, "--suppress-all")
    assert written.returncode == 0, written.stdout + written.stderr
    later = kernlint_in(tmp_path, "check", *CYCLE_2)
    assert later.returncode == 0, later.stdout
    assert "4 suppressed (4 file)" in later.stdout


@pytest.fixture(scope="module")
def two_recordings(tmp_path_factory) -> tuple[Path, Path]:
    """The program recorded by two processes, each started from its own folder (absolute paths, pids and
    threads differ): each folder's out/ holds cycle1, cycle2 and window."""
    root = tmp_path_factory.mktemp("two_recordings")
    procs = []
    for name in ("first", "second"):
        folder = root / name
        (folder / "out").mkdir(parents=True)
        (folder / "program.py").write_text(PROGRAM)
        env = {**os.environ, "OMP_NUM_THREADS": "1"}
        procs.append(subprocess.Popen([sys.executable, str(folder / "program.py"), str(folder / "out")],
                                      cwd=folder, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT))
    for proc in procs:
        out, _ = proc.communicate(timeout=300)
        assert proc.returncode == 0, out.decode(errors="replace")
    return root / "first" / "out", root / "second" / "out"


def test_two_processes_recording_the_same_code_give_the_same_fingerprints(two_recordings):
    first, second = (_findings(folder) for folder in two_recordings)
    assert len(first) == 3 and {f.rule for f in first} == {"KL401"}
    threads = {f.scope for f in first + second if "thread" in f.scope}
    assert len(threads) == 2   # each names its own process and thread
    assert sorted(f.fingerprint for f in first) == sorted(f.fingerprint for f in second)
    # The cycles of one process too.
    cycles = [f.fingerprint for f in first if "cycle" in f.trace]
    assert len(cycles) == 2 and cycles[0] == cycles[1]


def test_two_processes_give_the_same_sarif_partial_fingerprints(two_recordings, tmp_path):
    prints = []
    for n, folder in enumerate(two_recordings):
        out = tmp_path / f"{n}.sarif"
        kernlint_in(tmp_path, "check", folder, "--format", "sarif", "-o", out)
        results = json.loads(out.read_text())["runs"][0]["results"]
        prints.append(sorted(r["partialFingerprints"]["kernlintFingerprint/v2"] for r in results))
    assert prints[0] and prints[0] == prints[1]


def test_suppress_all_on_one_process_silences_the_other(two_recordings, tmp_path):
    first, second = two_recordings
    assert kernlint_in(tmp_path, "check", second).returncode == 1
    assert kernlint_in(tmp_path, "check", first, "--suppress-all").returncode == 0
    proc = kernlint_in(tmp_path, "check", second)
    assert proc.returncode == 0, proc.stdout
    assert "3 suppressed (3 file)" in proc.stdout
