"""The audit's fork server (kernlint.capture.forkserver): a workload child forked from it behaves as a spawned one
(its own session, time limit, output, exit, what it started ending with it), and a server that fails, dies or
is closed leaves no child running."""
from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import psutil
import pytest

from kernlint.capture.child import run_in_child
from kernlint.capture.forkserver import AVAILABLE, WorkloadForkServer
from kernlint.errors import WorkloadError

pytestmark = pytest.mark.skipif(not AVAILABLE, reason="the fork server is Linux-only; elsewhere children are spawned")

# Fake workloads: each notes "<pid> <parent pid> <session id> <grandchild pid>" in NOTE, then does what it is named.
_FAKES = '''
import os, signal, subprocess, sys, time

NOTE = {note!r}

def _start():
    grandchild = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    with open(NOTE, "a") as fh:
        fh.write(f"{{os.getpid()}} {{os.getppid()}} {{os.getsid(0)}} {{grandchild.pid}}\\n")

def fine(device):
    _start()
    print("hello from the workload", flush=True)
    print("environment:", os.environ.get("KL_TEST_MARK"), os.environ.get("PYTORCH_NVML_BASED_CUDA_CHECK"))
    sys.stdout.write("no newline at the end")
    return lambda: None

def exits(device):
    _start()
    os._exit(3)

def raises(device):
    _start()
    raise RuntimeError("boom")

def killed(device):
    _start()
    os.kill(os.getpid(), signal.SIGKILL)

def hangs(device):
    _start()
    time.sleep(600)

def on_cuda(device):
    import torch
    _start()
    x = torch.ones(1024, device="cuda")
    return lambda: x.mul_(2)
'''


@pytest.fixture
def fakes(tmp_path: Path):
    note = tmp_path / "note.txt"
    (tmp_path / "fakes.py").write_text(_FAKES.format(note=str(note)))
    return tmp_path / "fakes.py", note


@pytest.fixture
def server():
    forks = WorkloadForkServer().start()
    yield forks
    forks.close()


@pytest.fixture(scope="module")
def shared_server():
    """One server for the tests that leave it running (its start is torch's import)."""
    forks = WorkloadForkServer().start()
    yield forks
    forks.close()


def _noted(note: Path) -> list[tuple[int, int, int, int]]:
    return [tuple(map(int, line.split())) for line in note.read_text().splitlines()] if note.exists() else []


def _assert_gone(pids) -> None:
    deadline = time.monotonic() + 5
    alive = set(pids)
    while alive and time.monotonic() < deadline:
        alive = {p for p in alive if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE}
        time.sleep(0.05)
    for pid in alive:
        os.kill(pid, signal.SIGKILL)
    assert not alive, f"still running: {alive}"


def _run(fake: str, fakes, tmp_path: Path, forks, **kwargs):
    path, _ = fakes
    return run_in_child(f"{path}:{fake}", "cpu", tmp_path / "out", fake, label=fake, forks=forks, **kwargs)


def test_a_child_is_forked_in_a_session_of_its_own_and_its_output_and_trace_come_back(tmp_path, fakes,
                                                                                      shared_server, monkeypatch):
    server = shared_server
    monkeypatch.setenv("KL_TEST_MARK", "set after the server started")
    monkeypatch.delenv("PYTORCH_NVML_BASED_CUDA_CHECK", raising=False)
    printed: list[str] = []
    capture = _run("fine", fakes, tmp_path, server, on_output=printed.append)
    assert capture.trace.is_file()
    assert printed[:1] == ["hello from the workload"] and printed[-1] == "no newline at the end", printed
    # the audit's environment as it is now, not the server's (which asks NVML for torch.cuda.is_available)
    assert "environment: set after the server started None" in printed, printed
    ((pid, parent, session, grandchild),) = _noted(fakes[1])
    assert parent == server.pid, "not forked by the server: a new interpreter was spawned"
    assert session == pid
    _assert_gone({pid, grandchild})   # what the workload started ended with it


@pytest.mark.parametrize("fake, what", [
    ("exits", "the workload's process exited with code 3"),
    ("raises", "the workload raised RuntimeError: boom"),
    ("killed", "the workload's process was killed by signal 9"),
    ("hangs", "did not finish within 1 s"),
])
def test_a_forked_child_that_exits_raises_dies_or_hangs_is_an_error(tmp_path, fakes, shared_server, fake, what):
    server = shared_server
    with pytest.raises(WorkloadError, match=what):
        _run(fake, fakes, tmp_path, server, timeout_s=1)
    ((pid, parent, _, grandchild),) = _noted(fakes[1])
    assert parent == server.pid
    _assert_gone({pid, grandchild})


def test_a_server_that_dies_leaves_no_child_running(tmp_path, fakes, server):
    errors: list[BaseException] = []

    def run() -> None:
        try:
            _run("hangs", fakes, tmp_path, server, timeout_s=60)
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    deadline = time.monotonic() + 60
    while not _noted(fakes[1]):
        assert time.monotonic() < deadline and thread.is_alive(), errors
        time.sleep(0.05)
    os.kill(server.pid, signal.SIGKILL)
    thread.join(30)
    assert not thread.is_alive()
    assert len(errors) == 1 and isinstance(errors[0], WorkloadError), errors
    ((pid, _, _, grandchild),) = _noted(fakes[1])
    _assert_gone({pid, grandchild})


def test_closing_the_server_stops_what_it_runs(fakes, server):
    path, note = fakes
    argv = ["--kl-single", "--kl-target", f"{path}:hangs", "--kl-device", "cpu", "--kl-out", str(path.parent / "out"),
            "--kl-run", "hangs", "--kl-result", str(path.parent / "r.jsonl")]
    child = server.spawn("kernlint.rank_worker", argv, "hangs")
    deadline = time.monotonic() + 60
    while not _noted(note):
        assert time.monotonic() < deadline and not child.exited()
        time.sleep(0.05)
    server.close()
    ((pid, _, _, grandchild),) = _noted(note)
    _assert_gone({pid, grandchild})


def _assert_spawned_instead(preload: tuple[str, ...], tmp_path: Path, fakes) -> None:
    """A server with this preload is not usable, and the child is a new interpreter, this process's own."""
    forks = WorkloadForkServer(preload=preload).start()
    try:
        assert not forks.usable(60)
        capture = _run("fine", fakes, tmp_path, forks)
    finally:
        forks.close()
    assert capture.trace.is_file()
    ((_, parent, _, _),) = _noted(fakes[1])
    assert parent == os.getpid()


def test_a_server_that_cannot_start_leaves_the_child_to_a_new_interpreter(tmp_path, fakes):
    _assert_spawned_instead(("kernlint_no_such_module",), tmp_path, fakes)


def test_a_server_whose_imports_start_a_thread_refuses_to_fork(tmp_path, fakes, monkeypatch):
    """Forking is safe from one thread only (and before any CUDA context): a preload that starts a thread (as
    torch._inductor.compile_fx's import does, with CUDA too) ends the server, and the child is spawned."""
    (tmp_path / "kl_starts_a_thread.py").write_text(
        "import threading, time\nthreading.Thread(target=time.sleep, args=(60,), daemon=True).start()\n")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")])))
    _assert_spawned_instead(("kl_starts_a_thread",), tmp_path, fakes)


@pytest.mark.gpu
def test_a_forked_child_makes_its_own_cuda_context(tmp_path, fakes, shared_server):
    server = shared_server
    """The server imported torch and kernlint's workloads without touching CUDA, so its children can."""
    path, note = fakes
    capture = run_in_child(f"{path}:on_cuda", "cuda", tmp_path / "out", "on_cuda", label="on_cuda", forks=server)
    assert capture.trace.is_file()
    ((_, parent, _, _),) = _noted(note)
    assert parent == server.pid


def test_a_cancel_while_the_server_still_imports_stops_the_wait(tmp_path, fakes, monkeypatch):
    """The audit cancels the others when one workload fails: one still waiting for the server's imports stops
    waiting at once, and no child is started."""
    from kernlint.capture.child import ChildCancelled

    (tmp_path / "kl_imports_slowly.py").write_text("import time\ntime.sleep(60)\n")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")])))
    forks = WorkloadForkServer(preload=("kl_imports_slowly",))
    cancel = threading.Event()
    threading.Timer(0.5, cancel.set).start()
    start = time.monotonic()
    try:
        with pytest.raises(ChildCancelled):
            _run("fine", fakes, tmp_path, forks, cancel=cancel)
    finally:
        forks.close()
    assert time.monotonic() - start < 10
    assert not _noted(fakes[1])
