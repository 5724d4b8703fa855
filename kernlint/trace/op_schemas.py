"""Which arguments of an aten op are `out=` arguments, read from a table shipped with kernlint.

A trace records an op's name and, per argument, whether it was a tensor; the op's schema says which of
them it writes. The table (`aten_out_arguments.json`) is made from torch's operator schemas by
`scripts/make_op_schema_table.py`, so checking a trace gives the same verdicts with or without torch
installed; tests/test_op_schemas.py compares it with the installed torch.

Table form: {"torch": version, "ops": {op name: {argument mask: [out positions]}}}. A mask has one letter
per argument, "T" a tensor and "-" anything else. Only masks for which every overload of that arity and mask
agrees on a non-empty set of out positions are listed: an op or mask not listed has no single answer.
"""
from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources

TABLE_FILE = "aten_out_arguments.json"


def argument_mask(tensor_args: tuple[bool, ...]) -> str:
    return "".join("T" if t else "-" for t in tensor_args)


@lru_cache(maxsize=1)
def _table() -> dict[str, dict[str, tuple[int, ...]]]:
    data = json.loads(resources.files(__package__).joinpath(TABLE_FILE).read_text(encoding="utf-8"))
    return {name: {mask: tuple(outs) for mask, outs in masks.items()} for name, masks in data["ops"].items()}


def table_torch_version() -> str:
    """The torch release the shipped table was made from."""
    return json.loads(resources.files(__package__).joinpath(TABLE_FILE).read_text(encoding="utf-8"))["torch"]


def out_positions(name: str, tensor_args: tuple[bool, ...]) -> frozenset[int] | None:
    """Positions of the `out=` arguments of the overload of `name` whose arguments are tensors exactly where
    the trace recorded tensors; None when no single overload says (or it has none)."""
    outs = _table().get(name, {}).get(argument_mask(tensor_args))
    return frozenset(outs) if outs else None


def table_from_schemas(schemas) -> dict[str, dict[str, list[int]]]:
    """The "ops" part of the table from torch's operator schemas (`torch._C._jit_get_all_schemas()`). Used by
    the generator script and the test; checking never calls it."""
    import torch  # only the generator and its test come here

    tensor_type = torch._C.TensorType.get()
    answers: dict[str, dict[str, set[tuple[int, ...]]]] = {}
    for s in schemas:
        if not s.name.startswith("aten::"):
            continue
        mask = "".join("T" if a.type == tensor_type else "-" for a in s.arguments)
        outs = tuple(i for i, a in enumerate(s.arguments)
                     if a.is_out or (a.name == "out" and a.alias_info is not None and a.alias_info.is_write))
        answers.setdefault(s.name, {}).setdefault(mask, set()).add(outs)
    table: dict[str, dict[str, list[int]]] = {}
    for name in sorted(answers):
        masks = {mask: list(next(iter(found))) for mask, found in sorted(answers[name].items())
                 if len(found) == 1 and next(iter(found))}
        if masks:
            table[name] = masks
    return table
