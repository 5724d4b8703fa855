"""A trace read as a stream (kernlint.trace.event_stream) against the same trace read whole: the same table
(every column, the metadata, the shape arguments) or the same TraceError, on every recorded trace, on random
and damaged events, cut and repeated-key files, and whatever the block sizes; and the stream's window stays
small while the whole path holds the JSON. Skipped where the C extension is not built (streaming needs it).
"""
from __future__ import annotations

import gzip
import json
import os
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kernlint.errors import TraceError
from kernlint.trace import columns as C
from kernlint.trace import event_stream as S
from kernlint.trace import load
from kernlint.trace.native_chunk import native_module
from test_native_chunk import FUZZ_EXAMPLES, TRACES, json_event

pytestmark = pytest.mark.skipif(native_module() is None, reason="kernlint.trace._kineto_chunk is not built")


def _whole(path: Path):
    real = load.stream_trace
    load.stream_trace = lambda *a, **k: None
    try:
        return _table_or_error(path)
    finally:
        load.stream_trace = real


def _table_or_error(path: Path, captures=()):
    try:
        return load.load_trace(path, captures=captures)
    except TraceError as exc:
        return str(exc)


def assert_same_table(a, b) -> None:
    if isinstance(a, str) or isinstance(b, str):
        assert a == b
        return
    ca, cb = a.columns, b.columns
    assert list(ca._arrays) == list(cb._arrays) and len(ca) == len(cb)
    for name in ca._arrays:
        x, y = ca[name], cb[name]
        assert x.dtype == y.dtype, name
        if x.dtype.kind == "f":
            assert np.array_equal(x.view(np.int64), y.view(np.int64)), name   # bit for bit: NaN, -0.0
        elif x.dtype == object:
            assert list(x) == list(y), name
        else:
            assert np.array_equal(x, y), name
    assert a.meta == b.meta
    assert a.derived.frame_tree.notes() == b.derived.frame_tree.notes()
    oa, ob = a.derived.op_args, b.derived.op_args
    assert (oa is None) == (ob is None)
    if oa is not None:
        assert oa.blob == ob.blob and np.array_equal(oa.rows, ob.rows) and np.array_equal(oa.offsets, ob.offsets)


@pytest.fixture
def stream_everything(monkeypatch):
    """Every trace streamed, however small."""
    monkeypatch.setattr(S, "STREAM_FROM_BYTES", 0)


@pytest.fixture
def small_chunks(monkeypatch, stream_everything):
    """Chunks of 3 events, windows of 64 bytes, blocks of 7: every boundary falls inside an event somewhere."""
    for module in (C, S):
        monkeypatch.setattr(module, "CHUNK_EVENTS", 3)
    monkeypatch.setattr(S, "AHEAD_BYTES", 64)
    monkeypatch.setattr(S, "COMPACT_BYTES", 100)
    monkeypatch.setattr(load, "_READ_CHUNK", 7)
    monkeypatch.setattr(load, "_INFLATE_CHUNK", 7)


@pytest.mark.parametrize("path", TRACES, ids=lambda p: str(p.relative_to(p.parents[1])))
def test_recorded_trace_streamed_is_read_whole(path, stream_everything):
    assert_same_table(_table_or_error(path), _whole(path))


def test_large_recorded_traces_stream_by_default():
    """Past STREAM_FROM_BYTES of JSON a trace is streamed, not read whole."""
    large = [p for p in TRACES if len(load.read_trace_bytes(p)) > S.STREAM_FROM_BYTES]
    assert large
    for path in large:
        assert isinstance(load.stream_trace(path), tuple), path


def test_capture_merged_into_a_streamed_replay(stream_everything):
    pair = [p for p in TRACES if "vllm_piecewise" in p.name]
    replay = next((p for p in pair if "execution" in p.name), None)
    capture = next((p for p in pair if "capture" in p.name), None)
    if replay is None or capture is None:
        pytest.skip("the TraceLens vLLM capture + replay pair is not in ../shared/traces-external")
    streamed = _table_or_error(replay, captures=[capture])
    real = load.stream_trace
    load.stream_trace = lambda *a, **k: None
    try:
        whole = _table_or_error(replay, captures=[capture])
    finally:
        load.stream_trace = real
    assert not isinstance(streamed, str)
    assert_same_table(streamed, whole)


def _trace_file(text: bytes, gz: bool) -> Path:
    fd, name = tempfile.mkstemp(suffix=".json.gz" if gz else ".json")
    with os.fdopen(fd, "wb") as f:
        f.write(gzip.compress(text, mtime=0) if gz else text)
    return Path(name)


def _compare_text(text: bytes, gz: bool = False) -> None:
    path = _trace_file(text, gz)
    try:
        assert_same_table(_table_or_error(path), _whole(path))
    finally:
        path.unlink()


_KERNEL = (b'{"ph": "X", "cat": "kernel", "name": "k%d", "pid": 0, "tid": 7, "ts": %d, "dur": 2, '
           b'"args": {"correlation": %d, "device": 0, "stream": 7}}')
_LAUNCH = (b'{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": %d, '
           b'"dur": 1, "args": {"correlation": %d}}')


def _events(n: int) -> list[bytes]:
    out = []
    for i in range(n):
        out += [_LAUNCH % (10 * i, i), _KERNEL % (i % 5, 10 * i + 3, i)]
    return out


def _trace(events: list[bytes], head: bytes = b'"schemaVersion": 1, ', tail: bytes = b', "traceName": "t"') -> bytes:
    return b"{" + head + b'"traceEvents": [' + b",\n".join(events) + b"]" + tail + b"}"


@pytest.mark.parametrize("gz", [False, True])
@pytest.mark.parametrize("case", [
    "plain", "empty-array", "only-metadata", "damaged-value", "cut-short", "second-traceEvents-key",
    "traceEvents-not-a-list", "array-form", "garbage-after", "bare-N/A", "traceEvents-last", "escaped-key",
    "trailing-comma", "bom"])
def test_shapes_of_file_stream_as_read_whole(case, gz, small_chunks):
    events = _events(6)
    text = {
        "plain": _trace(events),
        "empty-array": _trace([]),
        "only-metadata": _trace([b'{"ph": "M", "name": "process_name", "pid": 0, "args": {"name": "x"}}']),
        "damaged-value": _trace(events[:5] + [b'{"ph": "X", "name": 5, "pid": 0.5, "tid": "1", "ts": "7",'
                                              b' "dur": null, "args": {"correlation": "3"}}'] + events[5:]),
        "cut-short": _trace(events)[:-40],
        "second-traceEvents-key": _trace(events, tail=b', "traceEvents": []'),
        "traceEvents-not-a-list": b'{"traceEvents": {"a": 1}}',
        "array-form": b"[" + b",".join(events) + b"]",
        "garbage-after": _trace(events) + b" x",
        "bare-N/A": _trace(events, tail=b', "traceName": N/A'),
        "traceEvents-last": b'{"deviceProperties": [{"name": "H200", "x": "[{"}], "traceEvents": ['
                            + b",".join(events) + b"]}",
        "escaped-key": b'{"trace\\u0045vents": [' + b",".join(events) + b"]}",
        "trailing-comma": _trace(events[:3]).replace(b"]", b",]", 1),
        "bom": b"\xef\xbb\xbf" + _trace(events),
    }[case]
    _compare_text(text, gz)


@settings(max_examples=FUZZ_EXAMPLES // 2, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(st.lists(json_event, min_size=0, max_size=12), st.booleans())
def test_random_events_stream_as_read_whole(small_chunks, events, gz):
    _compare_text(_trace(events), gz)


def test_block_sizes_do_not_change_the_table(monkeypatch, stream_everything):
    text = _trace(_events(300))
    path = _trace_file(text, gz=True)
    try:
        tables = []
        for block in (1, 13, 4096, 1 << 20):
            monkeypatch.setattr(load, "_INFLATE_CHUNK", block)
            monkeypatch.setattr(S, "AHEAD_BYTES", block)
            tables.append(_table_or_error(path))
        assert not isinstance(tables[0], str)
        for t in tables[1:]:
            assert_same_table(tables[0], t)
        assert_same_table(tables[0], _whole(path))
    finally:
        path.unlink()


def test_window_stays_small_while_the_whole_path_holds_the_json(monkeypatch):
    """20,000 events (2.8 MB of JSON) streamed in blocks of 16 KB through windows of 64 KB: the bytes held
    at once stay under 200 KB."""
    monkeypatch.setattr(S, "STREAM_FROM_BYTES", 1 << 16)
    monkeypatch.setattr(S, "AHEAD_BYTES", 1 << 16)
    monkeypatch.setattr(S, "COMPACT_BYTES", 1 << 16)
    monkeypatch.setattr(load, "_INFLATE_CHUNK", 1 << 14)
    for module in (C, S):
        monkeypatch.setattr(module, "CHUNK_EVENTS", 256)
    text = _trace(_events(10_000))
    held = []
    real = S.EventStream._decode

    def watched(self, eof):
        held.append(len(self._buf))
        return real(self, eof)

    monkeypatch.setattr(S.EventStream, "_decode", watched)
    path = _trace_file(text, gz=True)
    try:
        streamed = load.stream_trace(path)
        assert isinstance(streamed, tuple) and streamed[1].n == 20_000 and streamed[2] == len(text)
        assert len(text) > 2_500_000 and max(held) < 200_000
    finally:
        path.unlink()


def test_a_trace_larger_than_the_limit_is_refused_while_streaming(stream_everything):
    text = _trace(_events(2000))
    path = _trace_file(text, gz=True)
    try:
        with pytest.raises(TraceError, match="decompresses to more than 10,000 bytes"):
            load.load_trace(path, max_bytes=10_000)
    finally:
        path.unlink()


def test_an_event_larger_than_any_window_is_read_whole(monkeypatch, stream_everything):
    """One event bigger than MAX_WINDOW_BYTES: the stream gives up and the whole path reads the trace."""
    monkeypatch.setattr(S, "MAX_WINDOW_BYTES", 1000)
    monkeypatch.setattr(S, "AHEAD_BYTES", 100)
    monkeypatch.setattr(load, "_READ_CHUNK", 100)
    big = json.dumps({"ph": "X", "cat": "cpu_op", "name": "x" * 5000, "pid": 1, "tid": 1, "ts": 1, "dur": 1})
    text = _trace(_events(3) + [big.encode()])
    path = _trace_file(text, gz=False)
    try:
        assert load.stream_trace(path) is None
        assert_same_table(_table_or_error(path), _whole(path))
    finally:
        path.unlink()
