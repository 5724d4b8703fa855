"""Multi-process capture: `kernlint run --nproc N` launches the workload under torchrun.

`launch()` runs `python -m torch.distributed.run --standalone --nproc-per-node N -m kernlint.rank_worker
...`; every rank (kernlint/rank_worker.py) initialises torch.distributed (NCCL on GPUs, gloo on the CPU),
builds the workload, and writes its own trace (with `distributedInfo.rank`) into the one new run folder
that `launch()` made for this invocation.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import torch

from kernlint.capture.runner import new_run_dir
from kernlint.errors import ConfigError

# NVLink multicast stays off for every process: a program using it can take shared GPUs out of service.
SAFE_ENV = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}


def launch(target: str, nproc: int, device: str, out_dir: Path, run_name: str, *, warmup: int = 1,
           steps: int = 1, timeout_s: float = 900.0) -> list[Path]:
    """Run `target` on `nproc` ranks; return the traces written (one a rank, sorted by path).

    All ranks write into one new run folder, `out_dir/run_name/<UTC time>-<random>/`, that this call creates
    (kernlint.capture.runner.new_run_dir): a second launch into the same `out_dir` gets a folder of its own.
    """
    if device == "cuda" and torch.cuda.device_count() < nproc:
        raise ConfigError(None, f"--nproc {nproc} on cuda needs {nproc} GPUs; torch sees "
                                f"{torch.cuda.device_count()}")
    run_dir = new_run_dir(out_dir, run_name)
    env = {**os.environ, **SAFE_ENV, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nnodes=1",
           f"--nproc-per-node={nproc}", "-m", "kernlint.rank_worker", "--kl-target", target,
           "--kl-device", device, "--kl-out", str(out_dir), "--kl-run", run_name, "--kl-run-dir", str(run_dir),
           "--kl-warmup", str(warmup), "--kl-steps", str(steps)]
    try:
        try:
            proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            raise ConfigError(None, f"torchrun with {nproc} ranks did not finish in {timeout_s:.0f} s") from None
        if proc.returncode != 0:
            raise ConfigError(None, f"torchrun with {nproc} ranks failed (exit {proc.returncode}): "
                                    f"{_first_error(proc.stderr + proc.stdout)}")
    except ConfigError:
        _remove_if_empty(run_dir)
        raise
    traces = sorted(run_dir.glob("*.pt.trace.json.gz"))
    if len(traces) != nproc:
        raise ConfigError(run_dir, f"expected {nproc} new traces, found {len(traces)}")
    return traces


def _remove_if_empty(folder: Path) -> None:
    """A run folder that a failed launch left empty is removed (one with files in it is kept to look at)."""
    try:
        folder.rmdir()
    except OSError:
        pass


def _first_error(text: str) -> str:
    """The line that says what went wrong in a worker's output (its exception), else the last line."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for ln in lines:
        if ln.startswith("kernlint-rank-error:"):
            return ln.split(":", 1)[1].strip()
    for ln in reversed(lines):
        if "Error" in ln and not ln.startswith(("Traceback", "File ")):
            return ln
    return lines[-1] if lines else "no output"
