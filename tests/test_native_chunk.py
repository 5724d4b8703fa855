"""The native columnar reader (kernlint.trace._kineto_chunk through kernlint.trace.native_chunk) against the
Python path of kernlint.trace.columns: where it answers, exactly the same columns; elsewhere None.

Every trace of fixtures/ and ../shared/traces-external is decoded both ways and compared array by array;
random events (hypothesis) and cut or damaged buffers check that the native path answers only where it is
exact and never crashes. Skipped where the extension is not built (`pip install -e .` or
`python setup.py build_ext --inplace` builds it).
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import random
from pathlib import Path

import msgspec
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kernlint.trace import columns as C
from kernlint.trace import native_chunk as glue
from kernlint.trace.load import decode_trace, find_trace_files, read_trace_bytes
from kernlint.trace.native_chunk import DecodedChunk, add_chunk_native, native_module
from kernlint.trace.schema import trace_decoder

REPO = Path(__file__).resolve().parents[1]
TRACE_ROOTS = [p for p in (REPO / "fixtures", REPO.parent / "shared" / "traces-external") if p.is_dir()]

native = native_module()
pytestmark = pytest.mark.skipif(native is None, reason="kernlint.trace._kineto_chunk is not built (no C "
                                "compiler at install, or `python setup.py build_ext --inplace` not run) or "
                                "KERNLINT_NATIVE=0 switches it off")


# -- the two paths ------------------------------------------------------------------------------------------------

def decode_counting(raw_events: list, path, monkeypatch) -> tuple[C.RawColumns, int, int]:
    """decode_events as it runs (native per chunk, the Python path where that says None): (columns, chunks,
    chunks that fell back)."""
    calls = []

    def counted(*args):
        got = add_chunk_native(*args)
        calls.append(got is None)
        return got

    with monkeypatch.context() as m:
        m.setattr(C, "add_chunk_native", counted)
        out = C.decode_events(raw_events, path)
    return out, len(calls), sum(calls)


def assert_same(a: C.RawColumns, b: C.RawColumns) -> None:
    """Every column of two RawColumns equal: values, codes, masks, ids (and their kind), shape arguments;
    floats bit for bit (NaN, -0.0)."""
    assert (a.n, a.others) == (b.n, b.others)
    n = a.n
    assert np.array_equal(a.complete[:n], b.complete[:n])
    for which in ("name", "cat", "pid", "tid", "launch_kernel"):
        ta, tb = getattr(a, which), getattr(b, which)
        assert ta.values == tb.values, which
        assert all(type(v) is str for v in ta.values) and all(type(v) is str for v in tb.values)
        assert np.array_equal(ta.codes(n), tb.codes(n)), which
        assert np.array_equal(ta.bad[:n], tb.bad[:n]), which
    for which in ("ts", "dur"):
        assert np.array_equal(getattr(a, which)[:n].view(np.int64), getattr(b, which)[:n].view(np.int64)), which
        assert np.array_equal(getattr(a, "bad_" + which)[:n], getattr(b, "bad_" + which)[:n]), which
    for which in C.RawColumns.INT_FIELDS:
        assert np.array_equal(a.int_column(which), b.int_column(which)), which
    for which in a.ids:
        va, vb = a.id_values(which), b.id_values(which)
        assert type(va) is type(vb), which
        if isinstance(va, np.ndarray):
            assert np.array_equal(va, vb), which
        else:
            assert [(type(v), v) for v in va] == [(type(v), v) for v in vb], which
    assert (a.op_args is None) == (b.op_args is None)
    if a.op_args is not None:
        assert np.array_equal(a.op_args.rows, b.op_args.rows)
        assert np.array_equal(a.op_args.offsets, b.op_args.offsets)
        assert a.op_args.blob == b.op_args.blob


# -- (a) every recorded trace --------------------------------------------------------------------------------

def raw_events(path: Path) -> list:
    """The trace's events as the loader hands them to decode_events (msgspec.Raw each). The loader's own
    decoder first: decode_trace's search for repeated keys (a second JSON parse, in Python) would double
    this file's time; the forms it alone reads (the bare array, BOMs, bare N/A) go through it."""
    data = read_trace_bytes(path)
    try:
        return trace_decoder.decode(data).trace_events
    except msgspec.MsgspecError:
        return decode_trace(data, path).trace_events


def _traces() -> list[Path]:
    if not TRACE_ROOTS:
        return []
    files, seen = [], set()
    for f in find_trace_files(TRACE_ROOTS):
        key = hashlib.sha1(f.read_bytes()).digest()   # fixtures/external copies traces-external
        if key not in seen:
            seen.add(key)
            files.append(f)
    return files


TRACES = _traces()
# Random chunks per property test; run longer with KERNLINT_FUZZ_EXAMPLES=20000 (as tests/test_properties.py).
FUZZ_EXAMPLES = int(os.environ.get("KERNLINT_FUZZ_EXAMPLES", "120"))
TALLY = {"chunks": 0, "fallbacks": 0, "traces": 0}


def python_path(raw: list, path, monkeypatch) -> C.RawColumns:
    """decode_events with the native reader switched off: the Python path alone."""
    with monkeypatch.context() as m:
        m.setattr(glue, "native_module", lambda: None)
        return C.decode_events(raw, path)


@pytest.mark.parametrize("path", TRACES, ids=lambda p: str(p.relative_to(p.parents[1])))
def test_recorded_trace_same_columns(path, monkeypatch):
    raw = raw_events(path)
    expected = python_path(raw, path, monkeypatch)
    got, chunks, fallbacks = decode_counting(raw, path, monkeypatch)
    assert_same(got, expected)
    TALLY["chunks"] += chunks
    TALLY["fallbacks"] += fallbacks
    TALLY["traces"] += 1


def test_recorded_traces_answered_natively():
    """Runs after the parametrized test, in the worker that ran (most of) it (xdist hands out contiguous runs of
    tests first): kineto's plain traces are answered natively, all but a few chunks (a chunk that falls back
    is correct, only slower)."""
    if not TALLY["traces"]:
        pytest.skip("the per-trace test did not run in this process")
    print(f"\nnative chunk reader: {TALLY['traces']} traces, {TALLY['chunks']} chunks, "
          f"{TALLY['fallbacks']} fell back to the Python path")
    assert TALLY["fallbacks"] <= TALLY["chunks"] // 20


# -- targeted cases ----------------------------------------------------------------------------------------

_raw_list = msgspec.json.Decoder(list[msgspec.Raw])


def _both(events_json: bytes):
    """(native result or None, Python columns or the exception the Python path raised)."""
    try:
        count = len(_raw_list.decode(events_json))
    except msgspec.MsgspecError:   # not an array of JSON values: the Python path raises below
        count = None
    capacity = len(events_json) if count is None else count
    nat = C.RawColumns(capacity)
    got = add_chunk_native(nat, events_json, count)
    if got is not None:
        nat.n += got.kept
        nat.op_args = _store(got)
    py = C.RawColumns(capacity)
    try:
        ref = C.python_chunk(py, events_json, capacity if count is None else count)
    except Exception as exc:   # any exception: the native path must not have answered
        return got, exc, nat
    py.n += ref.kept
    py.op_args = _store(ref)
    return got, py, nat


def _store(chunk: DecodedChunk) -> C.OpArgsStore | None:
    if chunk.arg_rows is None:
        return None
    offsets = np.zeros(len(chunk.arg_lengths) + 1, dtype=np.int64)
    np.cumsum(chunk.arg_lengths, out=offsets[1:])
    table = np.empty((len(chunk.arg_lengths) // 4, 5), dtype=np.int64)
    table[:, :4] = offsets[:-1].reshape(-1, 4)
    table[:, 4] = offsets[4::4]
    return C.OpArgsStore(rows=chunk.arg_rows, offsets=table, blob=chunk.arg_blob)


def _check(events_json: bytes, answered: bool | None = None):
    got, py, nat = _both(events_json)
    if isinstance(py, Exception):
        assert got is None, f"native answered where the Python path raised {py!r}"
    elif got is not None:
        assert_same(nat, py)
    if answered is not None:
        assert (got is not None) == answered, events_json
    return got, py, nat


KERNEL = (b'{"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 4.5, "dur": 3, '
          b'"args": {"correlation": 7, "External id": 1, "device": 0, "stream": 7, "grid": [1, 2, 3]}}')


@pytest.mark.parametrize("chunk, answered", [
    (b"[" + KERNEL + b"]", True),
    (b'[{"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "x"}}, ' + KERNEL + b"]", True),
    (b'[{"ph": "X", "name": "a\\u00e9\\ud83d\\ude00\\n\\"\\/", "pid": "a b", "tid": -3}]', True),
    (b'[{"ph": "\\u0058", "cat": "fl\\u006fw", "name": "x"}]', True),   # escaped values are decoded
    (b'[{"ph": "X", "ts": null, "dur": -0.0, "args": null}]', True),
    (b'[{"ph": "X", "args": {"Input Dims": [[1, 2]], "Input type": ["float"], "Concrete Inputs": ["", "1"], '
     b'"Input Strides": [[2, 1]]}}]', True),
    (b'[{"ph": "X", "args": {"Input dims": [[3]], "Input type": ""}}]', True),
    (b'[{"ph": "X", "args": {"bytes": "8192", "stream": "0x0", "Addr": "-12", "device": "007"}}]', True),
    (b'[{"ts": 1, "ts": 2}]', False),                         # a repeated key
    (b'[{"args": {"stream": 1, "stream": 2}}]', False),
    (b'[{"na\\u006de": "x"}]', False),                       # an escaped key
    (b'[{"name": 5}]', False),                               # a number for a name
    (b'[{"ts": "5"}]', False),
    (b'[{"ts": 9007199254740993}]', False),                  # an int ts beyond 2**53
    (b'[{"ts": 1e400}]', False),                             # beyond the double range (msgspec refuses it)
    (b'[{"pid": 1.0}]', False),
    (b'[{"args": {"External id": -1}}]', False),
    (b'[{"args": {"External id": 1.5}}]', False),
    (b'[{"args": {"External id": 9223372036854775808}}]', False),
    (b'[{"args": {"External id": "12"}}]', False),
    (b'[{"args": [1]}]', False),
    (b'[{"args": {"stream": " 7"}}]', False),                # a text float() reads but that is not plain
    (b'[{"args": {"stream": "1e3"}}]', False),
    (b'[{"args": {"Addr": "5"}}, {"args": {"Addr": 9007199254740993}}]', False),   # text + an int > 2**53
    (b'[{"args": {"Addr": 9007199254740993}}]', True),       # without a text: exact int64
    (b'[{"name": "\\ud800"}]', False),                       # a lone surrogate (msgspec refuses it)
    (b'[{"name": "a\xffb"}]', False),                        # invalid UTF-8
    (b'[{"name": "a\x01b"}]', False),                        # a raw control character
    (b'[{"zz": [1, {"a": [true, null, -1.5e-3]}], "ph": "i"}]', True),
    (b'[{"zz": 01}]', False),
    (b'[{"cat": ["kernel"]}]', False),
    (b'[{"ph": true}]', False),
    (b"[]", True),
])
def test_targeted(chunk, answered):
    _check(chunk, answered)


def test_values_decoded_exactly():
    got, py, nat = _check(b'[{"ph": "X", "cat": "c", "name": "a\\u00e9\\ud83d\\ude00\\t", "pid": -5, '
                          b'"tid": "t", "ts": 1718312345678.123, "dur": 1e-5}]', True)
    assert nat.name.values == ["a\u00e9\U0001F600\t"]
    assert nat.pid.values == ["-5"]
    assert nat.ts[0] == 1718312345678.123 and nat.dur[0] == 1e-5
    assert nat.complete[0]


# -- (b) random events ---------------------------------------------------------------------------------------

_PHASES = ["X", "M", "s", "f", "t", "b", "e", "n", "i", "C", "x", ""]
_CATS = ["kernel", "cpu_op", "ac2g", "flow", "cuda_runtime", "python_function", "Flow", ""]

_chars = st.one_of(st.characters(max_codepoint=0x7F), st.characters(blacklist_categories=("Cs",)),
                   st.sampled_from(['"', "\\", "/", "\n", "\t", "\x00", "\x1f", "\u2028", "\U0001F600"]))
# Not valid in a JSON string (msgspec refuses them): a lone surrogate escaped or as UTF-8 bytes, a raw
# control character, bytes that are not UTF-8, an escape that does not exist or is cut short.
_INVALID = [b"\\ud800", b"\\udc00", b"\\ud83dx", b"\xed\xa0\x80", b"\x01", b"\xff", b"\xc0\xaf", b"\\x",
            b"\\u12"]


@st.composite
def json_text(draw, choices=None) -> bytes:
    """A JSON string with random escaping: raw UTF-8, short escapes, \\uXXXX (pairs for astral characters);
    one time in 25 something that is not valid."""
    if choices is not None and draw(st.booleans()):
        text = draw(st.sampled_from(choices))
    else:
        text = draw(st.text(_chars, max_size=8))
    rng = random.Random(draw(st.integers(0, 2**32)))   # how each character is written: one draw, not one each
    out = bytearray(b'"')
    for ch in text:
        cp = ord(ch)
        mode = rng.randrange(4)
        if ch in '"\\' or cp < 0x20:
            out += json.dumps(ch).encode()[1:-1] if mode < 2 else f"\\u{cp:04x}".encode()
        elif mode == 0 and cp >= 0x80:
            out += json.dumps(ch).encode()[1:-1]   # \\uXXXX, a surrogate pair for an astral character
        elif mode == 1 and cp < 0x10000:
            out += f"\\u{cp:04X}".encode()
        elif mode == 2 and ch == "/":
            out += b"\\/"
        else:
            out += ch.encode("utf-8")
    if rng.randrange(25) == 0:
        out.insert(rng.randrange(1, len(out) + 1), 0)
        at = out.index(0, 1)
        out[at:at + 1] = rng.choice(_INVALID)
    out += b'"'
    return bytes(out)


_numbers = st.one_of(
    st.integers(-10, 10**6),
    st.integers(-(2**64), 2**64),
    st.sampled_from([0, -0, 2**53, 2**53 + 1, -(2**53) - 1, 2**63 - 1, 2**63, -(2**63), 10**30]),
    st.floats(allow_nan=False, allow_infinity=False),
    st.floats(min_value=0, max_value=1e16).map(lambda f: round(f, 3)),
)


@st.composite
def json_number(draw) -> bytes:
    v = draw(_numbers)
    form = draw(st.integers(0, 6))
    if isinstance(v, float):
        if form == 0:
            return f"{v:.17e}".encode()
        if form == 1:
            return f"{v:E}".encode()
        if form == 2 and math.isfinite(v) and v == int(v) and abs(v) < 1e20:
            return f"{int(v)}.0e0".encode()
        return repr(v).encode()
    if form == 0 and v == 0:
        return b"-0"
    if form == 1:
        return f"{v}e0".encode()
    if form == 2:
        return f"{v}.000".encode()
    return str(v).encode()


_scalar = st.one_of(
    json_number(), json_text(), st.sampled_from([b"null", b"true", b"false"]),
    json_text(["8192", "0x0", "-5", " 5", "1e3", "", "0x", "1_000", "inf", "12345678901234567"]),
    st.sampled_from([b"1e400", b"-1e400", b"1e-400", b"0.1e1", b"123456789012345678901234.5"]))


def _containers(inner):
    return st.one_of(inner, inner, st.lists(inner, max_size=3).map(lambda xs: b"[" + b", ".join(xs) + b"]"),
                     st.lists(st.tuples(json_text(["a", "b"]), inner), max_size=3).map(
                         lambda kv: b"{" + b",".join(k + b":" + v for k, v in kv) + b"}"))


ANY_VALUE = _containers(_containers(_scalar))   # any JSON value, nested up to two levels


@st.composite
def json_object(draw, values: dict) -> bytes:
    """An object of keys from `values` (key -> strategy of its JSON value), now and then a key repeated."""
    chosen = draw(st.lists(st.sampled_from(sorted(values)), max_size=len(values)))
    if draw(st.integers(0, 4)):   # mostly without repeats (repeats: the native path says None)
        chosen = list(dict.fromkeys(chosen))
    ws = draw(st.sampled_from([b"", b" ", b"\n  "]))
    parts = [json.dumps(k).encode() + b":" + ws + draw(values[k]) for k in chosen]
    return b"{" + ws + (b"," + ws).join(parts) + ws + b"}"


@st.composite
def _weighted(draw, plain, other, weight: int) -> bytes:
    return draw(other if draw(st.integers(0, weight)) == 0 else plain)


def _mostly(plain, weight: int = 4):
    """A `plain` value `weight` times in `weight + 1`, else any JSON value."""
    return _weighted(plain, ANY_VALUE, weight)


_ID_TEXT = st.integers(0, 2**40).map(lambda v: str(v).encode())
_ARG_VALUES = {k: _mostly(_ID_TEXT) for k in (
    "External id", "correlation", "Python id", "Python parent id", "graph node id", "graphNodeId", "Addr",
    "Bytes", "Device Type", "Device Id", "device", "stream", "bytes")}
_ARG_VALUES.update({"kernel": _mostly(json_text(["gemm", "k"])), "Ev Idx": ANY_VALUE, "grid": ANY_VALUE,
                    **{k: ANY_VALUE for k in ("Input Dims", "Input dims", "Input type", "Input Strides",
                                              "Concrete Inputs")}})
json_args = json_object(_ARG_VALUES)
_EVENT_VALUES = {
    "ph": _mostly(json_text(_PHASES)),
    "cat": _mostly(json_text(_CATS)),
    "name": _mostly(json_text(["aten::mm", "gemm"])),
    "pid": _mostly(st.one_of(st.integers(-5, 2**40).map(lambda v: str(v).encode()), json_text(["1", "a"]))),
    "tid": _mostly(st.one_of(st.integers(-5, 2**40).map(lambda v: str(v).encode()), json_text(["1", "a"]))),
    "ts": _mostly(json_number()),
    "dur": _mostly(json_number()),
    "args": _mostly(json_args, 8),
    "id": ANY_VALUE, "bp": ANY_VALUE, "s": ANY_VALUE,
}
json_event = _weighted(json_object(_EVENT_VALUES), ANY_VALUE, 30)   # now and then not an object


@settings(max_examples=FUZZ_EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(json_event, min_size=1, max_size=6))
def test_random_events(events):
    _check(b"[" + b",".join(events) + b"]")


@settings(max_examples=FUZZ_EXAMPLES // 2, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(["X", "i", "M"]), json_text(["aten::mm", "k", "cudaLaunchKernel"]),
                          st.integers(0, 3), st.integers(0, 2**45), st.floats(0, 1e13).map(lambda f: round(f, 3))),
                min_size=1, max_size=30))
def test_random_plain_events_answered(events):
    """Events of the plain kind (any names, escapes included, valid): always answered, and exact."""
    chunk = b"[" + b",".join(
        b'{"ph": "%s", "name": %s, "pid": %d, "tid": 1, "ts": %s, "dur": 1.5, "args": {"External id": %d}}'
        % (ph.encode(), name, pid, repr(ts).encode(), eid) for ph, name, pid, eid, ts in events) + b"]"
    try:
        msgspec.json.decode(chunk)
    except msgspec.DecodeError:   # a name drawn invalid on purpose
        return
    _check(chunk, True)


# -- (c) damaged buffers never crash -------------------------------------------------------------------------

def _sample_chunk() -> bytes:
    for path in TRACES:
        raw = raw_events(path)
        if len(raw) > 50:
            return b"[" + b",".join(bytes(r) for r in raw[:200]) + b"]"
    return b"[" + b",".join([KERNEL] * 50) + b"]"


def test_truncated_and_damaged_buffers():
    chunk = _sample_chunk()
    assert native.decode_chunk(chunk) is not None
    cuts = list(range(0, min(len(chunk), 3000))) + random.Random(1).sample(range(len(chunk)), 300)
    for cut in cuts:
        for buf in (chunk[:cut], bytearray(chunk[:cut]), memoryview(chunk)[:cut]):
            try:
                got = native.decode_chunk(buf)
            except ValueError:
                continue
            assert got is None or cut == len(chunk), cut
    rng = random.Random(2)
    for _ in range(2000):
        damaged = bytearray(chunk[:4000])
        for _ in range(rng.randint(1, 4)):
            damaged[rng.randrange(len(damaged))] = rng.randrange(256)
        native.decode_chunk(bytes(damaged))   # None, a result or ValueError: never a crash
    for junk in (b"", b"[", b"]", b"[{", b'[{"', b'[{"ph', b'[{"ph":', b'[{"ph":"X"', b"[" * 100000,
                 b'[{"a":' + b"[" * 300 + b"]" * 300 + b"}]", b"\x00" * 10):
        assert native.decode_chunk(junk) is None
    with pytest.raises(TypeError):
        native.decode_chunk("[]")


def test_events_read_in_place_from_any_start_never_crash():
    """decode_events_at and skip_events (the streamed reader's calls) on an event array cut anywhere and read
    from any byte: None, an answer or ValueError, never a crash (tests/test_event_stream.py checks their
    answers; `make test-native-asan` runs this under AddressSanitizer). Where both answer, they agree on where
    the events end."""
    array = _sample_chunk()[1:]   # the elements after the array's '['
    rng = random.Random(3)
    bounds, at, status = [0], 0, 0   # just after each ',' between elements (where the stream resumes)
    while status == 0:
        status, at, _, _ = native.skip_events(array, at, 1, at == 0)
        bounds.append(at)
    starts = bounds[:60] + [1, len(array) - 1] + rng.sample(range(len(array)), 300)
    answered = 0
    for start in starts:
        for cut in (len(array), rng.randint(start, len(array))):
            buf = array[:cut]
            for max_events, first in ((1, True), (3, False), (1 << 20, True)):
                try:
                    got = native.decode_events_at(buf, start, max_events, first)
                    skipped = native.skip_events(buf, start, max_events, first)
                except ValueError:
                    assert start > cut
                    continue
                if got is not None and skipped is not None:
                    assert got[:2] == skipped[:2], (start, cut, max_events)
                    answered += 1
    assert answered > 100
    for bad in ((b"[]", -1, 1, True), (b"[]", 3, 1, True), (b"[]", 0, 0, True)):
        with pytest.raises(ValueError):
            native.decode_events_at(*bad)
        with pytest.raises(ValueError):
            native.skip_events(*bad)
