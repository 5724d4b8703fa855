"""Multi-process runs on the CPU with the gloo backend, two ranks (kernlint starts them; CI runs these)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from kernlint.capture.distributed import SAFE_ENV
from kernlint.cli import main
from kernlint.trace.load import load_trace

TESTS = Path(__file__).resolve().parent


def run_tp(target: str, out: Path):
    result = CliRunner().invoke(main, ["run", target, "--nproc", "2", "--device", "cpu", "--out", str(out),
                                       "--format", "json", "-o", str(out / "report.json")])
    report = json.loads((out / "report.json").read_text()) if (out / "report.json").exists() else None
    return result, report


@pytest.fixture(scope="module")
def fixed(tmp_path_factory):
    return run_tp("fp8-tp-mlp", tmp_path_factory.mktemp("tp"))


def test_each_rank_writes_its_trace_with_its_rank(fixed, tmp_path):
    result, report = fixed
    assert result.exit_code == 0, result.output
    traces = [t for t in report["traces"] if t["rank"] is not None]
    assert sorted(t["rank"] for t in traces) == [0, 1]
    for t in traces:
        meta = load_trace(t["path"]).meta
        assert meta.distributed["world_size"] == 2 and meta.distributed["backend"] == "gloo"
        run_meta = json.loads(next(Path(t["path"]).parent.glob(f"{Path(t['path']).name.split('.')[0]}.*.run.json")
                                   ).read_text())
        assert run_meta["rank"] == t["rank"] and run_meta["world_size"] == 2


def test_balanced_ranks_pass_the_cross_rank_rules(fixed):
    _, report = fixed
    (group,) = [t for t in report["traces"] if t["rank"] is None]
    assert group["ranks"] == [0, 1]
    status = {r["rule"]: r["status"] for r in group["rules"]}
    assert status["KL003"] == "passed" and status["KL004"] == "not-applicable"
    assert report["findings"] == []


def test_a_sync_on_one_rank_is_attributed_to_that_rank(tmp_path):
    result, report = run_tp("fp8-tp-mlp-rank1-sync", tmp_path)
    assert result.exit_code == 1
    by_rule = {}
    for f in report["findings"]:
        by_rule.setdefault(f["rule"], []).append(f)
    assert {f["rank"] for fs in by_rule.values() for f in fs} == {1}
    (sync,) = by_rule["KL004"]
    assert sync["event"] == "aten::item" and "workloads.py" in sync["source"]
    assert {f["event"] for f in by_rule["KL003"]} == {"aten::abs", "aten::amax", "aten::item"}


def test_tensor_parallel_output_matches_the_unsharded_layer(tmp_path):
    """Two gloo ranks started as plain processes that meet at a file store (torchrun's own process would
    import torch a third time only to start them)."""
    store = (tmp_path / "store").as_uri()
    procs = [subprocess.Popen([sys.executable, str(TESTS / "tp_numerics_worker.py")], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True,
                              env={**os.environ, **SAFE_ENV, "OMP_NUM_THREADS": "1", "RANK": str(rank),
                                   "LOCAL_RANK": str(rank), "WORLD_SIZE": "2", "KERNLINT_TEST_STORE": store})
             for rank in range(2)]
    try:
        outs = [p.communicate(timeout=300) for p in procs]
    finally:
        for p in procs:
            p.kill()
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, out[-2000:] + err[-2000:]
        assert out.count("rank-relative-error") == 1


def test_nproc_failure_is_one_line(tmp_path):
    """More ranks on cuda than this machine has GPUs: a one-line usage error, whatever the machine. Which
    error is known beforehand: with no CUDA at all the device is refused; with some GPUs, the rank count."""
    import torch

    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    nproc = max(2, gpus + 1)   # always one rank too many
    result = CliRunner().invoke(main, ["run", "fp8-tp-mlp", "--nproc", str(nproc), "--device", "cuda", "--out",
                                       str(tmp_path)])
    assert result.exit_code == 2, result.output
    (line,) = result.output.strip().splitlines()
    if gpus == 0:   # CI and the developers' machines: CPU-only torch
        assert "--device cuda: torch sees no CUDA GPU here" in line, line
    else:
        assert f"--nproc {nproc} on cuda needs {nproc} GPUs; torch sees {gpus}" in line, line
    assert "Traceback" not in result.output


def test_distributed_workload_without_nproc_is_a_usage_error(tmp_path):
    result = CliRunner().invoke(main, ["run", "fp8-tp-mlp", "--device", "cpu", "--out", str(tmp_path)])
    assert result.exit_code == 2 and "--nproc" in result.output


def test_a_failing_rank_stops_the_others_and_says_why(tmp_path):
    """Rank 1 fails while rank 0 waits for it at the barrier: the launch ends at once, naming rank 1's error."""
    user = tmp_path / "half_broken.py"
    user.write_text("import torch.distributed as dist\n\n"
                    "def build(device):\n"
                    "    if dist.get_rank() == 1:\n"
                    "        raise RuntimeError('rank one broke')\n"
                    "    return lambda: None\n")
    result = CliRunner().invoke(main, ["run", f"{user}:build", "--nproc", "2", "--device", "cpu", "--out",
                                       str(tmp_path / "o")])
    assert result.exit_code == 2, result.output
    assert len(result.output.strip().splitlines()) == 1
    assert "rank 1" in result.output and "rank one broke" in result.output
