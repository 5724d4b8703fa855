"""An independent client: torch-tb-profiler's own parser (RunProfileData) reads the traces kernlint writes
and replays, and sees the same kernels and ops kernlint sees."""
from __future__ import annotations

from collections import Counter

import pytest
from torch_tb_profiler.profiler.data import RunProfileData
from torch_tb_profiler.profiler.trace import EventTypes

from conftest import FIXTURES, load_program
from kernlint.capture.runner import capture
from kernlint.trace.load import load_trace


def _tb_events(path, tmp_path):
    profile = RunProfileData.parse("worker0", "span0", str(path), str(tmp_path))
    profile.analyze()
    return profile


def test_tb_profiler_parses_a_trace_kernlint_captured(tmp_path):
    result = capture(load_program("placeholder_new_ones").build("cpu"), tmp_path / "logs", "client", device="cpu")
    profile = _tb_events(result.trace, tmp_path)
    tb_ops = Counter(e.name for e in profile.events if e.type == EventTypes.OPERATOR)
    f = load_trace(result.trace).frame
    ours = Counter(f.loc[f["kind"] == "op", "name"])
    assert tb_ops == ours
    assert tb_ops["aten::new_ones"] == 1 and tb_ops["aten::fill_"] >= 1


@pytest.mark.parametrize("name", ["placeholder_new_ones", "dummy_init_old", "block_clean"])
def test_tb_profiler_sees_the_same_kernels_in_the_h200_fixtures(name, tmp_path):
    path = FIXTURES / "traces" / "gpu" / f"{name}.pt.trace.json.gz"
    profile = _tb_events(path, tmp_path)
    assert profile.has_kernel
    tb_kernels = Counter(e.name for e in profile.events if e.type == EventTypes.KERNEL)
    f = load_trace(path).frame
    ours = Counter(f.loc[f["kind"] == "kernel", "name"])
    assert tb_kernels == ours and sum(ours.values()) > 0
