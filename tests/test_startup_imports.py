"""Start-up: a command imports what it uses and nothing else (issue 26). `kernlint check` of a small trace
in a fresh interpreter leaves out the process pool, the capture modules, torch, the formats not asked for,
and (for a format that renders text itself) rich's console; the format asked for is imported. The names
table compiles nothing on import."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from fresh_interpreter import CHECKOUT_ENV, TINY_TRACE

# What `kernlint check` never needs for one trace with --jobs 1: the pool (multiprocessing,
# concurrent.futures' processes), the capture modules and torch (run, audit, baseline record --workload),
# the schema validator of the tests, Dask and the Dask backend's own imports.
NEVER_FOR_CHECK = ("multiprocessing", "concurrent.futures.process", "torch", "jsonschema", "distributed",
                   "dask", "kernlint.capture", "kernlint.capture.child", "kernlint.capture.runner",
                   "kernlint.capture.profiler", "kernlint.capture.distributed", "kernlint.capture.metadata",
                   "kernlint.audit", "kernlint.workloads")

_PROBE = """
import json, sys
from kernlint.cli import main
try:
    main(sys.argv[1:])
except SystemExit as exc:
    code = exc.code
print(json.dumps({"exit": code, "modules": sorted(sys.modules)}), file=sys.stderr)
"""


def _modules_after(args: list[str], cwd) -> tuple[int, set[str]]:
    """`kernlint ARGS` in a fresh interpreter: its exit code and the modules imported by its end."""
    proc = subprocess.run([sys.executable, "-c", _PROBE, *args], cwd=cwd, env=CHECKOUT_ENV, capture_output=True,
                          text=True, timeout=300)
    last = proc.stderr.strip().splitlines()[-1]
    found = json.loads(last)
    return found["exit"], set(found["modules"])


@pytest.fixture
def tiny_trace(tmp_path):
    path = tmp_path / "tiny.pt.trace.json"
    path.write_text(json.dumps(TINY_TRACE))
    return path


@pytest.mark.parametrize("fmt, module", [("text", "kernlint.report.text_format"),
                                         ("json", "kernlint.report.json_format"),
                                         ("sarif", "kernlint.report.sarif_format")])
def test_check_of_a_small_trace_imports_only_what_it_uses(tiny_trace, tmp_path, fmt, module):
    code, modules = _modules_after(["check", "--isolated", "--format", fmt, str(tiny_trace)], tmp_path)
    assert code == 0
    assert module in modules, f"--format {fmt} did not import its renderers ({module})"
    others = {m for m in modules if m.startswith("kernlint.report.") and m.endswith("_format")} - {module}
    if fmt == "json":
        others.discard("kernlint.report.text_format")   # json's --statistics reuses text's; not asked here
    assert not others, f"--format {fmt} imported other formats: {sorted(others)}"
    present = sorted(m for m in NEVER_FOR_CHECK if m in modules)
    assert not present, f"kernlint check imported {present}"
    # The parallel backends are registered (a registry), but the pool and Dask's helpers wait for a run.
    assert "kernlint.parallel.processes" in modules
    if fmt != "text":   # text renders rich tables; json and sarif are strings, and nothing went to stderr
        assert "rich.console" not in modules


def test_check_with_jobs_imports_the_pool(tmp_path, tiny_trace):
    """The other side: with --jobs 2 over two traces the processes backend runs, and so imports its pool."""
    second = tmp_path / "second.pt.trace.json"
    second.write_text(json.dumps(TINY_TRACE))
    code, modules = _modules_after(["check", "--isolated", "--jobs", "2", "--format", "json", str(tiny_trace),
                                    str(second)], tmp_path)
    assert code == 0
    assert {"multiprocessing", "concurrent.futures.process"} <= modules


def test_the_audit_timeout_default_is_the_capture_modules_own():
    """`audit --timeout`'s default is written in the CLI (so that the option does not import
    kernlint.capture.child); it must stay the limit the audit itself defaults to."""
    from kernlint.capture.child import AUDIT_TIMEOUT_S
    from kernlint.cli import main

    [timeout] = [p for p in main.commands["audit"].params if p.name == "timeout_s"]
    assert timeout.default == AUDIT_TIMEOUT_S


def test_the_names_table_compiles_nothing_on_import():
    code = ("import re._compiler as c, sys\ncalls = []\nreal = c.compile\n"
            "c.compile = lambda *a, **k: calls.append(a[0]) or real(*a, **k)\n"
            "import kernlint.trace.names\nprint(len(calls))")
    out = subprocess.run([sys.executable, "-c", code], env=CHECKOUT_ENV, capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "0"


_LAZY_PROBE = """
import re, sys
import kernlint.trace.names as names
lazy = {n: v for n, v in vars(names).items() if isinstance(v, names._Lazy)}
assert {"LIBRARY_FRAME", "GRAPH_LAUNCH", "GRAPH_CAPTURE_BEGIN", "GRAPH_CAPTURE_END", "PROFILER_FRAME",
        "TRITON_LAUNCH", "_FRAME", "_SYNCING_DEVICE_EVENT"} <= set(lazy), sorted(lazy)
for name, value in lazy.items():
    assert value._name == name, (name, value._name)
    expected = re.compile(value._source)
    assert value.pattern == expected.pattern and value.flags == expected.flags
    assert getattr(names, name) is value._compiled, name   # bound in place after its first use
tables = (names._KERNEL_TABLE, names._RUNTIME_TABLE, names._OP_NAMESPACE_TABLE, names._OP_TABLE)
for table in tables:
    assert table.first_match("\\x00", "none") == "none" or table is names._RUNTIME_TABLE
    assert all(isinstance(p, re.Pattern) for p in table._compiled)
print("ok")
"""


def test_the_names_tables_lazy_patterns_are_the_patterns_they_stand_for():
    """Each expression of the names table that is compiled on first use is bound under its own name,
    compiles to what re.compile gives, and after its first use is that compiled pattern itself; a name that no
    line of a table matches has compiled the whole table."""
    out = subprocess.run([sys.executable, "-c", _LAZY_PROBE], env=CHECKOUT_ENV, capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr
