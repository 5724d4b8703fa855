"""pandas only where a user asks for a DataFrame (issues 22 and 26): `kernlint check`, `check --baseline`,
`baseline record` and the HTML report run on the event table's numpy columns, in a fresh interpreter that
never imports pandas or scipy. `EventTable.frame` is still the DataFrame of the Python API."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fresh_interpreter import CHECKOUT_ENV, TINY_TRACE
from kernlint.trace.kinds import KINDS
from kernlint.trace.load import load_trace
from kernlint.trace.scopes import add_scope_column

REPO = Path(__file__).resolve().parents[1]
# Runs the commands one after the other in one interpreter, then names the heavy modules it imported.
_PROBE = """
import json, sys
from kernlint.cli import main
codes = []
for args in json.loads(sys.argv[1]):
    try:
        main(args)
    except SystemExit as exc:
        codes.append(exc.code)
heavy = sorted(m for m in sys.modules if m.split(".")[0] in ("pandas", "scipy"))
print(json.dumps({"exit": codes, "heavy": heavy}), file=sys.stderr)
"""


def _heavy_modules(commands: list[list[str]], cwd: Path) -> tuple[list[int], list[str]]:
    proc = subprocess.run([sys.executable, "-c", _PROBE, json.dumps(commands)], cwd=cwd, env=CHECKOUT_ENV,
                          capture_output=True, text=True, timeout=300)
    found = json.loads(proc.stderr.strip().splitlines()[-1])
    return found["exit"], found["heavy"]


@pytest.fixture
def tiny_trace(tmp_path) -> Path:
    path = tmp_path / "tiny.pt.trace.json"
    path.write_text(json.dumps(TINY_TRACE))
    return path


def test_check_imports_neither_pandas_nor_scipy(tiny_trace, tmp_path):
    codes, heavy = _heavy_modules([["check", "--isolated", str(tiny_trace)]], tmp_path)
    assert codes == [0] and heavy == []


def test_baselines_and_the_html_report_import_neither_pandas_nor_scipy(tiny_trace, tmp_path):
    baseline = tmp_path / "baseline.json"
    fixture = REPO / "fixtures" / "traces" / "gpu" / "block_regressed.pt.trace.json.gz"
    codes, heavy = _heavy_modules([
        ["baseline", "record", str(tiny_trace), "-o", str(baseline), "--isolated"],
        ["check", "--isolated", str(tiny_trace), "--baseline", str(baseline)],
        ["check", "--isolated", str(fixture), "--format", "html", "-o", str(tmp_path / "report.html")],
    ], tmp_path)
    assert codes == [0, 0, 1] and heavy == []


def test_the_frame_is_made_once_from_the_columns_and_again_after_a_change(tiny_trace):
    table = load_trace(tiny_trace)
    frame = table.frame
    assert frame is table.frame   # kept
    assert frame.index.name == "row" and list(frame.index) == [0, 1, 2]
    assert isinstance(frame["kind"].dtype, pd.CategoricalDtype) and tuple(frame["kind"].cat.categories) == KINDS
    assert frame["kind"].tolist() == table.columns["kind"].tolist() == ["op", "runtime", "kernel"]
    assert list(frame.columns) == list(table.columns.names)
    assert frame["source"].dtype == object and frame["source"].tolist() == [None, None, None]
    add_scope_column(table)
    assert table.frame is not frame and "scope" in table.frame   # a new column: a new frame
    assert table.frame["scope"].dtype == object


def test_columns_are_read_only(tiny_trace):
    table = load_trace(tiny_trace)
    with pytest.raises(ValueError):
        table.columns["dur"][0] = 1.0
    assert table.columns["launcher"].tolist() == [-1, -1, 1] and not table.columns["launcher"].flags.writeable


def test_rows_taken_and_codes_kept(tiny_trace):
    columns = load_trace(tiny_trace).columns
    part = columns.take(np.array([2, 0]))
    assert len(part) == 2 and part.names == columns.names and part["name"].tolist() == ["gemm", "aten::mm"]
    codes, names = columns.coded("name")
    assert names[codes].tolist() == columns["name"].tolist() == ["aten::mm", "cudaLaunchKernel", "gemm"]
    threads = columns.coded("thread")[1].tolist()
    assert threads == sorted(threads) == ["0:7", "1:1"]


def test_a_frame_put_in_place_is_what_the_checks_read(tiny_trace):
    table = load_trace(tiny_trace)
    frame = table.frame.copy()
    table.frame = frame
    frame.loc[frame["kind"] == "kernel", "dur"] = 30.0   # changed after it was put in place: still read
    assert table.frame is frame
    assert np.array_equal(table.columns["dur"], [5.0, 2.0, 30.0])
    assert table.has_device_events and len(table) == 3
