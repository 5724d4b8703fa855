"""A single-process workload run in a child process (`kernlint run TARGET` without --nproc).

The workload's code runs apart from kernlint: whatever it does (os._exit, a crash, a hang, 40 MB of prints)
ends in one error or a trace, never in kernlint exiting 0 with nothing checked. The child is
`python -m kernlint.rank_worker --kl-single ...`; what the workload prints is streamed to `on_output` line by
line as it comes (never held), except the child's own `kernlint-child-*` lines, which carry its result:

    kernlint-child-ready                      kernlint and torch are imported: the workload's time starts
    kernlint-child-trace: <path>              the trace written (and its .run.json beside it)
    kernlint-child-profiler: <line>           what the profiler said (shown with -v)
    kernlint-child-error: <json>              a kernlint error: {"type", "path", "problem", "line"}
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kernlint import errors
from kernlint.errors import KernlintError, WorkloadError
from kernlint.fileio import RUN_METADATA_SUFFIX

CHILD_PREFIX = "kernlint-child-"
_STOP_GRACE_S = 5.0
# kernlint's own start in the child (importing torch; CUDA is not touched yet) is bounded apart from the
# workload, so that `--timeout` means the workload's time whatever the machine's load or cache state.
START_LIMIT_S = 300.0
# Each workload's limit in `kernlint audit` (its import, build and steps; for a distributed one the ranks'
# whole run): a hung workload is stopped and is an error, never a wait without end.
AUDIT_TIMEOUT_S = 600.0


@dataclass(frozen=True)
class ChildCapture:
    trace: Path
    metadata: Path
    wall_seconds: float
    profiler_log: tuple[str, ...]


def _error(payload: str) -> KernlintError:
    """The child's kernlint error, of the same type (and so the same exit code) as in this process."""
    try:
        found = json.loads(payload)
        kind = getattr(errors, found["type"], None)
        if isinstance(kind, type) and issubclass(kind, KernlintError):
            return kind(found.get("path"), str(found["problem"]), found.get("line"))
    except (ValueError, KeyError, TypeError):
        pass
    return WorkloadError(None, f"the workload's process reported an error kernlint cannot read: {payload[:200]}")


def run_name_of(target: str) -> str:
    """The run's name, as the workload's own would be, without importing it: a built-in's name, or the
    callable's name of module:callable and file.py:callable."""
    return target.rpartition(":")[2] if ":" in target else target


def run_in_child(target: str, device: str, out_dir: Path, run_name: str, *, label: str, warmup: int = 1,
                 steps: int = 1, timeout_s: float | None = None, debug: bool = False,
                 fixtures: Path | None = None, on_output: Callable[[str], None] = lambda line: None
                 ) -> ChildCapture:
    """Profile `target` (a built-in name, module:callable or file.py:callable) on `device` (cpu, cuda or auto:
    the child decides) in a child process. Raises the
    child's own KernlintError, or WorkloadError when it exits without a trace, dies, or runs past
    `timeout_s` (then it is stopped). `fixtures`: a folder whose regressed/workloads.py names more workloads."""
    cmd = [sys.executable, "-m", "kernlint.rank_worker", "--kl-single", "--kl-target", target, "--kl-device", device,
           "--kl-out", str(out_dir), "--kl-run", run_name, "--kl-label", label, "--kl-warmup", str(warmup),
           "--kl-steps", str(steps)] + (["--kl-debug"] if debug else []) + (
           ["--kl-fixtures", str(fixtures)] if fixtures else [])
    own: dict[str, list[str]] = {"trace": [], "profiler": [], "error": []}
    ready = threading.Event()
    start = time.perf_counter()
    child = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             env={**os.environ, "PYTHONUNBUFFERED": "1"})

    def pump() -> None:
        for raw in child.stdout:
            line = raw.decode("utf-8", "replace").rstrip("\n")
            if line.startswith(CHILD_PREFIX):
                kind, _, value = line[len(CHILD_PREFIX):].partition(": ")
                if kind == "ready":
                    ready.set()
                    continue
                if kind in own:
                    own[kind].append(value)
                    continue
            on_output(line)

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    try:
        _wait_until_ready(child, ready, label)
        code = child.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _stop(child)
        raise WorkloadError(None, f"{label}: the workload did not finish within {timeout_s:g} s (--timeout); it was "
                                  "stopped and nothing was checked") from None
    except BaseException:   # Ctrl-C: the child goes too
        _stop(child)
        raise
    finally:
        reader.join(timeout=_STOP_GRACE_S)
    wall = time.perf_counter() - start
    if own["error"]:
        raise _error(own["error"][-1])
    if code != 0:
        how = f"was killed by signal {-code}" if code < 0 else f"exited with code {code}"
        raise WorkloadError(None, f"{label}: the workload's process {how} before its trace was written; nothing "
                                  "was checked")
    if not own["trace"]:
        raise WorkloadError(None, f"{label}: the workload's process ended (exit 0) before its trace was written "
                                  "(did it call os._exit()?); nothing was checked")
    trace = Path(own["trace"][-1])
    metadata = trace.with_name(trace.name.removesuffix(".pt.trace.json.gz") + RUN_METADATA_SUFFIX)
    return ChildCapture(trace, metadata, wall, tuple(own["profiler"]))


def _wait_until_ready(child: subprocess.Popen, ready: threading.Event, label: str) -> None:
    """Until the child has imported kernlint and torch, or has ended (its exit is read after)."""
    deadline = time.perf_counter() + START_LIMIT_S
    while not ready.wait(0.05):
        if child.poll() is not None:
            return
        if time.perf_counter() > deadline:
            _stop(child)
            raise WorkloadError(None, f"{label}: the workload's process did not finish importing torch within "
                                      f"{START_LIMIT_S:g} s; it was stopped and nothing was checked")


def _stop(child: subprocess.Popen) -> None:
    if child.poll() is None:
        child.terminate()
        try:
            child.wait(timeout=_STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
