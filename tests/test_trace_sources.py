"""Trace sources (kernlint.trace.sources): the registry of trace formats, kineto's JSON the first, Nsight
Systems' SQLite export the second (fixtures/nsys: a two-GPU H100 run before and after an MFU change), and a
plugin package that adds a third through the entry-point group `kernlint.trace_sources`."""
from __future__ import annotations

import gzip
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from conftest import FIXTURES, REPO
from fresh_cli import run_fresh
from kernlint.errors import TraceError
from kernlint.trace import names
from kernlint.trace.load import discover_traces, load_trace
from kernlint.trace.runs import group_runs
from kernlint.trace.sources import TRACE_SOURCES, pairable, source_of, split_entry
from kernlint.trace.window import window_edges

NSYS = FIXTURES / "nsys"
BEFORE, AFTER = NSYS / "mfu_2gpu_before.sqlite.gz", NSYS / "mfu_2gpu_after.sqlite.gz"
KINETO = FIXTURES / "external" / "hta__triton_example__triton_example.json.gz"
# (file, kernels, runtime calls, memcpys, memsets, kernels whose correlation id names a runtime call of their
# process, the two processes' pids): counted in the SQLite tables themselves (tests below recount the links).
EXPORTS = [(BEFORE, 4010, 7466, 1020, 269, 3986, (144, 145)), (AFTER, 3587, 6682, 904, 242, 3577, (148, 149))]


def _inflated(gz: Path, where: Path) -> Path:
    out = where / gz.name.removesuffix(".gz")
    out.write_bytes(gzip.decompress(gz.read_bytes()))
    return out


def _count(table, kind: str) -> int:
    return int((table.columns["kind"] == kind).sum())


# -- the registry and sniffing ---------------------------------------------------------------------------------

def test_the_registry_lists_kineto_and_nsys_as_built_ins():
    assert {"kineto", "nsys"} <= set(TRACE_SOURCES.names())
    assert TRACE_SOURCES.group == "kernlint.trace_sources"
    kineto, nsys = TRACE_SOURCES.get("kineto"), TRACE_SOURCES.get("nsys")
    assert TRACE_SOURCES.is_builtin("kineto") and TRACE_SOURCES.is_builtin("nsys")
    assert kineto.pairs_captures and kineto.merges_captures and kineto.parts is None
    assert not nsys.pairs_captures and not nsys.merges_captures and nsys.parts is not None


def test_sniffing_picks_the_source(tmp_path):
    plain = _inflated(BEFORE, tmp_path)
    text = tmp_path / "notes.txt"
    text.write_text("hello\n")
    assert source_of(KINETO).name == "kineto"
    assert source_of(BEFORE).name == "nsys" and source_of(plain).name == "nsys"   # gzip inflated to sniff
    assert source_of(text).name == "kineto"   # nobody's: kineto's reading says what it is not
    assert source_of(tmp_path / "missing.json").name == "kineto"
    with pytest.raises(TraceError, match="not valid JSON"):
        load_trace(text)
    assert pairable([KINETO, BEFORE, f"{BEFORE}#pid-144"]) == [KINETO]


def test_an_entry_names_one_process_of_a_file():
    assert split_entry(f"{BEFORE}#pid-144") == (BEFORE, "pid-144")
    assert split_entry(BEFORE) == (BEFORE, None)
    with pytest.raises(TraceError, match=r"no process pid-7 ran device work in this export \(it holds pid-144, "
                                         r"pid-145\)"):
        load_trace(f"{BEFORE}#pid-7")
    with pytest.raises(TraceError, match="cannot read: No such file"):   # kineto files have no parts
        load_trace(f"{KINETO}#pid-1")


def test_nsys_names_in_kinetos_words():
    assert names.nsys_runtime_name("cudaLaunchKernel_v7000") == ("cudaLaunchKernel", "cuda_runtime")
    assert names.nsys_runtime_name("cudaStreamGetCaptureInfo_v2_v11030") == ("cudaStreamGetCaptureInfo_v2",
                                                                               "cuda_runtime")
    assert names.nsys_runtime_name("cuLaunchKernelEx") == ("cuLaunchKernelEx", "cuda_driver")
    assert names.nvtx_range("aten::copy_, seq = 45330, op_id = 990728") == ("aten::copy_", "cpu_op")
    assert names.nvtx_range("aten::empty_strided, op_id = 999730") == ("aten::empty_strided", "cpu_op")
    assert names.nvtx_range("FlashAttnFunc, op_id = 3") == ("FlashAttnFunc", "cpu_op")
    assert names.nvtx_range("FSDP::pre_forward (blocks.3._checkpoint_wrapped_module), op_id = 990878") == (
        "FSDP::pre_forward (blocks.3._checkpoint_wrapped_module)", "user_annotation")
    assert names.nvtx_range("ncclSend") == ("ncclSend", "user_annotation")
    assert names.nsys_memcpy_name(1, 0, 2) == "Memcpy HtoD (Pageable -> Device)"
    assert names.nsys_memcpy_name(2, 2, 0) == "Memcpy DtoH (Device -> Pageable)"   # what the sync rules read
    assert names.nsys_memset_name(2) == "Memset (Device)"


# -- the nsys exports --------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("path", "kernels", "runtime", "memcpy", "memset", "linked", "pids"), EXPORTS,
                         ids=["before", "after"])
def test_an_nsys_export_loads_whole(tmp_path, path, kernels, runtime, memcpy, memset, linked, pids):
    table = load_trace(path)
    assert (_count(table, "kernel"), _count(table, "runtime"), _count(table, "memcpy"),
            _count(table, "memset")) == (kernels, runtime, memcpy, memset)
    columns = table.columns
    assert not columns["damage"].any()
    # Every kernel whose correlation id names a runtime call of its own process is linked to that call.
    db = sqlite3.connect(f"{_inflated(path, tmp_path).as_uri()}?mode=ro&immutable=1", uri=True)
    expected = db.execute(
        "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k WHERE EXISTS (SELECT 1 FROM CUPTI_ACTIVITY_KIND_RUNTIME "
        "r WHERE r.correlationId = k.correlationId AND (r.globalTid >> 24) = (k.globalPid >> 24))").fetchone()[0]
    db.close()
    assert expected == linked
    kernel = np.flatnonzero(columns["kind"] == "kernel")
    launcher = columns["launcher"][kernel]
    assert int((launcher >= 0).sum()) == linked
    ran = kernel[launcher >= 0]
    assert (columns["correlation"][columns["launcher"][ran]] == columns["correlation"][ran]).all()
    assert set(columns["category"][columns["launcher"][ran]].tolist()) == {"launch"}
    # The emit_nvtx ranges are the ops; kernels inherit their launching op.
    assert _count(table, "op") > 10_000 and "aten::copy_" in set(columns["name"][columns["kind"] == "op"].tolist())
    assert table.meta.host_name == "modal" and table.meta.trace_id and table.meta.base_time_ns > 10 ** 18
    assert table.meta.record_shapes is False and table.meta.with_stack is False


@pytest.mark.parametrize(("path", "kernels", "runtime", "memcpy", "memset", "linked", "pids"), EXPORTS,
                         ids=["before", "after"])
def test_an_export_of_two_processes_is_two_ranks_of_one_run(path, kernels, runtime, memcpy, memset, linked, pids):
    found = discover_traces([path])
    assert found.files == [Path(f"{path}#pid-{pid}") for pid in pids]
    tables = [load_trace(f) for f in found.files]
    assert [t.meta.distributed for t in tables] == [{"rank": 0, "world_size": 2}, {"rank": 1, "world_size": 2}]
    assert [t.meta.rank for t in tables] == [0, 1]
    assert sum(_count(t, "kernel") for t in tables) == kernels
    assert sum(_count(t, "runtime") for t in tables) == runtime
    for t in tables:   # one process each: its window edges are edges, nothing in the middle lacks a partner
        assert window_edges(t).unlinked_counts() == {}
        assert set(t.columns["device"][t.columns["kind"] == "kernel"].tolist()) == {t.meta.rank}
    grouping = group_runs(tables)
    assert [g.ranks for g in grouping.groups] == [[0, 1]] and grouping.unmatched == []


def test_a_folder_search_takes_sqlite_exports_by_content(tmp_path):
    folder = tmp_path / "runs"
    folder.mkdir()
    plain = _inflated(BEFORE, folder)
    shutil.copy(KINETO, folder / KINETO.name)
    con = sqlite3.connect(folder / "foreign.sqlite")
    con.execute("CREATE TABLE t (x)")
    con.commit()
    con.close()
    (folder / "cut.sqlite").write_bytes(plain.read_bytes()[:1_000_000])
    shutil.copy(BEFORE, folder / BEFORE.name)   # a .sqlite.gz is read when named, not searched for
    found = discover_traces([folder])
    assert [f.name for f in found.files] == [KINETO.name, f"{plain.name}#pid-144", f"{plain.name}#pid-145"]
    reasons = {s.path.name: (s.reason, s.unreadable) for s in found.skipped}
    assert reasons["foreign.sqlite"] == ("an SQLite database but not an Nsight Systems export (no StringIds and "
                                         "CUPTI_ACTIVITY_KIND_KERNEL / _RUNTIME / NVTX_EVENTS tables)", False)
    assert reasons["cut.sqlite"][0].startswith("cannot read: ") and reasons["cut.sqlite"][1]


def _foreign_and_cut(tmp_path: Path) -> tuple[Path, Path, Path]:
    foreign = tmp_path / "foreign.sqlite"
    con = sqlite3.connect(foreign)
    con.execute("CREATE TABLE samples (t, v)")
    con.commit()
    con.close()
    cut = tmp_path / "cut.sqlite"
    cut.write_bytes(gzip.decompress(BEFORE.read_bytes())[:65536])
    cut_gz = tmp_path / "cut.sqlite.gz"
    cut_gz.write_bytes(BEFORE.read_bytes()[:200_000])
    return foreign, cut, cut_gz


def test_a_foreign_or_damaged_sqlite_is_one_line_exit_2(tmp_path):
    foreign, cut, cut_gz = _foreign_and_cut(tmp_path)
    expected = {
        foreign: "an SQLite database but not an Nsight Systems export (no StringIds and CUPTI_ACTIVITY_KIND_KERNEL "
                 "/ _RUNTIME / NVTX_EVENTS tables)",
        cut: "damaged or not an SQLite database (database disk image is malformed)",
        cut_gz: "not a valid gzip file (compressed data ends early)",
    }
    for path, problem in expected.items():
        done = run_fresh(["check", path, "--isolated"], cwd=tmp_path)
        assert done.returncode == 2 and done.stdout == "", (done.stdout, done.stderr)
        assert done.stderr == f"kernlint: error: {path}: {problem}\n"


def test_a_damaged_sqlite_in_a_folder_makes_the_verdict_incomplete(tmp_path):
    folder = tmp_path / "logs"
    folder.mkdir()
    _, cut, _ = _foreign_and_cut(tmp_path)
    shutil.move(cut, folder / cut.name)
    shutil.copy(KINETO, folder / KINETO.name)
    done = run_fresh(["check", folder, "--isolated", "--format", "json"], cwd=tmp_path)
    assert done.returncode == 4, done.stderr
    report = json.loads(done.stdout)
    assert [s["path"] for s in report["skipped"]] == [str(folder / "cut.sqlite")]


# -- the nsys findings, through the CLI -------------------------------------------------------------------------

def _kernlint(tmp_path: Path, *args) -> subprocess.CompletedProcess:
    return run_fresh([str(a) for a in args], cwd=tmp_path)


def test_the_nsys_findings_on_its_traces(tmp_path):
    """Before: every rank syncs the host on a pageable host-to-device copy (aten::to -> aten::copy_ ->
    cudaStreamSynchronize, 16 and 17 times in the window: KL401); the ranks differ by the layer the 300 ms window
    cuts (KL003/KL004: window-edge noise, no step ranges to align on). The rules that need shapes or stacks
    are not applicable, never passed."""
    done = _kernlint(tmp_path, "check", BEFORE, "--isolated", "--format", "json")
    assert done.returncode == 1, done.stderr
    report = json.loads(done.stdout)
    by_rule: dict[str, list] = {}
    for f in report["findings"]:
        by_rule.setdefault(f["rule"], []).append(f)
    syncs = by_rule["KL401"]
    assert len(syncs) == 33 and {f["event"] for f in syncs} == {"cudaStreamSynchronize"}
    assert {f["rank"] for f in syncs} == {0, 1}
    assert {"KL003", "KL004"} <= set(by_rule)
    statuses = {(t["path"], r["rule"]): (r["status"], r["reason"]) for t in report["traces"] for r in t["rules"]}
    rank0 = f"{BEFORE}#pid-144"
    assert statuses[(rank0, "KL101")] == ("not-applicable", "the trace has no input shapes (record with "
                                                            "record_shapes=True)")
    assert statuses[(rank0, "KL401")][0] == "failed"
    assert not [k for k, (status, _) in statuses.items() if status == "incomplete"]
    # Each rank on a worker of its own: the same findings.
    workers = _kernlint(tmp_path, "check", BEFORE, "--isolated", "--format", "json", "--jobs", "2")
    assert workers.returncode == 1, workers.stderr
    assert json.loads(workers.stdout)["findings"] == report["findings"]


def test_the_nsys_baseline_comparison(tmp_path):
    """The same program recorded twice (the file name kept): the after window holds fewer blocks (its steps are
    slower), so launches are gone (info) and nothing is timed (one run each side); the exit status is KL401's
    (a warning, --fail-on's default)."""
    for side, path in (("main", BEFORE), ("pr", AFTER)):
        (tmp_path / side).mkdir()
        shutil.copy(path, tmp_path / side / "train.sqlite.gz")
    recorded = _kernlint(tmp_path, "baseline", "record", tmp_path / "main" / "train.sqlite.gz", "-o",
                         tmp_path / "base.json")
    assert recorded.returncode == 0, recorded.stderr
    done = _kernlint(tmp_path, "check", tmp_path / "pr" / "train.sqlite.gz", "--baseline", tmp_path / "base.json",
                     "--isolated", "--format", "json")
    assert done.returncode == 1, done.stderr
    report = json.loads(done.stdout)
    baseline = [f for f in report["findings"] if f["rule"].startswith("KL8")]
    assert baseline and {f["rule"] for f in baseline} == {"KL805"} and {f["severity"] for f in baseline} == {"info"}
    assert {f["rule"] for f in report["findings"]} == {"KL401", "KL501", "KL805"}


# -- a plugin package adds a trace source -----------------------------------------------------------------------

SOURCE = '''
"""A CSV of trace events (a demo trace-source plugin): one event a line."""
import csv

from kernlint.errors import TraceError
from kernlint.trace.sources import TraceSource, table_from_events

HEADER = b"cat,name,pid,tid,ts,dur,correlation"


def sniff(head):
    return head.startswith(HEADER)


def read(path, max_bytes):
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    if not rows:
        raise TraceError(path, "no events in the CSV")
    events = [{"ph": "X", "cat": r["cat"], "name": r["name"], "pid": int(r["pid"]), "tid": int(r["tid"]),
               "ts": float(r["ts"]), "dur": float(r["dur"]),
               "args": {"correlation": int(r["correlation"])} if r["correlation"] else {}} for r in rows]
    return table_from_events(path, events)


SOURCE = TraceSource(name="event-csv", summary="a CSV of trace events", suffixes=(".csv",), sniff=sniff,
                     read=read)
'''

EVENTS_CSV = """cat,name,pid,tid,ts,dur,correlation
user_annotation,train_step,1,1,0,100,
cuda_runtime,cudaLaunchKernel,1,1,10,2,1
cuda_runtime,cudaLaunchKernel,1,1,20,2,2
cuda_runtime,cudaLaunchKernel,1,1,30,2,3
kernel,fill_kernel,0,7,12,5,1
kernel,fill_kernel,0,7,22,5,2
kernel,fill_kernel,0,7,32,5,3
"""

RULE = '''
id = "DEMO101"
name = "one-kernel-per-step"
severity = "error"
summary = "At most one kernel in a train_step."

[scope]
annotations = ["^train_step$"]

[check]
type = "max-count"
kinds = ["kernel"]
max = 1

[docs]
what-it-does = "Counts kernels."
why-is-this-bad = "Launches cost."
example = "x.fill_(0)"
use-instead = "fuse"
references = []
'''


def _install_source(site: Path) -> None:
    pkg = site / "kl_csv_source"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "source.py").write_text(textwrap.dedent(SOURCE))
    info = site / "kl_csv_source-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: kl-csv-source\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[kernlint.trace_sources]\nevent-csv = kl_csv_source.source:SOURCE\n")


def test_a_plugin_package_adds_a_trace_source(tmp_path):
    site = tmp_path / "site"
    _install_source(site)
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "step.csv").write_text(EVENTS_CSV)
    (tmp_path / "DEMO101.toml").write_text(RULE)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(REPO)])}
    for target in (logs / "step.csv", logs):   # named, and found in a folder by its suffix and head
        done = subprocess.run([sys.executable, "-m", "kernlint.cli", "check", str(target), "--isolated", "--rules",
                               str(tmp_path / "DEMO101.toml"), "--select", "DEMO101", "--format", "json"],
                              capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
        assert done.returncode == 1, done.stderr
        findings = json.loads(done.stdout)["findings"]
        assert [(f["rule"], f["event"], f["message"]) for f in findings] == [
            ("DEMO101", "fill_kernel", "3 matching events in annotation train_step, at most 1 allowed")]
    probe = subprocess.run([sys.executable, "-c", "from kernlint.trace.sources import TRACE_SOURCES as S; "
                            "print(S.names(), S.origin('event-csv'), S.is_builtin('event-csv'))"],
                           capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert probe.stdout.split("\n")[0] == ("['event-csv', 'kineto', 'nsys'] trace source plugin 'event-csv' "
                                           "(kl_csv_source.source:SOURCE) False"), probe.stderr
