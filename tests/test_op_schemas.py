"""The shipped table of aten out= arguments (kernlint/trace/op_schemas.py) against the installed torch, so
that dead-fill (KL101) gives the same verdict whether or not torch is installed."""
from __future__ import annotations

import torch

from kernlint.trace.op_schemas import _table, out_positions, table_from_schemas, table_torch_version


def _live_out_positions(name: str, tensor_args: tuple[bool, ...]) -> frozenset[int] | None:
    """The answer straight from torch's schemas for one operator: every overload with tensors exactly where
    the trace has them must agree on one non-empty set of out positions."""
    tensor_type = torch._C.TensorType.get()
    answers = set()
    for s in torch._C._jit_get_schemas_for_operator(name):
        if len(s.arguments) != len(tensor_args):
            continue
        if any((a.type == tensor_type) != t for a, t in zip(s.arguments, tensor_args)):
            continue
        answers.add(frozenset(i for i, a in enumerate(s.arguments)
                              if a.is_out or (a.name == "out" and a.alias_info is not None and a.alias_info.is_write)))
    return (answers.pop() or None) if len(answers) == 1 else None


def test_the_shipped_table_is_the_installed_torchs():
    live = table_from_schemas(torch._C._jit_get_all_schemas())
    shipped = {name: {m: list(o) for m, o in masks.items()} for name, masks in _table().items()}
    if torch.__version__.split("+")[0] == table_torch_version():
        assert shipped == live, "regenerate it: python scripts/make_op_schema_table.py"
    else:   # another torch (the GPU machine's): the ops both know must give the same answers
        common = shipped.keys() & live.keys()
        assert len(common) > 500
        assert {n: shipped[n] for n in common} == {n: live[n] for n in common}


def test_every_overload_of_every_aten_op_answers_as_torch_does():
    tensor_type = torch._C.TensorType.get()
    masks = {(s.name, tuple(a.type == tensor_type for a in s.arguments))
             for s in torch._C._jit_get_all_schemas() if s.name.startswith("aten::")}
    assert len(masks) > 2000
    wrong = [(n, m) for n, m in sorted(masks) if out_positions(n, m) != _live_out_positions(n, m)]
    assert not wrong, wrong[:5]


def test_known_answers():
    assert out_positions("aten::bmm", (True, True, True)) == {2}        # bmm.out(self, mat2, *, out)
    assert out_positions("aten::bmm", (True, True)) is None             # bmm(self, mat2): no out
    assert out_positions("aten::amax", (True, False, False, True)) == {3}
    assert out_positions("aten::not_an_op", (True,)) is None
