"""What the loader derives beside a table's columns (kernlint.trace.table.Derived: the CUDA-graph attribution,
the op arguments, the Python frame tree) travels wherever the table's rows go; the indexes computed from the
columns (TableCaches) are dropped when what they were computed from is replaced.

The rule cases used to drop the graph data: a what-if case (`slowdown`) checked a table made anew from the
copied columns, and the case runner's table cache, evicting a table, emptied its derived data while that table
was still one of the traces of the case being loaded (a folder of three traces or more). The replays then lost
their capture labels (`graph replay 2`, not `graph replay 2 of capture 1`) and their attribution warnings.
"""
from __future__ import annotations

import dataclasses
import pickle
import shutil

import msgspec
import numpy as np
import pytest

from conftest import FIXTURES
from kernlint import cases
from kernlint.rules.loader import load_rules
from kernlint.trace.graphs import graph_replays
from kernlint.trace.kinds import category_mask, is_kind
from kernlint.trace.load import load_trace
from kernlint.trace.runs import run_identity
from kernlint.trace.scopes import ScopeIndex
from kernlint.trace.table import Derived, EventTable

GRAPHS = FIXTURES / "traces" / "gpu-graphs"
REPLAY = GRAPHS / "graph-new-ones-nostack-replay.pt.trace.json.gz"
CAPTURE = GRAPHS / "graph-new-ones-nostack-capture.pt.trace.json.gz"
# KL001's case on it expects every finding's scope to name the capture: `graph replay N of capture M`.
CASE = "gpu-graph-replay-new-ones-no-stacks-with-capture"
RULES = load_rules()


@pytest.fixture
def graph_case():
    found = [c for c in cases.load_cases(FIXTURES / "cases") if c.spec.name == CASE]
    assert len(found) == 1 and found[0].spec.trace and found[0].spec.capture
    return found[0]


@pytest.fixture
def table():
    return load_trace(REPLAY, captures=[CAPTURE])


def _facts(t: EventTable) -> tuple:
    stats = graph_replays(t)
    return (stats.as_dict(), dict(stats.labels), t.derived.frame_tree.notes(),
            t.derived.op_args.blob, t.derived.op_args.rows.tolist())


def test_the_loaded_table_has_its_graph_attribution(table):
    stats = graph_replays(table)
    assert stats.replays == 3 and stats.attributed_kernels == stats.kernels and set(stats.labels.values())
    assert isinstance(table.derived, Derived) and table.derived.graph_replays is stats


def test_a_what_if_case_keeps_the_graph_attribution(graph_case):
    """`slowdown` checks the case's table with its kernels scaled: the same rows, so the same captures."""
    slowed = dataclasses.replace(graph_case, spec=msgspec.structs.replace(graph_case.spec, slowdown=1.0))
    result = cases.evaluate_case(slowed, slowed.trace_path(FIXTURES), RULES, FIXTURES)
    assert result.ok, result.problems   # each scope still names its capture


def test_the_slowed_table_is_the_same_trace_with_other_durations(table):
    slowed = cases._slowed(table, 2.0, None)
    assert _facts(slowed) == _facts(table)
    kernels = table.columns["kind"] == "kernel"
    assert np.allclose(slowed.columns["dur"][kernels], 2 * table.columns["dur"][kernels])
    assert slowed.caches is not table.caches


def test_a_case_of_three_traces_keeps_the_graph_attribution_of_each(tmp_path, graph_case):
    """The case runner keeps the last two tables read: loading a folder of three evicts the first while it is
    still one of the case's traces. The eviction clears its caches, not its derived data."""
    for i in range(3):
        shutil.copy(REPLAY, tmp_path / f"replay{i}.pt.trace.json.gz")
    cases._RECENT_TABLES.clear()
    spec = msgspec.structs.replace(graph_case.spec, findings=3 * graph_case.spec.findings)
    result = cases.evaluate_case(dataclasses.replace(graph_case, spec=spec), tmp_path, RULES, FIXTURES)
    assert result.ok, result.problems
    loaded = [cases._loaded(p, [CAPTURE]) for p in sorted(tmp_path.iterdir())]
    assert all(graph_replays(t).labels for t in loaded)


def test_a_pickled_table_carries_its_derived_data_not_its_caches(table):
    index = ScopeIndex.of(table)   # holds a weak reference to its table: never pickled
    assert table.caches.scope_index is index
    copy = pickle.loads(pickle.dumps(table))
    assert _facts(copy) == _facts(table)
    assert copy.caches.scope_index is None and ScopeIndex.of(copy) is not index
    assert copy.meta == table.meta and np.array_equal(copy.columns["launcher"], table.columns["launcher"])


def test_a_relabelled_table_keeps_its_derived_data_and_recomputes_what_names_it(table):
    assert run_identity(table).path == str(REPLAY)
    table.meta = dataclasses.replace(table.meta, path="label")
    assert run_identity(table).path == "label"
    assert graph_replays(table).replays == 3


def test_a_frame_put_in_place_drops_the_caches_and_keeps_the_derived_data(table):
    before = _facts(table)
    index = ScopeIndex.of(table)
    table.frame = table.frame.copy()
    assert table.caches.scope_index is None and ScopeIndex.of(table) is not index
    assert _facts(table) == before


def test_other_rows_are_not_given_the_derived_data_of_a_table(table):
    with pytest.raises(ValueError, match="rows"):
        table.with_columns(table.columns.take(np.arange(3)))
    with pytest.raises(TypeError, match="Derived"):
        EventTable(table.columns, table.meta, {"graph_replays": None})


def test_kind_and_category_masks_are_computed_once_per_table(table):
    columns = table.columns
    ops = is_kind(columns, "op")
    assert is_kind(columns, "op") is ops and not ops.flags.writeable
    assert np.array_equal(ops, columns["kind"] == "op")
    assert np.array_equal(is_kind(columns, "kernel", "memcpy"), np.isin(columns["kind"], ["kernel", "memcpy"]))
    fills = category_mask(columns, ("fill",))
    assert category_mask(columns, ["fill"]) is fills and np.array_equal(fills, columns["category"] == "fill")
    columns["kind"] = columns["kind"].copy()   # a column put in its place: asked again
    assert is_kind(columns, "op") is not ops and np.array_equal(is_kind(columns, "op"), ops)


def test_the_device_properties_are_read_typed_once(tmp_path):
    """Issue 39, item 6 (device reads): `deviceProperties` is read into typed DeviceInfo entries; the run identity,
    the baseline environment and the HTML report take the GPU model from them, never from dict lookups of
    their own. A name that is not a string, or a count that is not a whole number, is no value."""
    import json

    from kernlint.baseline.environment import environment_of
    from kernlint.report.views import _gpu
    from kernlint.trace.table import DeviceInfo

    trace = tmp_path / "t.pt.trace.json"
    props = [{"id": 0, "name": " NVIDIA H200 ", "totalGlobalMem": 150 << 30, "computeMajor": 9, "computeMinor": 0,
              "numSms": 132},
             {"id": "1", "name": 7, "totalGlobalMem": -1, "computeMajor": 9, "numSms": True}]
    trace.write_text(json.dumps({"deviceProperties": props, "traceEvents": [
        {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": 1.0, "dur": 1.0}]}))
    table = load_trace(trace)
    assert table.meta.devices == (DeviceInfo(0, "NVIDIA H200", 150 << 30, (9, 0), 132), DeviceInfo())
    assert table.meta.gpu_models == ("NVIDIA H200",)
    assert run_identity(table).gpu_models == ("NVIDIA H200",)
    assert environment_of(None, table)["gpu"] == "NVIDIA H200"
    assert _gpu(table) == "NVIDIA H200"
