"""The nesting walk in C (kernlint.trace._kineto_chunk.nest_walk) against its definition, the Python walk of
kernlint.trace.nesting: the same innermost event of each kind and the same outermost op, for random intervals
(nested or not, NaN, zero and negative durations, shared starts and ends) and for whole tables of recorded
traces, the one here whose Python frames do not nest included. Skipped where the extension is not built.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kernlint.trace import load
from kernlint.trace import nesting as T
from kernlint.trace.native_chunk import native_module, nest_walk_native
from test_event_stream import assert_same_table
from test_native_chunk import FUZZ_EXAMPLES, TRACES

CUT_STACKS = Path(__file__).parent / "data" / "cut-stacks-cpu.pt.trace.json.gz"
pytestmark = pytest.mark.skipif(native_module() is None, reason="kernlint.trace._kineto_chunk is not built")

_time = st.one_of(st.integers(0, 40).map(float), st.just(float("nan")))
_duration = st.one_of(st.integers(-2, 30).map(float), st.just(0.0), st.just(float("nan")))


@settings(max_examples=FUZZ_EXAMPLES, deadline=None)
@given(st.lists(st.tuples(_time, _duration, st.integers(0, 15)), min_size=1, max_size=40),
       st.permutations(list(T._NEST_STACKS)), st.integers(1, len(T._NEST_STACKS)), st.booleans())
def test_walk_in_c_is_the_python_walk(events, kinds, how_many, shuffle):
    n = len(events) + 3   # rows outside `part` stay untouched
    ts = np.full(n, 7.0)
    dur = np.zeros(n)
    ts[:len(events)] = [e[0] for e in events]
    dur[:len(events)] = [e[1] for e in events]
    end = ts + dur
    kinds = tuple(kinds[:how_many])
    kind_of = {k: np.array([bool(e[2] >> i & 1) for e in events] + [True] * 3)
               for i, k in enumerate(T._NEST_STACKS)}
    part = np.arange(len(events), dtype=np.int64)
    if shuffle:
        part = part[::-1].copy()
    results = []
    for walk in ("c", "python"):
        out = {k: np.full(n, -1, dtype=np.int64) for k in T._NEST_STACKS}
        top = np.full(n, -1, dtype=np.int64)
        if walk == "c":
            assert nest_walk_native(part, ts, end, dur, [kind_of[k] for k in kinds], [out[k] for k in kinds],
                                    top, kinds.index("op") if "op" in kinds else -1)
        else:
            T._nest_thread_walk_python(part, ts, end, dur, kind_of, out, top, kinds)
        results.append((out, top))
    (out_c, top_c), (out_py, top_py) = results
    for k in T._NEST_STACKS:
        assert np.array_equal(out_c[k], out_py[k]), k
    assert np.array_equal(top_c, top_py)


def _without_c(monkeypatch):
    monkeypatch.setattr(T, "nest_walk_native", lambda *a, **k: False)


@pytest.mark.parametrize("path", [CUT_STACKS] + [p for p in TRACES if p.stat().st_size > 100_000],
                         ids=lambda p: p.name)
def test_recorded_table_walked_in_c_is_walked_in_python(path, monkeypatch):
    walked = []
    real = T._nest_thread_walk

    def counted(part, *args):
        walked.append(len(part))
        return real(part, *args)

    monkeypatch.setattr(T, "_nest_thread_walk", counted)
    with_c = load.load_trace(path)
    _without_c(monkeypatch)
    assert_same_table(with_c, load.load_trace(path))
    if path == CUT_STACKS:
        assert walked and max(walked) > 1000   # its main thread's Python frames do not nest: walked


def test_bad_arguments_are_errors_not_crashes():
    module = native_module()
    ts = np.zeros(4)
    flags = (np.zeros(4, dtype=bool),)
    outs = (np.full(4, -1, dtype=np.int64),)
    top = np.full(4, -1, dtype=np.int64)
    with pytest.raises(ValueError, match="out of range"):
        module.nest_walk(np.array([0, 9], dtype=np.int64), ts, ts, ts, flags, outs, top, 0)
    with pytest.raises(ValueError, match="wrong item size or length"):
        module.nest_walk(np.array([0], dtype=np.int64), ts, ts[:3], ts, flags, outs, top, 0)
    with pytest.raises(ValueError, match="one per kind"):
        module.nest_walk(np.array([0], dtype=np.int64), ts, ts, ts, flags, (), top, 0)
    with pytest.raises((ValueError, BufferError, TypeError)):   # a read-only output
        ro = np.full(4, -1, dtype=np.int64)
        ro.flags.writeable = False
        module.nest_walk(np.array([0], dtype=np.int64), ts, ts, ts, flags, (ro,), top, 0)
