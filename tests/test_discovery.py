"""Finding traces in folders by their content, and saying what was passed over and why."""
from __future__ import annotations

import gzip
import json
import os
import time
from pathlib import Path

import pytest

from conftest import FIXTURES
from kernlint.errors import TraceError
from kernlint.trace import load as load_module
from kernlint.trace.load import SNIFF_BYTES, discover_traces, find_trace_files, load_trace

EXTERNAL = FIXTURES / "external"
EXTERNAL_TRACES = sorted(p.relative_to(EXTERNAL).as_posix() for p in EXTERNAL.rglob("*.gz"))

EVENT = {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": 10.0, "dur": 2.0}


def _trace_bytes(gz: bool, **top) -> bytes:
    data = json.dumps({"schemaVersion": 1, **top, "traceEvents": [EVENT]}).encode()
    return gzip.compress(data) if gz else data


def _names(paths, root: Path) -> list[str]:
    return sorted(Path(p).relative_to(root).as_posix() for p in paths)


def test_the_external_folder_yields_every_real_trace_and_not_its_readme():
    found = discover_traces([EXTERNAL])
    assert len(EXTERNAL_TRACES) == 13
    assert _names(found.files, EXTERNAL) == EXTERNAL_TRACES
    assert found.skipped == [] and found.ignored_count == 1  # README.md: not a .json / .json.gz file
    # Names tensorboard_trace_handler never writes are found too.
    names = {p.name for p in found.files}
    assert {"trace_filter__sampled_rank-1.json.gz", "hta__amd_trace__mi250_minitoy_train_ROCm6_2_kineto.json.gz",
            "hta__critical_path__alexnet__benchmark_result_2869224_1695835535_trace.json.gz"} <= names
    assert find_trace_files([EXTERNAL]) == found.files


def test_the_shared_original_folder_matches_the_copy():
    shared = Path("/work/shared/traces-external")
    if not shared.is_dir():
        pytest.skip("the shared originals are not on this machine")
    assert _names(discover_traces([shared]).files, shared) == EXTERNAL_TRACES


def test_odd_names_are_found_by_content(tmp_path):
    logs = tmp_path / "logs"
    (logs / "run" / "deep").mkdir(parents=True)
    (logs / "rank-0.json.gz").write_bytes(_trace_bytes(True))
    (logs / "sampled_rank-1.json.gz").write_bytes(_trace_bytes(True, distributedInfo={"rank": 1}))
    (logs / "run" / "train.json").write_bytes(_trace_bytes(False))
    (logs / "run" / "worker3_step_12.1700000000000.pt.trace.json").write_bytes(_trace_bytes(False))
    (logs / "run" / "deep" / "benchmark_result_1_2_trace.json.gz").write_bytes(_trace_bytes(True))
    # gzip told by its magic bytes: a gzipped file named .json, and a plain one named .json.gz
    (logs / "run" / "deep" / "gzipped.json").write_bytes(_trace_bytes(True))
    (logs / "plain.json.gz").write_bytes(_trace_bytes(False))
    (logs / "array.json").write_text(json.dumps([EVENT]))  # the Chrome "JSON array" form
    (logs / "device_only.json").write_text(json.dumps({"deviceProperties": [], "traceEvents": []}))
    (logs / "notes.txt").write_text("not looked at")
    found = discover_traces([logs])
    assert _names(found.files, logs) == [
        "array.json", "device_only.json", "plain.json.gz", "rank-0.json.gz",
        "run/deep/benchmark_result_1_2_trace.json.gz", "run/deep/gzipped.json", "run/train.json", "run/worker3_step_12.1700000000000.pt.trace.json",
        "sampled_rank-1.json.gz"]
    assert found.skipped == [] and found.ignored_count == 1
    for path in found.files:
        # Each loads (device_only.json holds no events; plain.json.gz is named .gz but plain: loading says so).
        if path.name not in ("plain.json.gz", "device_only.json"):
            assert len(load_trace(path)) == 1


def test_what_is_passed_over_is_listed_with_a_reason(tmp_path):
    logs = tmp_path / "logs"
    sub = logs / "sub"
    sub.mkdir(parents=True)
    (logs / "rank-0.json.gz").write_bytes(_trace_bytes(True))
    (logs / "host_1.123.run.json").write_text(json.dumps({"run": "x", "trace": "host_1.123.pt.trace.json.gz"}))
    (logs / "random.json").write_text(json.dumps({"config": {"traceEvents": []}, "lr": 0.1}))  # not top-level
    (logs / "numbers.json").write_text("[1, 2, 3]")
    (logs / "empty.json").write_bytes(b"")
    (logs / "broken.json.gz").write_bytes(b"\x1f\x8b\x08\x00garbage")
    (logs / "dangling.json").symlink_to(tmp_path / "gone.json")
    (logs / "loop.json").symlink_to(logs / "loop.json")
    (sub / "up").symlink_to(logs, target_is_directory=True)  # a folder loop
    os.mkfifo(logs / "pipe.json")
    os.mkfifo(logs / "fifo")  # no .json suffix: still not a regular file, still listed
    (sub / "image.png").write_bytes(b"\x89PNG")
    found = discover_traces([logs])  # must neither block on the FIFOs nor loop forever
    assert _names(found.files, logs) == ["rank-0.json.gz"]
    reasons = {s.path.relative_to(logs).as_posix(): s.reason for s in found.skipped}
    assert reasons == {
        "random.json": "not a kineto trace (JSON without traceEvents)",
        "numbers.json": "not a kineto trace (JSON array without trace events)",
        "empty.json": "empty file",
        "broken.json.gz": reasons["broken.json.gz"],
        "dangling.json": "dangling symbolic link (its target does not exist)",
        "loop.json": "symbolic link loop",
        "sub/up": "link to a folder already searched (a link loop or a second path to it)",
        "pipe.json": "not a regular file (a FIFO); not opened",
        "fifo": "not a regular file (a FIFO); not opened",
    }
    assert reasons["broken.json.gz"].startswith("not a valid gzip file")
    assert all("\n" not in r for r in reasons.values())
    assert found.ignored_count == 2  # image.png, and kernlint's own run metadata host_1.123.run.json


def test_unreadable_files_and_folders_are_listed_not_dropped(tmp_path, monkeypatch):
    # Tests run as root, where mode 000 does not stop a read: make the OS calls fail instead.
    logs = tmp_path / "logs"
    (logs / "locked").mkdir(parents=True)
    (logs / "locked" / "inside.json").write_bytes(_trace_bytes(False))
    (logs / "secret.json").write_bytes(_trace_bytes(False))
    (logs / "ok.json").write_bytes(_trace_bytes(False))
    real_scandir, real_open = os.scandir, os.open

    def scandir(path=".", *a, **k):
        if Path(path).name == "locked":
            raise PermissionError(13, "Permission denied", str(path))
        return real_scandir(path, *a, **k)

    def fake_open(file, *a, **k):   # the loader opens with os.open (O_NONBLOCK: a FIFO never blocks it)
        if Path(str(file)).name == "secret.json":
            raise PermissionError(13, "Permission denied", str(file))
        return real_open(file, *a, **k)

    monkeypatch.setattr(load_module.os, "scandir", scandir)
    monkeypatch.setattr(load_module.os, "open", fake_open)
    found = discover_traces([logs])
    assert _names(found.files, logs) == ["ok.json"]
    reasons = {s.path.relative_to(logs).as_posix(): s.reason for s in found.skipped}
    assert reasons == {"locked": "cannot list folder: Permission denied",
                       "secret.json": "cannot read: Permission denied"}


def test_the_head_is_read_until_it_can_be_judged_and_no_further(tmp_path, monkeypatch):
    logs = tmp_path / "logs"
    logs.mkdir()
    # The trace keys come after a value longer than the first head read: read on until they come.
    (logs / "late.json").write_text(json.dumps({"comment": "x" * (SNIFF_BYTES + 10), "traceEvents": [EVENT]}))
    # The keys come first and a huge tail follows (garbage even): found from its head alone.
    (logs / "early.json.gz").write_bytes(gzip.compress(b'{"schemaVersion": 1, "traceEvents": [' + b"0," * 10**6))
    # A JSON object without trace keys is judged once it closes, however long; one cut short when it ends.
    (logs / "config.json").write_text(json.dumps({"comment": "y" * (3 * SNIFF_BYTES), "lr": 0.1}))
    (logs / "cut.json").write_text(json.dumps({"comment": "z" * (3 * SNIFF_BYTES)})[:-5])
    found = discover_traces([logs])
    assert _names(found.files, logs) == ["early.json.gz", "late.json"]
    reasons = {s.path.name: (s.reason, s.unreadable) for s in found.skipped}
    assert reasons == {"config.json": ("not a kineto trace (JSON without traceEvents)", False),
                       "cut.json": ("not a kineto trace (JSON without traceEvents; the JSON is cut short)", False)}
    # Past the most the sniffer reads, the file is not judged: unreadable, never "not a trace".
    monkeypatch.setattr(load_module, "SNIFF_MAX_BYTES", 2 * SNIFF_BYTES)
    found = discover_traces([logs])
    assert _names(found.files, logs) == ["early.json.gz", "late.json"]
    reasons = {s.path.name: (s.reason, s.unreadable) for s in found.skipped}
    assert reasons["config.json"] == ("cannot read: no trace key in its first 128 KiB and the JSON goes on (name "
                                      "the file itself to check it)", True)


def test_an_open_string_of_escaped_quotes_is_scanned_in_linear_time(tmp_path):
    """Issue 38, item 6: the token pattern tried again from every escaped quote of a string left open at the
    head's end (360 KB: 26 s)."""
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "quotes.json").write_text('{"comment": "' + '\\"' * (2 << 20) + '", "traceEvents": []}')
    start = time.perf_counter()
    found = discover_traces([logs])
    assert _names(found.files, logs) == ["quotes.json"]
    assert time.perf_counter() - start < 5


def test_a_folder_without_traces_is_an_error_naming_it(tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "a.run.json").write_text("{}")
    (logs / "notes.txt").write_text("x")
    with pytest.raises(TraceError) as info:
        discover_traces([logs])
    assert info.value.path == str(logs)
    assert info.value.problem.startswith("folder holds no kineto traces (2 files looked at")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(TraceError, match=r"folder holds no kineto traces \(0 files looked at\)"):
        find_trace_files([empty])


def test_named_files_are_taken_as_they_are_and_duplicates_dropped(tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    trace = logs / "rank-0.json.gz"
    trace.write_bytes(_trace_bytes(True))
    other = tmp_path / "something.txt"  # a named file is not sniffed: loading it says what is wrong
    other.write_text("hello")
    found = discover_traces([other, logs, trace, tmp_path / "logs" / ".." / "logs" / "rank-0.json.gz"])
    assert found.files == [other, trace]
    with pytest.raises(TraceError, match="not valid JSON"):
        load_trace(other)


def test_bad_named_paths(tmp_path):
    with pytest.raises(TraceError, match="no such file or folder"):
        discover_traces([tmp_path / "nope.json"])
    (tmp_path / "dangling.json").symlink_to(tmp_path / "gone")
    with pytest.raises(TraceError, match="dangling symbolic link"):
        discover_traces([tmp_path / "dangling.json"])
    os.mkfifo(tmp_path / "pipe.json")
    with pytest.raises(TraceError, match="not a regular file or folder"):
        discover_traces([tmp_path / "pipe.json"])
