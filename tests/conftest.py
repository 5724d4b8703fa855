"""Shared test set-up: GPU-marked tests run only where CUDA exists (the H200 via the device tool)."""
from __future__ import annotations

import pytest
import torch


def pytest_collection_modifyitems(config, items):
    if torch.cuda.is_available():
        return
    skip_gpu = pytest.mark.skip(reason="needs a CUDA GPU; CI has none (run on the H200 with the device tool)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip_gpu)


import importlib.util
from pathlib import Path

from kernlint.capture.profiler import record_trace

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "fixtures"
PROGRAMS = FIXTURES / "programs"


def load_program(name: str):
    """Import fixtures/programs/NAME.py by path; `zoo/NAME` is fixtures/zoo/NAME.py (the regression zoo)."""
    path = FIXTURES / f"{name}.py" if name.startswith("zoo/") else PROGRAMS / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"kernlint_fixture_program_{name.replace('/', '_')}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def program_trace(tmp_path_factory):
    """Record a fixture program on the CPU (once per session) and return the trace path."""
    cache: dict[str, Path] = {}
    root = tmp_path_factory.mktemp("program_traces")

    def get(name: str) -> Path:
        if name not in cache:
            step = load_program(name).build("cpu")
            cache[name] = record_trace(step, root / f"{name.replace('/', '_')}.pt.trace.json.gz", device="cpu")
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
def incomplete_kl001(monkeypatch):
    """The engine, with KL001 made incomplete on every trace (as the engine does for damaged events)."""
    import kernlint.rules.engine as engine

    real = engine.combine_checked   # the reduce every check path (check_traces, the CLI's --jobs) ends in

    def combine_checked(checked, rules, **options):
        reports = real(checked, rules, **options)
        for report in reports:
            report.damage = ["3 kernel events without a launch (damaged)"]
            for o in report.outcomes:
                if o.rule == "KL001":
                    o.status, o.reason = "incomplete", "could not fully check: 3 kernel events without a launch"
        return reports

    monkeypatch.setattr(engine, "combine_checked", combine_checked)
