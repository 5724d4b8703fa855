"""Shared test set-up: GPU-marked tests run only where CUDA exists (`pytest -m gpu` on a machine with one)."""
from __future__ import annotations

import pytest
import torch

# Helper modules whose asserts should read like a test's (imported by test files before pytest sees them).
pytest.register_assert_rewrite("wheel_build", "baseline_traces")


# The test files that take longest on the 2-core machine (seconds, measured 2026-12-01 with --durations=0):
# wheel_capture 27, cli_hygiene 31, run_and_audit 31, rule_cases 28, wheel_install 17, decode_traces 14,
# html_report 18, corpus 16, runs 14, distributed 13, parallel 12, pytest_plugin 11, graph_replays 11;
# fixtures_wheel 20 (2026-12-02).
LONGEST_FILES = ("test_cli_hygiene.py", "test_run_and_audit.py", "test_rule_cases.py", "test_wheel_capture.py",
                 "test_fixtures_wheel.py", "test_html_report.py", "test_wheel_install.py", "test_corpus.py",
                 "test_decode_traces.py", "test_runs.py", "test_distributed.py", "test_parallel.py",
                 "test_pytest_plugin.py", "test_graph_replays.py")


def pytest_collection_modifyitems(config, items):
    # The longest files first: pytest-xdist hands out tests in this order (and an idle worker steals the
    # rest), so the run does not end with one worker busy on a long file. Order only, never a result.
    def rank(item) -> int:
        name = item.path.name
        return LONGEST_FILES.index(name) if name in LONGEST_FILES else len(LONGEST_FILES)

    items.sort(key=rank)   # stable: each file keeps its order
    if torch.cuda.is_available():
        return
    skip_gpu = pytest.mark.skip(reason="needs a CUDA GPU: run `pytest -m gpu` on a machine with one")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip_gpu)


from pathlib import Path

from kernlint.capture.profiler import record_trace
from kernlint.checkout import import_path

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "fixtures"
PROGRAMS = FIXTURES / "programs"


def load_program(name: str):
    """Import fixtures/programs/NAME.py by path; `zoo/NAME` is fixtures/zoo/NAME.py (the regression zoo)."""
    path = FIXTURES / f"{name}.py" if name.startswith("zoo/") else PROGRAMS / f"{name}.py"
    return import_path(path, f"kernlint_fixture_program_{name.replace('/', '_')}")


def shared_temp_folder(tmp_path_factory, name: str) -> Path:
    """A folder of this session's temporary root that every pytest-xdist worker sees (each worker's own
    temporary folder lies inside that root), for what one worker makes and the others reuse."""
    import os

    base = tmp_path_factory.getbasetemp()
    folder = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / name
    folder.mkdir(exist_ok=True)
    return folder


@pytest.fixture(scope="session")
def program_trace(tmp_path_factory):
    """Record a fixture program on the CPU (once per session, whichever pytest-xdist worker needs it first: the
    others wait for it under a lock and read the same trace) and return the trace path."""
    import fcntl
    import os

    cache: dict[str, Path] = {}
    shared = shared_temp_folder(tmp_path_factory, "program_traces")
    mine = tmp_path_factory.mktemp("program_traces")

    def get(name: str) -> Path:
        if name not in cache:
            file_name = f"{name.replace('/', '_')}.pt.trace.json.gz"
            with open(shared / f"{file_name}.lock", "w") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)
                if not (shared / file_name).exists():   # recorded here, then put in place whole
                    step = load_program(name).build("cpu")
                    os.replace(record_trace(step, mine / file_name, device="cpu"), shared / file_name)
            cache[name] = shared / file_name
        return cache[name]

    return get


@pytest.fixture
def record(tmp_path):
    """Record any callable on the CPU into a fresh trace file."""
    counter = iter(range(1000))

    def run(fn, name: str | None = None) -> Path:
        return record_trace(fn, tmp_path / f"{name or 'trace'}{next(counter)}.pt.trace.json.gz", device="cpu",
                            warmup=0)

    return run


@pytest.fixture
def incomplete_kl001(tmp_path):
    """A real trace whose KL001 verdict is incomplete because of damage the loader detects.

    It is the recorded H200 trace of placeholder_new_ones (fixtures/traces/gpu: an `aten::new_ones` fill
    kernel launched before scale_1x128_kernel inside Fp8BlockLinearNewOnes, one KL001 finding) with the fill
    kernel's launch record (its cudaLaunchKernel) dropped, as when the profiler loses events. The fill
    kernel's correlation id then points to no runtime call, so kernlint cannot place it in the module: KL001
    would pass, and must instead say it could not fully check (1 device event with no launch inside the
    window). KL203, KL501 and KL701, which also read device events, are incomplete for the same reason; every
    other rule keeps its verdict (KL101 and KL401 pass, the rest are not applicable). Returns the path.
    """
    import gzip
    import json

    data = json.loads(gzip.decompress((FIXTURES / "traces" / "gpu" / "placeholder_new_ones.pt.trace.json.gz")
                                      .read_bytes()))
    events = data["traceEvents"]
    (fill,) = [e for e in events if e.get("cat") == "kernel" and "FillFunctor" in e["name"]]
    launches = [e for e in events if e.get("cat") in ("cuda_runtime", "cuda_driver")
                and (e.get("args") or {}).get("correlation") == fill["args"]["correlation"]]
    assert [e["name"] for e in launches] == ["cudaLaunchKernel"]   # the one call that launched the fill
    events.remove(launches[0])
    path = tmp_path / "lost_fill_launch.pt.trace.json"
    path.write_text(json.dumps(data))
    return path


def kernlint_in(cwd: Path, *args, stdin: bytes | str | None = None):
    """The CLI run in this process with `cwd` as the working directory (where a config or a suppressions file
    is found): a subprocess.CompletedProcess with text stdout and stderr apart. A fresh interpreter costs a
    second of imports per call; the tests that need one (signals, exit paths) spawn it themselves."""
    import os
    import subprocess

    from click.testing import CliRunner

    from kernlint.cli import main

    old = os.getcwd()
    os.chdir(cwd)
    try:
        result = CliRunner().invoke(main, [str(a) for a in args], input=stdin, catch_exceptions=False)
    finally:
        os.chdir(old)
    return subprocess.CompletedProcess(["kernlint", *map(str, args)], result.exit_code, result.stdout,
                                       result.stderr)


@pytest.fixture(scope="module")
def browser():
    """A headless Chromium for the HTML report tests (tests/browser.py), one per test module. Missing: the tests
    fail under KERNLINT_REQUIRE_BROWSER=1 (CI: `make browser` installs it first), else skip saying how to get it."""
    import os

    from browser import Browser, missing

    why = missing()
    if why and os.environ.get("KERNLINT_REQUIRE_BROWSER") == "1":
        pytest.fail(why)
    if why:
        pytest.skip(f"no browser for the HTML report tests: {why}")
    b = Browser()
    yield b
    b.close()
