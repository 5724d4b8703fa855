"""Issue 37, item 6e: KL003 compares ranks per op and place. On an 8-rank DLRM step every rank runs the same
selects at the same places, zero-duration ops nesting one way on a rank and the other way on another; when
another op really differs, the whole multisets differ too, and the selects were reported ("rank 0 issues 2
more aten::select than rank 1 (2 against 0)"). Fails on the code before the fix."""
from __future__ import annotations

from test_cross_rank import _ranks as _tp_ranks
from test_precision import _append_ops, _group


def test_ops_nested_differently_at_one_place_are_no_divergence_beside_a_real_one(tmp_path):
    """An add nested in a zero-duration sub on rank 1 and beside it on rank 0 is the same add at the same
    place; rank 0's extra mul is still a divergence."""
    ranks = _tp_ranks()
    _append_ops(ranks[0], [("aten::sub", 0, 0), ("aten::add", 0, 0), ("aten::mul", 10, 1)])
    _append_ops(ranks[1], [("aten::sub", 0, 0.001), ("aten::add", 0, 0)])   # add inside sub here
    kl003 = _group(tmp_path, ranks, ("KL003",))["KL003"]
    assert kl003.status == "failed"
    assert [f.message.split(" at ")[0] for f in kl003.findings] == ["rank 0 issues 1 more aten::mul"], kl003.findings
    assert "aten::add" in kl003.note and "nested differently" in kl003.note
