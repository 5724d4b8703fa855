"""KERNLINT_NATIVE=0 makes kernlint ignore a built native reader (kernlint.trace.native_chunk): every trace
is then read whole and decoded by the Python path, as where none is built (`make test-no-native` runs the
trace tests so), with the same table. Skipped where the extension is not built or already switched off."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from kernlint.trace.native_chunk import native_module

REPO = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.skipif(native_module() is None, reason="kernlint.trace._kineto_chunk is not built")

PROBE = """
import kernlint.trace.columns as c, kernlint.trace.load as l, kernlint.trace.native_chunk as n
calls = []
f = c.add_chunk_native
def counted(*a, **k):
    got = f(*a, **k); calls.append(got is not None); return got
c.add_chunk_native = counted
table = l.load_trace(%r)
print(n.native_module() is not None, len(calls), sum(calls), len(table))
"""
TRACE = REPO / "fixtures" / "traces" / "gpu" / "placeholder_new_ones.pt.trace.json.gz"   # read whole: chunks


def _probe(value: str | None) -> list[str]:
    env = {k: v for k, v in os.environ.items() if k != "KERNLINT_NATIVE"}
    if value is not None:
        env["KERNLINT_NATIVE"] = value
    done = subprocess.run([sys.executable, "-c", PROBE % str(TRACE)], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


@pytest.mark.parametrize("value", ["0", "off", " False "])
def test_switched_off_every_chunk_takes_the_python_path(value):
    used, chunks, native_chunks, rows = _probe(value)
    assert used == "False" and int(chunks) >= 1 and native_chunks == "0"
    assert rows == _probe(None)[3]


def test_unset_or_any_other_value_uses_it():
    for value in (None, "1", ""):
        used, chunks, native_chunks, _ = _probe(value)
        assert used == "True" and native_chunks == chunks != "0", value
