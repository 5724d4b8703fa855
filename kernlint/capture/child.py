"""A single-process workload run in a child process (`kernlint run TARGET` without --nproc).

The workload's code runs apart from kernlint: whatever it does (os._exit, a crash, a hang, 40 MB of prints, a
line without end, children of its own) ends in one error or a trace, never in kernlint exiting 0 with nothing
checked. The child is `python -m kernlint.rank_worker --kl-single --kl-result FILE ...`, started in a session of
its own: when the run ends, times out or kernlint is signalled, its whole process group is killed, the
workload's own children too.

What the workload prints is passed to `on_output` as it comes, read in chunks of at most 64 KiB (a line longer
than that is passed on in pieces, never held whole). The child's result goes to a file of its own that this
process names (never the workload's stdout, where an unfinished line would swallow it), one JSON object a line:

    {"ready": true}                 kernlint and torch are imported: the workload's time starts
    {"profiler": "<line>"}          what the profiler said (shown with -v)
    {"error": {"type", "path", "problem", "line"}}   a kernlint error
    {"trace": "<path>"}             the trace written (and its .run.json beside it)
"""
from __future__ import annotations

import codecs
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Protocol

from kernlint import errors
from kernlint.capture.forkserver import SAFE_PATH, WorkloadForkServer
from kernlint.errors import ConfigError, KernlintError, WorkloadError
from kernlint.fileio import RUN_METADATA_SUFFIX, termination_raised

# The workload's process runs this module's main (kernlint.capture.forkserver preloads it).
_WORKER = "kernlint.rank_worker"
_STOP_GRACE_S = 5.0
_POLL_S = 0.02
# The most of the workload's output held at a time: a read, and an unfinished line before it is passed on.
_OUTPUT_CHUNK = 64 * 1024
# The most of the result file read: a trace path, an error, the profiler's log.
_RESULT_LIMIT = 4 << 20
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


class ChildCancelled(Exception):
    """The run was cancelled through its `cancel` event (the audit stops the workloads running beside one that
    failed, or that it was interrupted in): the child was stopped. Control flow between the audit's threads, never
    shown to the user."""


def _error(payload: object) -> KernlintError:
    """The child's kernlint error, of the same type (and so the same exit code) as in this process."""
    try:
        kind = getattr(errors, payload["type"], None)
        if isinstance(kind, type) and issubclass(kind, KernlintError):
            return kind(payload.get("path"), str(payload["problem"]), payload.get("line"))
    except (KeyError, TypeError, AttributeError):
        pass
    return WorkloadError(None, f"the workload's process reported an error kernlint cannot read: {str(payload)[:200]}")


def run_name_of(target: str) -> str:
    """The run's name, as the workload's own would be, without importing it: a built-in's name, or the
    callable's name of module:callable and file.py:callable."""
    return target.rpartition(":")[2] if ":" in target else target


def run_in_child(target: str, device: str, out_dir: Path, run_name: str, *, label: str, warmup: int = 1,
                 steps: int = 1, timeout_s: float | None = None, debug: bool = False,
                 fixtures: Path | None = None, on_output: Callable[[str], None] = lambda line: None,
                 cancel: threading.Event | None = None, forks: WorkloadForkServer | None = None) -> ChildCapture:
    """Profile `target` (a built-in name, module:callable or file.py:callable) on `device` (cpu, cuda or auto:
    the child decides) in a child process. Raises the
    child's own KernlintError, or WorkloadError when it exits without a trace, dies, or runs past
    `timeout_s` (then it is stopped). `fixtures`: a folder whose regressed/workloads.py names more workloads.
    `cancel`: set from another thread (the one that can see Ctrl-C and SIGTERM, which reach only the main
    thread), it stops the child and its process group and raises ChildCancelled. `forks`: a started fork server
    (the audit's), which forks the child with torch already imported; without one, or one that failed to start,
    the child is a new interpreter."""
    try:
        fd, result_name = tempfile.mkstemp(prefix="kernlint-child-", suffix=".jsonl")
    except OSError as exc:
        raise ConfigError(tempfile.gettempdir(), f"cannot create the workload's result file: "
                                                 f"{exc.strerror or exc}") from None
    os.close(fd)
    result_file = Path(result_name)
    argv = ["--kl-single", "--kl-target", target, "--kl-device", device, "--kl-out", str(out_dir),
            "--kl-run", run_name, "--kl-label", label, "--kl-warmup", str(warmup), "--kl-steps", str(steps),
            "--kl-result", str(result_file)]
    argv += (["--kl-debug"] if debug else []) + (["--kl-fixtures", str(fixtures)] if fixtures else [])

    def start() -> _Child:
        if forks is not None and forks.usable(START_LIMIT_S, while_waiting=lambda: _check_cancel(cancel)):
            return forks.spawn(_WORKER, argv, label)
        return _SpawnedChild([sys.executable, *SAFE_PATH, "-m", _WORKER, *argv])

    try:
        with termination_raised():   # SIGTERM / SIGHUP: the workload is stopped on the way out, as after Ctrl-C
            code, wall = _run(start, result_file, label, timeout_s, on_output, cancel)
        result = _read_result(result_file)
    finally:
        with contextlib.suppress(OSError):
            result_file.unlink()
    if "error" in result:
        raise _error(result["error"])
    if code != 0:
        how = f"was killed by signal {-code}" if code < 0 else f"exited with code {code}"
        raise WorkloadError(None, f"{label}: the workload's process {how} before its trace was written; nothing "
                                  "was checked")
    if "trace" not in result:
        raise WorkloadError(None, f"{label}: the workload's process ended (exit 0) before its trace was written "
                                  "(did it call os._exit()?); nothing was checked")
    trace = Path(result["trace"])
    metadata = trace.with_name(trace.name.removesuffix(".pt.trace.json.gz") + RUN_METADATA_SUFFIX)
    return ChildCapture(trace, metadata, wall, tuple(result.get("profiler", ())))


class _Child(Protocol):
    """A workload's process as _run drives it: a spawned interpreter (_SpawnedChild) or one the audit's fork
    server forked (kernlint.capture.forkserver.ForkedChild). Both lead a process group of their own."""

    pid: int
    stdout: BinaryIO
    returncode: int | None

    def exited(self) -> bool:
        """Whether it has ended; its process group id stays its own until signal_group has run."""

    def wait(self) -> int:
        """Its exit code, once it has ended (reaped)."""

    def signal_group(self, signo: int) -> None:
        """Signal its process group: it and what it started."""


class _SpawnedChild:
    """`python -P -m kernlint.rank_worker ...` started in a session of its own: its process group is the
    workload's and its children's, to end as one."""

    def __init__(self, cmd: list[str]):
        self._popen = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                       stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"},
                                       start_new_session=True)
        self.pid = self._popen.pid
        self.stdout = self._popen.stdout

    @property
    def returncode(self) -> int | None:
        return self._popen.returncode

    def exited(self) -> bool:
        # without reaping it (WNOWAIT): until it is reaped, its pid, and so its group id, cannot be another's
        if self._popen.returncode is not None:
            return True
        try:
            return os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
        except ChildProcessError:   # reaped already
            return True

    def wait(self) -> int:
        return self._popen.wait()

    def signal_group(self, signo: int) -> None:
        if self._popen.returncode is not None:   # reaped: its id may be another's now
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signo)


def _run(start: Callable[[], _Child], result_file: Path, label: str, timeout_s: float | None,
         on_output: Callable[[str], None], cancel: threading.Event | None = None) -> tuple[int, float]:
    """Run the child to its end (its exit code and wall time), its output passed on as it comes. Whatever
    way it ends (exit, --timeout, Ctrl-C, SIGTERM, `cancel` set), its process group is killed before it is
    reaped, so nothing the workload started outlives it."""
    _check_cancel(cancel)
    begin = time.perf_counter()
    child = start()
    reader = threading.Thread(target=_pass_on, args=(child.stdout, on_output), daemon=True)
    reader.start()
    try:
        _wait_until_ready(child, result_file, label, cancel)
        if not _ended(child, timeout_s, cancel):
            _stop(child)
            raise WorkloadError(None, f"{label}: the workload did not finish within {timeout_s:g} s (--timeout); "
                                      "it was stopped and nothing was checked")
        child.signal_group(signal.SIGKILL)   # what the workload left running (a forked child) ends with it
        code = child.wait()
    except BaseException:   # Ctrl-C, SIGTERM, SIGHUP: the child goes too
        _stop(child)
        raise
    finally:
        reader.join(timeout=_STOP_GRACE_S)
    return code, time.perf_counter() - begin


def _pass_on(stream, on_output: Callable[[str], None]) -> None:
    """The child's output to `on_output` line by line (without the newline), read in chunks of at most
    _OUTPUT_CHUNK bytes: an unfinished line of more than _OUTPUT_CHUNK characters is passed on in pieces, and
    one left at the end is passed on too."""
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    pending = ""
    fd = stream.fileno()
    while True:
        try:
            chunk = os.read(fd, _OUTPUT_CHUNK)
        except OSError:
            break
        pending += decoder.decode(chunk, final=not chunk)
        *lines, pending = pending.split("\n")
        for line in lines:
            on_output(line)
        while len(pending) >= _OUTPUT_CHUNK:
            on_output(pending[:_OUTPUT_CHUNK])
            pending = pending[_OUTPUT_CHUNK:]
        if not chunk:
            break
    if pending:
        on_output(pending)
    stream.close()


def _read_result(result_file: Path) -> dict:
    """What the child wrote to its result file: the last trace and error, every profiler line."""
    result: dict = {"profiler": []}
    try:
        with open(result_file, "rb") as fh:
            text = fh.read(_RESULT_LIMIT).decode("utf-8", "replace")
    except OSError:
        return result
    for line in text.splitlines():
        try:
            entry = json.loads(line)
        except ValueError:   # a line cut short (the child killed while it wrote)
            continue
        if not isinstance(entry, dict):
            continue
        if "profiler" in entry:
            result["profiler"].append(str(entry["profiler"]))
        for key in ("trace", "error"):
            if key in entry:
                result[key] = entry[key]
    return result


def _check_cancel(cancel: threading.Event | None) -> None:
    if cancel is not None and cancel.is_set():
        raise ChildCancelled("cancelled")


def _ended(child: _Child, timeout_s: float | None, cancel: threading.Event | None = None) -> bool:
    """Wait until the child has exited (True) or `timeout_s` has passed (False), without reaping it: its
    process group id stays its own until it is signalled. ChildCancelled once `cancel` is set."""
    deadline = None if timeout_s is None else time.perf_counter() + timeout_s
    while not child.exited():
        _check_cancel(cancel)
        if deadline is not None and time.perf_counter() > deadline:
            return False
        time.sleep(_POLL_S)
    return True


def _wait_until_ready(child: _Child, result_file: Path, label: str,
                      cancel: threading.Event | None = None) -> None:
    """Until the child has imported kernlint and torch (its first result line), or has ended."""
    deadline = time.perf_counter() + START_LIMIT_S
    while not _ready(result_file):
        _check_cancel(cancel)
        if child.exited():
            return
        if time.perf_counter() > deadline:
            _stop(child)
            raise WorkloadError(None, f"{label}: the workload's process did not finish importing torch within "
                                      f"{START_LIMIT_S:g} s; it was stopped and nothing was checked")
        time.sleep(_POLL_S)


def _ready(result_file: Path) -> bool:
    try:
        return result_file.stat().st_size > 0
    except OSError:
        return False


def _stop(child: _Child) -> None:
    """End the child and everything in its process group: SIGTERM, then SIGKILL after a grace period."""
    if child.returncode is not None:   # reaped: its group was killed before (its id may be another's now)
        return
    child.signal_group(signal.SIGTERM)
    deadline = time.perf_counter() + _STOP_GRACE_S
    while not child.exited() and time.perf_counter() < deadline:
        time.sleep(_POLL_S)
    child.signal_group(signal.SIGKILL)
    child.wait()
