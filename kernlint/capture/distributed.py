"""Multi-process capture: `kernlint run --nproc N` and the audit's tensor-parallel workloads run as N ranks.

`start_ranks()` spawns N processes `python -m kernlint.rank_worker ...` with the environment torchrun gives
its workers (RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE) and returns at once; `RankLaunch.wait()`
collects their traces. The ranks meet through a FileStore in a private temporary folder (no port to pick,
so none to race for). Spawning them directly, not under torchrun, saves torchrun's own process (a torch
import and its rendezvous, about a second or more before the first rank starts and after the last ends);
the ranks start at once, so the audit runs its other workloads while they import torch and profile. Every
rank (kernlint/rank_worker.py) initialises torch.distributed (NCCL on GPUs, gloo on the CPU), builds the
workload, and writes its own trace (with `distributedInfo.rank`) into the one new run folder made here.
"""
from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from kernlint.capture.child import SAFE_PATH
from kernlint.capture.runner import new_run_dir
from kernlint.device import Device
from kernlint.errors import ConfigError, WorkloadError
from kernlint.fileio import termination_raised

# NVLink multicast stays off for every process: a program using it can take shared GPUs out of service.
SAFE_ENV = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
_POLL_S = 0.02
_GRACE_S = 2.0   # after a rank fails, how long the others may take to end before they are stopped


def _gpu_count() -> int:
    import torch

    return torch.cuda.device_count()


class RankLaunch:
    """N rank processes running one target; `wait()` returns their traces (or raises, the ranks stopped)."""

    def __init__(self, target: str, nproc: int, device: str, out_dir: Path, run_name: str, *, warmup: int = 1,
                 steps: int = 1, timeout_s: float = 900.0, fixtures: Path | None = None):
        if Device.parse(device).is_gpu and _gpu_count() < nproc:
            raise ConfigError(None, f"--nproc {nproc} on cuda needs {nproc} GPUs; torch sees {_gpu_count()}")
        self.nproc, self.timeout_s = nproc, timeout_s
        self.run_dir = new_run_dir(out_dir, run_name)
        # The FileStore and each rank's output live here; removed when the launch ends.
        self._tmp = Path(tempfile.mkdtemp(prefix="kernlint-launch-"))
        env = {**os.environ, **SAFE_ENV, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"),
               "WORLD_SIZE": str(nproc), "LOCAL_WORLD_SIZE": str(nproc), "GROUP_RANK": "0"}
        cmd = [sys.executable, *SAFE_PATH, "-m", "kernlint.rank_worker", "--kl-target", target, "--kl-device", device,
               "--kl-out", str(out_dir), "--kl-run", run_name, "--kl-run-dir", str(self.run_dir),
               "--kl-warmup", str(warmup), "--kl-steps", str(steps),
               "--kl-init", (self._tmp / "store").as_uri()] + (["--kl-fixtures", str(fixtures)] if fixtures else [])
        self._procs: list[subprocess.Popen] = []
        self._logs = []
        self._start = time.monotonic()
        try:
            for rank in range(nproc):
                log = open(self._tmp / f"rank{rank}.log", "w+b")  # a file, not a pipe: nothing to drain
                self._logs.append(log)
                # A session of its own: stopping a rank ends what it started too (its process group).
                self._procs.append(subprocess.Popen(
                    cmd, env={**env, "RANK": str(rank), "LOCAL_RANK": str(rank)}, stdin=subprocess.DEVNULL,
                    stdout=log, stderr=subprocess.STDOUT, start_new_session=True))
        except BaseException:
            self.stop()
            _remove_if_empty(self.run_dir)
            raise

    def wait(self) -> list[Path]:
        """Every rank's trace, sorted by path. A rank that fails stops the others (they would wait for it)."""
        try:
            with termination_raised():   # SIGTERM / SIGHUP: the ranks are stopped on the way out, as after Ctrl-C
                failed = self._wait_all()
            if failed is not None:
                rank, code = failed
                raise WorkloadError(None, f"{self.nproc} ranks: rank {rank} failed (exit {code}): "
                                        f"{_first_error(self._output(rank))}")
        except BaseException:
            self.stop()
            _remove_if_empty(self.run_dir)
            raise
        finally:
            self._close()
        traces = sorted(self.run_dir.glob("*.pt.trace.json.gz"))
        if len(traces) != self.nproc:
            raise WorkloadError(self.run_dir, f"expected {self.nproc} new traces, found {len(traces)}")
        return traces

    def finished(self) -> bool:
        """Every rank has exited, or one has failed: wait() then returns at once (after a failure, within the
        grace the others get), without waiting for a rank's work."""
        codes = [p.poll() for p in self._procs]
        return all(code is not None for code in codes) or any(code not in (None, 0) for code in codes)

    def _wait_all(self) -> tuple[int, int] | None:
        """Poll until every rank has exited (None) or one failed ((rank, exit code))."""
        while True:
            codes = [p.poll() for p in self._procs]
            failed = [(rank, code) for rank, code in enumerate(codes) if code not in (None, 0)]
            if failed:
                # The cause, not a rank that only failed for losing it: a peer may have exited before the rank
                # that failed first has, so the others get a moment to end too, then the earliest failure wins.
                deadline = time.monotonic() + _GRACE_S
                while any(p.poll() is None for p in self._procs) and time.monotonic() < deadline:
                    time.sleep(_POLL_S)
                codes = [p.poll() for p in self._procs]
                failed = [(rank, code) for rank, code in enumerate(codes) if code not in (None, 0)]
                return min(failed, key=lambda f: self._failed_at(f[0]))
            if all(code == 0 for code in codes):
                return None
            if time.monotonic() - self._start > self.timeout_s:
                raise WorkloadError(None, f"{self.nproc} ranks did not finish in {self.timeout_s:.0f} s")
            time.sleep(_POLL_S)

    def _failed_at(self, rank: int) -> float:
        """When the rank failed: the time it wrote with its error, else (a crash) when its output ended."""
        found = re.search(r"^kernlint-rank-failed-at: ([0-9.]+)$", self._output(rank), re.MULTILINE)
        return float(found.group(1)) if found else os.fstat(self._logs[rank].fileno()).st_mtime

    def _output(self, rank: int) -> str:
        log = self._logs[rank]
        log.flush()
        log.seek(0)
        return log.read().decode("utf-8", "replace")

    def stop(self) -> None:
        """End every rank still running and what it started (its process group: SIGTERM, then SIGKILL), and
        clean up."""
        running = [p for p in self._procs if p.poll() is None]
        for p in running:
            _signal_group(p, signal.SIGTERM)
        deadline = time.monotonic() + 5.0
        for p in running:
            try:
                p.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                _signal_group(p, signal.SIGKILL)
                p.wait()
        self._close()

    def _close(self) -> None:
        for log in self._logs:
            log.close()
        shutil.rmtree(self._tmp, ignore_errors=True)


def start_ranks(target: str, nproc: int, device: str, out_dir: Path, run_name: str, *, warmup: int = 1,
                steps: int = 1, timeout_s: float = 900.0, fixtures: Path | None = None) -> RankLaunch:
    """Start `target` on `nproc` ranks and return at once; `.wait()` gives the traces.

    All ranks write into one new run folder, `out_dir/run_name/<UTC time>-<random>/`, that this call creates
    (kernlint.capture.runner.new_run_dir): a second launch into the same `out_dir` gets a folder of its own.
    """
    return RankLaunch(target, nproc, device, Path(out_dir), run_name, warmup=warmup, steps=steps,
                      timeout_s=timeout_s, fixtures=fixtures)


def launch(target: str, nproc: int, device: str, out_dir: Path, run_name: str, *, warmup: int = 1,
           steps: int = 1, timeout_s: float = 900.0, fixtures: Path | None = None) -> list[Path]:
    """Run `target` on `nproc` ranks; return the traces written (one a rank, sorted by path)."""
    return start_ranks(target, nproc, device, out_dir, run_name, warmup=warmup, steps=steps,
                       timeout_s=timeout_s, fixtures=fixtures).wait()


def _signal_group(rank: subprocess.Popen, signo: int) -> None:
    """Signal a rank's process group (the rank leads it: it was started in a session of its own)."""
    try:
        os.killpg(rank.pid, signo)
    except (ProcessLookupError, PermissionError):
        pass


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
