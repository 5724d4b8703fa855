"""A warm process that forks the audit's single-process workload children (Linux).

Each audit workload ran in a fresh `python -m kernlint.rank_worker --kl-single`, and every one paid torch's
import again: seven at once on the H200 box, about 4 s each, before any workload code ran. The fork server
imports torch and kernlint's capture side once, touching no CUDA, and forks one child per workload. A child is
what a spawned one was: a process of its own in a session of its own (its process group ends with it), under
its own time limit, its output streamed apart, its result in its own file, with a fresh profiler and its own
CUDA context (CUDA is first touched after the fork, as in a DataLoader worker).

Protocol, one JSON object a line. The server, on its stdout: {"ready": true} once its imports are done; then
{"pid": N} for each request, in order; then {"exit": N, "code": C} once child N has exited, after its process
group was killed and it was reaped (C as Popen.returncode: -signal when a signal ended it). The parent, on the
server's stdin: {"module": ..., "argv": [...], "cwd": ..., "env": {...}, "output": FIFO}: the child runs
`module.main(argv)` (kernlint.rank_worker's) with its stdout and stderr on the named FIFO. End of the server's
stdin (the audit is done, or died) kills what is still running and ends the server.

This module imports nothing heavy: the audit starts the server before it imports torch itself.
"""
from __future__ import annotations

import contextlib
import importlib
import io
import itertools
import json
import os
import queue
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from kernlint.errors import WorkloadError

# The workload's interpreter does not put the working directory first on sys.path (`python -P`): a user's
# timeit.py or types.py there would shadow the standard library under torch's import (kernlint.rank_worker
# appends it last instead).
SAFE_PATH = ("-P",)
# What every workload child needs before its workload runs: torch and kernlint's capture and workloads.
PRELOAD = ("kernlint.rank_worker",)
# Fork only where fork after importing torch is the norm (DataLoader workers): elsewhere, children are spawned.
AVAILABLE = sys.platform == "linux"


class ForkedChild:
    """A workload child forked by the server, with what kernlint.capture.child needs of a Popen: its pid, its
    output (the FIFO's read end), whether it has exited, its exit code, and signalling its process group."""

    def __init__(self, server: WorkloadForkServer, pid: int, stdout):
        self.pid = pid
        self.stdout = stdout
        self._server = server
        self.returncode: int | None = None
        self._reaped = False   # the server reported its exit: its group was killed and it was reaped

    def exited(self) -> bool:
        if self.returncode is None:
            self.returncode, self._reaped = self._server.exit_code(self.pid)
        return self.returncode is not None

    def wait(self) -> int:
        while not self.exited():
            self._server.wait_for_exit(self.pid)
        return self.returncode

    def signal_group(self, signo: int) -> None:
        # Once the server has reported its exit, it has killed the group and reaped the child: the id may be
        # another's by now. A server that died reported nothing: its children may still run, and go now.
        if not self._reaped:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.pid, signo)


class WorkloadForkServer:
    """The parent's side: `start()` spawns the server (its imports run while the caller goes on), or the first
    `usable()` does; `spawn()` forks a workload child; `close()` ends the server and every child it still runs.
    Thread-safe."""

    def __init__(self, preload: tuple[str, ...] = PRELOAD):
        self._preload = preload
        self._fifo_names = itertools.count()
        self._proc: subprocess.Popen | None = None
        self._ready = threading.Event()
        self._ended = threading.Event()
        self._pids: queue.Queue[int | str] = queue.Queue()   # a child's pid, or why it was not forked
        self._exits: dict[int, int] = {}
        self._changed = threading.Condition()
        self._request = threading.Lock()
        self._starting = threading.Lock()
        self._fifos: Path | None = None

    def start(self) -> WorkloadForkServer:
        with self._starting:
            if self._proc is None:
                self._start()
        return self

    def _start(self) -> None:
        import tempfile

        self._fifos = Path(tempfile.mkdtemp(prefix="kernlint-forks-"))
        # A session of its own: a terminal's Ctrl-C reaches the audit, which stops the children; the server
        # ends when its stdin does. torch.cuda.is_available() asks NVML there, not the CUDA driver, should an
        # import call it: a driver initialised before the fork fails in every child (each child gets the
        # audit's environment back).
        self._proc = subprocess.Popen([sys.executable, *SAFE_PATH, "-m", "kernlint.capture.forkserver",
                                       *self._preload], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      stderr=subprocess.DEVNULL, start_new_session=True,
                                      env={**os.environ, "PYTORCH_NVML_BASED_CUDA_CHECK": "1"})
        threading.Thread(target=self._read, name="kernlint-forkserver", daemon=True).start()

    def _read(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        for line in self._proc.stdout:
            try:
                message = json.loads(line)
            except ValueError:
                continue
            if message.get("ready"):
                self._ready.set()
            elif "pid" in message:
                with self._changed:   # an earlier child's exit under the same (reused) pid is not this one's
                    self._exits.pop(int(message["pid"]), None)
                self._pids.put(int(message["pid"]))
            elif "error" in message:
                self._pids.put(str(message["error"]))
            elif "exit" in message:
                with self._changed:
                    self._exits[int(message["exit"])] = int(message["code"])
                    self._changed.notify_all()
        with self._changed:
            self._ended.set()
            self._changed.notify_all()

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def usable(self, limit_s: float, while_waiting: Callable[[], None] = lambda: None) -> bool:
        """Ready to fork (started if it was not; waits up to `limit_s` for its imports, calling `while_waiting`
        now and then, which may raise to stop waiting): False when it failed to start, has ended or is late."""
        self.start()
        deadline = time.monotonic() + limit_s
        while not self._ready.wait(0.05):
            while_waiting()
            if self._ended.is_set() or time.monotonic() > deadline:
                return False
        return not self._ended.is_set()

    def spawn(self, module: str, argv: list[str], label: str) -> ForkedChild:
        """Fork a child running `module.main(argv)` (kernlint.rank_worker, as `python -m` would) in this
        process's working directory and environment. WorkloadError when the server cannot fork it."""
        assert self._proc is not None and self._proc.stdin is not None and self._fifos is not None
        with self._request:
            fifo = self._fifos / f"out-{next(self._fifo_names)}"
            os.mkfifo(fifo, 0o600)
            # The read end first (the server then opens the write end without blocking and hands it to the child
            # at the fork, so the child holds it before its pid is known here: no early end of file).
            fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
            request = {"module": module, "argv": argv, "cwd": os.getcwd(), "env": dict(os.environ), "output": str(fifo)}
            try:
                self._proc.stdin.write((json.dumps(request) + "\n").encode())
                self._proc.stdin.flush()
                answer = self._answer()
            except (OSError, ValueError):
                answer = "it has ended"
            if isinstance(answer, str):
                os.close(fd)
                raise WorkloadError(None, f"{label}: the audit's fork server could not start the workload's "
                                          f"process ({answer}); nothing was checked")
        os.set_blocking(fd, True)
        return ForkedChild(self, answer, os.fdopen(fd, "rb", buffering=0))

    def _answer(self) -> int | str:
        while True:
            try:
                return self._pids.get(timeout=0.1)
            except queue.Empty:
                if self._ended.is_set() and self._pids.empty():
                    return "it has ended"

    def exit_code(self, pid: int) -> tuple[int | None, bool]:
        """The child's exit code and True once the server reported it (and forgot it: a later child may have
        the pid); (-SIGKILL, False) once the server has ended without; else (None, False)."""
        with self._changed:
            if pid in self._exits:
                return self._exits.pop(pid), True
            return (-signal.SIGKILL if self._ended.is_set() else None), False

    def wait_for_exit(self, pid: int, timeout: float = 0.05) -> None:
        with self._changed:
            if pid not in self._exits and not self._ended.is_set():
                self._changed.wait(timeout)

    def close(self) -> None:
        """End the server: every child it still runs is killed, its group with it."""
        if self._proc is None:
            return
        if not self._ready.is_set():   # still importing: it has no child yet
            self._proc.kill()
        with contextlib.suppress(OSError):
            self._proc.stdin.close()
        try:
            self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        if self._fifos is not None:
            import shutil

            shutil.rmtree(self._fifos, ignore_errors=True)


@contextlib.contextmanager
def started_fork_server(now: bool = True) -> Iterator[WorkloadForkServer | None]:
    """A fork server, closed on the way out with any child it still runs; None where children are spawned
    instead (not Linux). `now`: started at once (its imports run while the caller goes on), else on first use."""
    if not AVAILABLE:
        yield None
        return
    forks = WorkloadForkServer()
    if now:
        forks.start()
    try:
        yield forks
    finally:
        forks.close()


# --- the server ------------------------------------------------------------------------------------------------

def _send(message: dict) -> None:
    data = (json.dumps(message) + "\n").encode()
    while data:
        data = data[os.write(1, data):]


def _reap(children: set[int]) -> None:
    """Every child that has exited: its process group killed (what it left running), reaped, reported."""
    while children:
        try:
            info = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return
        if info is None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(info.si_pid, signal.SIGKILL)
        _, status = os.waitpid(info.si_pid, 0)
        children.discard(info.si_pid)
        _send({"exit": info.si_pid, "code": os.waitstatus_to_exitcode(status)})


def _child(request: dict, out: int, wakeup: tuple[int, int]) -> None:
    """In the forked child: its own session, output (`out`, the FIFO's write end) and environment, then the
    workload. Never returns."""
    code = 1
    try:
        os.setsid()
        signal.set_wakeup_fd(-1)
        for fd in wakeup:
            os.close(fd)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        os.dup2(out, 1)
        os.dup2(out, 2)
        os.close(out)
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.close(devnull)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        # As `python -u` would: what the workload prints reaches the audit as it comes.
        sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), write_through=True, errors="backslashreplace")
        sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), write_through=True, errors="backslashreplace")
        sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False))
        sys.argv = [request["module"], *request["argv"]]
        code = importlib.import_module(request["module"]).main(request["argv"])
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if isinstance(exc.code, str):   # as the interpreter itself shows sys.exit("...")
            sys.stderr.write(exc.code + "\n")
    except BaseException:
        import traceback

        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(code)


def serve(preload: list[str]) -> None:
    """The server's loop (`python -m kernlint.capture.forkserver MODULE...`). In a session of its own, no
    terminal's Ctrl-C reaches it: the audit stops the children, and the server ends with its stdin."""
    for name in preload:
        importlib.import_module(name)
    # Forking is safe only from one thread and before any CUDA context (torch._inductor.compile_fx's import,
    # for one, starts a thread and initialises CUDA: its children then fail "Cannot re-initialize CUDA").
    # Otherwise this server ends before it is ready, and the audit spawns each child instead.
    torch = sys.modules.get("torch")
    if threading.active_count() > 1 or (torch is not None and torch.cuda.is_initialized()):
        sys.exit(3)
    wakeup = os.pipe()
    for fd in wakeup:
        os.set_blocking(fd, False)
    signal.set_wakeup_fd(wakeup[1])
    signal.signal(signal.SIGCHLD, lambda signo, frame: None)   # wakes the select below
    children: set[int] = set()
    pending = b""
    _send({"ready": True})
    try:
        while True:
            ready, _, _ = select.select([0, wakeup[0]], [], [])
            if wakeup[0] in ready:
                with contextlib.suppress(BlockingIOError):
                    while os.read(wakeup[0], 512):
                        pass
            _reap(children)
            if 0 not in ready:
                continue
            data = os.read(0, 1 << 16)
            if not data:
                return
            pending += data
            *lines, pending = pending.split(b"\n")
            for line in lines:
                try:
                    request = json.loads(line)
                    out = os.open(request["output"], os.O_WRONLY | os.O_NONBLOCK)   # the audit holds the read end
                    try:
                        os.set_blocking(out, True)
                        pid = os.fork()
                        if pid == 0:
                            _child(request, out, wakeup)
                    finally:
                        os.close(out)
                except (OSError, ValueError, KeyError, TypeError) as exc:
                    _send({"error": f"{type(exc).__name__}: {exc}"})
                    continue
                children.add(pid)
                _send({"pid": pid})
    finally:
        for pid in children:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
        for pid in children:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)


if __name__ == "__main__":
    serve(sys.argv[1:])
