"""The tables the C reader (kernlint/trace/_kineto_chunk.c) shares with the Python path, as the extension
exports them (`tables()`, the very arrays its decoding reads), asserted against the Python side's: RawEvent's
fields, schema.ARG_FIELDS and how RawArgs types each argument, the phases and categories left out, the column
order native_chunk reads, and which argument fills each column, with what default and stand-in text, as the
Python path (columns.python_chunk) decodes them. A key added on one side only fails here, not on the first
trace that carries it. Skipped where the extension is not built.
"""
from __future__ import annotations

import importlib
import json
from typing import Any

import msgspec
import numpy as np
import pytest

from kernlint.trace import columns as C
from kernlint.trace import native_chunk as glue
from kernlint.trace.schema import ARG_FIELDS, RawArgs, RawEvent, Scalar

native = glue.native_module()
pytestmark = pytest.mark.skipif(native is None, reason="kernlint.trace._kineto_chunk is not built")


@pytest.fixture(scope="module")
def tables() -> dict:
    return native.tables()   # SystemError where a key matcher of the C file disagrees with its table


def python_columns(*events: dict) -> C.RawColumns:
    """`events` decoded by the Python path alone."""
    out = C.RawColumns(len(events))
    chunk = C.python_chunk(out, json.dumps(list(events)).encode(), len(events))
    out.n += chunk.kept
    out.op_args = None if chunk.arg_rows is None else chunk
    return out


def test_event_keys_are_raw_events_fields(tables):
    assert tables["event_keys"] == RawEvent.__struct_fields__


def test_argument_keys_are_arg_fields(tables):
    assert {field: raw for field, raw, _ in tables["arg_keys"]} == ARG_FIELDS
    assert len(tables["arg_keys"]) == len(ARG_FIELDS)


def test_argument_kinds_are_how_raw_args_types_them(tables):
    types: dict[str, Any] = {f.name: f.type for f in msgspec.structs.fields(RawArgs)}
    assert set(types) == set(ARG_FIELDS)
    id_sources = {c[k] for c in tables["id_columns"] for k in (1, 2)} - {None}
    for field, raw, kind in tables["arg_keys"]:
        expected = ("raw" if types[field] is msgspec.Raw else "scalar" if types[field] == Scalar
                    else "id" if raw in id_sources else "text")
        assert kind == expected, field
    # the one text argument fills the launch_kernel column
    assert [f for f, _, k in tables["arg_keys"] if k == "text"] == ["launch_kernel"]
    got = python_columns({"ph": "X", "args": {ARG_FIELDS["launch_kernel"]: "gemm"}})
    assert got.launch_kernel.values == ["gemm"]


def test_skipped_phases_and_categories(tables):
    assert frozenset(tables["skipped_phases"]) == C.SKIPPED_PHASES
    assert len(tables["skipped_phases"]) == len(C.SKIPPED_PHASES)
    assert all(len(p) == 1 for p in tables["skipped_phases"])   # the C side matches one letter
    assert tables["skipped_cats"] == C.SKIPPED_CATS
    events = [{"ph": p} for p in tables["skipped_phases"]] + [{"ph": "X", "cat": c} for c in tables["skipped_cats"]]
    assert python_columns(*events).n == 0
    complete = python_columns({"ph": tables["complete_phase"]}, {"ph": "i"})
    assert complete.complete[:2].tolist() == [True, False]


def test_column_order_is_native_chunks(tables):
    assert tuple(c[0] for c in tables["int_columns"]) == glue.INT_FIELDS == C.RawColumns.INT_FIELDS
    assert tuple(c[0] for c in tables["id_columns"]) == glue.ID_FIELDS == tuple(C.RawColumns(1).ids)
    assert tables["text_columns"] == glue.TEXT_FIELDS
    assert tables["flags"] == ("complete", "bad_ts", "bad_dur") + tuple(f"bad_{t}" for t in glue._BAD_TEXT)


def _int_values(out: C.RawColumns, row: int = 0) -> dict[str, int]:
    values = {f: int(out.int_column(f)[row]) for f in C.RawColumns.INT_FIELDS}
    for f in out.ids:
        ids, _ = out.id_column(f)
        values[f] = int(ids[row])
    return values


@pytest.mark.parametrize("raw", sorted(ARG_FIELDS.values()))
def test_which_column_each_argument_fills(tables, raw):
    """An argument alone fills exactly the columns whose table names it, first or as the fallback."""
    columns = tables["int_columns"] + tables["id_columns"]
    got = _int_values(python_columns({"ph": "X", "args": {raw: 5}}))
    assert {name for name, v in got.items() if v == 5} == {c[0] for c in columns if raw in c[1:3]}


def test_defaults_and_which_argument_wins(tables):
    columns = tables["int_columns"] + tables["id_columns"]
    expected = {c[0]: c[3] for c in columns}
    assert _int_values(python_columns({"ph": "X"})) == expected                 # no args object
    assert _int_values(python_columns({"ph": "X", "args": {}})) == expected     # no argument
    nulls = {raw: None for raw in ARG_FIELDS.values()}
    assert _int_values(python_columns({"ph": "X", "args": nulls})) == expected  # null is absent
    for name, first, second, _ in columns:
        if second is None:
            continue
        assert _int_values(python_columns({"args": {first: 5, second: 7}}))[name] == 5, name
        assert _int_values(python_columns({"args": {first: None, second: 7}}))[name] == 7, name


def test_stand_in_texts(tables):
    assert tables["bad_text"][glue.TEXT_FIELDS.index("pid")] == C.BAD_THREAD
    assert tables["bad_text"][glue.TEXT_FIELDS.index("tid")] == C.BAD_THREAD
    got = python_columns({})
    for which, text in zip(tables["text_columns"], tables["bad_text"]):
        column = getattr(got, which)
        assert column.values[column.codes(1)[0]] == text, which


def test_shape_arguments_order(tables):
    names = ("input_dims", "input_types", "concrete_inputs", "input_strides")
    assert [first for first, _ in tables["shape_args"]] == [ARG_FIELDS[n] for n in names]
    assert (C.OpArgsStore.DIMS, C.OpArgsStore.TYPES, C.OpArgsStore.CONCRETE, C.OpArgsStore.STRIDES) == (0, 1, 2, 3)
    shapes = {raw for pair in tables["shape_args"] for raw in pair if raw is not None}
    assert shapes == {raw for field, raw, kind in tables["arg_keys"] if kind == "raw"}
    every = {raw: [k] for k, raw in enumerate(sorted(shapes))}   # each argument's own value
    for without_first in (False, True):
        args = dict(every)
        if without_first:
            for first, second in tables["shape_args"]:
                if second is not None:
                    del args[first]
        chunk = C.python_chunk(C.RawColumns(1), json.dumps([{"ph": "X", "args": args}]).encode(), 1)
        lengths = np.cumsum(np.concatenate([[0], chunk.arg_lengths]))
        fields = [chunk.arg_blob[lengths[k]:lengths[k + 1]] for k in range(4)]
        for k, (first, second) in enumerate(tables["shape_args"]):
            given = second if without_first and second is not None else first
            assert json.loads(fields[k]) == every[given], (k, given)


def _nest_stacks() -> tuple[str, ...]:
    for name in ("kernlint.trace.nesting", "kernlint.trace.table"):
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        if hasattr(module, "_NEST_STACKS"):
            return module._NEST_STACKS
    raise AssertionError("no _NEST_STACKS: where does the nesting walk name its kinds now?")


def test_nest_walk_takes_every_kind_the_table_nests(tables):
    assert len(_nest_stacks()) <= tables["max_kinds"]
