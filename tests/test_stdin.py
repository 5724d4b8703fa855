"""`kernlint check -`: a trace on standard input (issue 38). Its errors name it `<stdin>`, never the temporary
file it is kept in, and reading stops as soon as it passes --max-trace-bytes (memory: one chunk)."""
from __future__ import annotations

import gzip
import sys

import pytest

from conftest import FIXTURES, kernlint_in
from kernlint.cli import checking
from kernlint.errors import TraceError


class _EndlessStdin:
    """Standard input that never ends, counting what was read from it."""

    def __init__(self):
        self.read_bytes = 0
        self.buffer = self

    def read(self, n: int = -1) -> bytes:
        assert n >= 0, "a read of everything would never end"
        self.read_bytes += n
        return b" " * n


def test_reading_stops_just_past_the_limit(monkeypatch):
    endless = _EndlessStdin()
    monkeypatch.setattr(sys, "stdin", endless)
    limit = 3 * checking.STDIN_CHUNK + 5
    with pytest.raises(TraceError) as info, checking.stdin_as_file(["-"], limit):
        pytest.fail("checked a trace past the limit")
    assert endless.read_bytes == limit + 1
    assert info.value.one_line() == (f"<stdin>: standard input: more than --max-trace-bytes ({limit} bytes); not "
                                     "checked (read no further)")


@pytest.mark.parametrize("data, problem", [
    (b'{"traceEvents": []}', "holds no trace events"),
    (gzip.compress(b"not json"), "not valid JSON"),
    (b"", "standard input is empty: no trace to check"),
], ids=["no-events", "gzip-of-text", "empty"])
def test_an_error_about_standard_input_names_it_stdin(tmp_path, data, problem):
    done = kernlint_in(tmp_path, "check", "-", "--isolated", stdin=data)
    assert done.returncode == 2 and done.stderr.startswith(f"kernlint: error: <stdin>: {problem}"), done.stderr
    assert "kernlint-stdin-" not in done.stderr and len(done.stderr.splitlines()) == 1


def test_a_trace_on_standard_input_is_still_checked(tmp_path):
    trace = (FIXTURES / "traces" / "gpu" / "placeholder_new_ones.pt.trace.json.gz").read_bytes()
    done = kernlint_in(tmp_path, "check", "-", "--isolated", "--format", "concise", stdin=trace)
    assert done.returncode == 1 and ": KL001 [error]" in done.stdout
