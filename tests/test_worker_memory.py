"""A worker frees each table before it loads the next (kernlint.parallel.work.check_path): a table and its
cached indexes form a cycle, which check_path breaks so that the table goes with its last reference; the
collector, which runs by object count and not by bytes, is not waited for (and is run at once only after large
tables, as a safety net: a full collection in a large process costs as much as checking a small trace)."""
from __future__ import annotations

import gc
import weakref

import pytest

from conftest import FIXTURES
from kernlint.parallel import work
from kernlint.rules.loader import load_rules
from kernlint.trace import load as trace_load

TRACE = FIXTURES / "traces" / "gpu" / "block_regressed.pt.trace.json.gz"


@pytest.mark.parametrize("threshold", [1, 10**9])
def test_a_checked_table_is_freed_before_the_next_is_loaded_without_the_collector(monkeypatch, threshold):
    loaded = []
    real = trace_load.load_trace

    def load(*args, **kwargs):
        table = real(*args, **kwargs)
        loaded.append(weakref.ref(table))
        return table

    monkeypatch.setattr(trace_load, "load_trace", load)
    monkeypatch.setattr(work, "_COLLECT_AFTER_EVENTS", threshold)
    rules = load_rules()
    gc.disable()   # only check_path's own collection may free it
    try:
        checked = work.check_path(str(TRACE), rules, 1 << 30, False)
        assert not isinstance(checked, work.Failure), checked
        assert loaded[0]() is None
    finally:
        gc.enable()
