"""The dask backend on a real local cluster of two worker processes: the same reports as the serial path,
through `--scheduler ADDRESS` and `--backend dask`; without the extra, one line."""
from __future__ import annotations

import sys

import pytest
from click.testing import CliRunner

from conftest import FIXTURES
from kernlint.cli import main
from kernlint.errors import ConfigError, TraceError
from kernlint.parallel import check_paths
from kernlint.rules.engine import check_traces, combine_checked
from kernlint.rules.loader import load_rules
from kernlint.trace.load import DEFAULT_MAX_TRACE_BYTES, discover_traces, load_trace

RUNS = [FIXTURES / "traces" / "gpu-tp2-nccl", FIXTURES / "traces" / "cpu-gloo"]
RULES = load_rules()


@pytest.fixture(scope="module")
def cluster():
    distributed = pytest.importorskip("distributed")
    import logging

    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                                  silence_logs=logging.ERROR) as local:
        yield local


def test_a_two_worker_cluster_gives_the_serial_reports(cluster):
    files = discover_traces(RUNS).files
    expected = check_traces([load_trace(p) for p in files], RULES)
    checked = check_paths(files, RULES, max_bytes=DEFAULT_MAX_TRACE_BYTES, scheduler=cluster.scheduler_address)
    assert combine_checked(checked, RULES) == expected
    assert sum(1 for r in expected if r.ranks) == 7   # 4 NCCL runs, 3 gloo runs


def test_a_worker_error_on_the_cluster_is_the_same_typed_error(cluster, tmp_path):
    (tmp_path / "empty.json").write_text('{"traceEvents": [], "schemaVersion": 1}')
    files = [*discover_traces([RUNS[0] / "fp8-tp-mlp"]).files, tmp_path / "empty.json"]
    with pytest.raises(TraceError, match="empty.json: holds no trace events") as info:
        check_paths(files, RULES, max_bytes=DEFAULT_MAX_TRACE_BYTES, scheduler=cluster.scheduler_address)
    assert info.value.path == str(tmp_path / "empty.json")


def test_check_on_the_cluster_prints_what_the_serial_check_prints(cluster):
    args = ["check", str(RUNS[0]), "--format", "json", "--isolated"]
    serial = CliRunner().invoke(main, args, catch_exceptions=False)
    remote = CliRunner().invoke(main, [*args, "--scheduler", cluster.scheduler_address], catch_exceptions=False)
    assert serial.exit_code == remote.exit_code == 1 and serial.output == remote.output


def test_without_the_extra_the_dask_backend_is_one_line(monkeypatch):
    monkeypatch.setitem(sys.modules, "distributed", None)   # `import distributed` raises ImportError
    with pytest.raises(ConfigError, match=r"needs Dask distributed, which is not installed: pip install "
                                          r"'kernlint\[distributed\]'"):
        check_paths(discover_traces([RUNS[0] / "fp8-tp-mlp"]).files, RULES, max_bytes=DEFAULT_MAX_TRACE_BYTES,
                    jobs=2, backend="dask")
