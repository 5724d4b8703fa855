"""The bad-input corpus (fixtures/corpus/corpus.toml): every defect of the reliability probe as a case with
its input, exit code and message. Each runs the CLI in a fresh process, as a user would (forked from a server
that imported kernlint and ran nothing: tests/fresh_cli.py)."""
from __future__ import annotations

import json
import os
import re
import time
import tomllib

import pytest

from conftest import FIXTURES
from corpus_inputs import BUILDERS
from fresh_cli import run_fresh

CASES = tomllib.loads((FIXTURES / "corpus" / "corpus.toml").read_text())["case"]
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def test_every_builder_is_used_and_every_case_has_a_builder():
    assert {c["input"] for c in CASES} == set(BUILDERS)


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_corpus_case(case, tmp_path):
    args = BUILDERS[case["input"]](tmp_path)
    env = {**os.environ, "COLUMNS": "400"}
    start = time.perf_counter()
    proc = run_fresh(args, timeout=case.get("seconds", 120) * 3, env=env, cwd=tmp_path)
    seconds = time.perf_counter() - start
    where = f"{case['name']}: exit {proc.returncode}\nstdout: {proc.stdout[-3000:]}\nstderr: {proc.stderr}"
    assert proc.returncode == case["exit"], where
    assert len(proc.stderr.splitlines()) <= 1, where
    if "stderr" in case:
        assert re.search(case["stderr"], proc.stderr), where
    if "stdout" in case:
        assert re.search(case["stdout"], proc.stdout, re.S), where
    if case.get("json"):
        json.loads(proc.stdout, parse_constant=lambda c: pytest.fail(f"{case['name']}: {c} in JSON"))
    if case.get("no_control_characters"):
        assert not _CONTROL.search(proc.stdout.replace("\n", "")), where
    assert "Traceback" not in proc.stdout + proc.stderr, where
    assert seconds < case.get("seconds", 120), f"{case['name']}: {seconds:.1f} s"
