"""Issue 38, items 4, 9 and 10: kernlint's own processes (a check's worker pool, a run's workload and what the
workload forks) never outlive it, whether it ends, times out or gets SIGTERM / SIGHUP (exit 128 + signo, one
line on stderr); the workload's output reaches the user in bounded pieces, and its result never depends on it.

Each test starts the CLI in a fresh interpreter of its own session, as a shell or a CI runner would, and looks
at the processes it started with psutil.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

from conftest import FIXTURES
from fresh_interpreter import CHECKOUT_ENV

SMALL_TRACE = FIXTURES / "traces" / "gpu" / "block_regressed.pt.trace.json.gz"
_WAIT_S = 60.0


def _kernlint(args, *, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE) -> subprocess.Popen:
    # A session of its own, as a job a shell starts: what it leaves behind is found by its session id.
    return subprocess.Popen([sys.executable, "-m", "kernlint.cli", *map(str, args)], env=CHECKOUT_ENV,
                            stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr, start_new_session=True)


def _until(condition, seconds: float = _WAIT_S, what: str = "") -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"not within {seconds:g} s: {what}"
        time.sleep(0.05)


def _descendants(pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def _alive(processes) -> list[str]:
    """Those still running (a zombie handed to init is dead: it holds no file, no CPU)."""
    alive = []
    for process in processes:
        try:
            if process.is_running() and process.status() != psutil.STATUS_ZOMBIE:
                alive.append(f"{process.pid} {' '.join(process.cmdline())[:120]}")
        except psutil.NoSuchProcess:
            pass
    return alive


def _in_session(sid: int) -> list[psutil.Process]:
    found = []
    for process in psutil.process_iter():
        try:
            if os.getsid(process.pid) == sid:
                found.append(process)
        except (ProcessLookupError, PermissionError, psutil.Error):
            pass
    return found


def _assert_all_gone(started: list[psutil.Process], sessions: set[int]) -> None:
    """Within a few seconds, nothing kernlint started (seen before) and nothing in its sessions is running."""
    def left() -> list[str]:
        return _alive(started) + _alive(p for sid in sessions for p in _in_session(sid))
    try:
        _until(lambda: not left(), 3.0, "kernlint's processes to end")
    finally:
        for process in started:   # never leave one behind for the next test
            try:
                process.kill()
            except psutil.NoSuchProcess:
                pass
    assert not left()


@pytest.mark.parametrize("signo", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_a_signal_to_check_jobs_2_stops_its_pool_and_exits_128_plus_signo(tmp_path, signo):
    """It left the fork server, the resource tracker and both workers running, holding the caller's stdout."""
    trace = SMALL_TRACE.read_bytes()
    for i in range(300):   # enough to be caught mid-check on any machine (copies: one file is checked once)
        (tmp_path / f"t{i:03d}.pt.trace.json.gz").write_bytes(trace)
    proc = _kernlint(["check", "--jobs", "2", tmp_path], stdout=subprocess.PIPE)
    # The fork server, the resource tracker and the two workers
    _until(lambda: len(_descendants(proc.pid)) >= 4 or proc.poll() is not None, what="the pool to start")
    assert proc.poll() is None, "the check ended before it could be signalled"
    started = _descendants(proc.pid)
    start = time.monotonic()
    proc.send_signal(signo)
    out, err = proc.communicate(timeout=15)   # returns only once no process holds its stdout
    seconds = time.monotonic() - start
    _assert_all_gone(started, {proc.pid})
    assert proc.returncode == 128 + signo, err
    assert err.decode().splitlines() == [f"kernlint: error: terminated by {signo.name}; the processes kernlint "
                                         "started were stopped and nothing was checked"]
    assert b"Traceback" not in out + err
    assert seconds < 8, seconds


_SLEEPS_AND_FORKS = """\
import os
import time

def build(device):
    if os.fork() == 0:   # a child of the workload's own, which kernlint knows nothing of
        time.sleep(600)
        os._exit(0)
    open({marker!r}, "w").close()
    time.sleep(600)
    return lambda: None
"""


@pytest.mark.parametrize("signo, ranks", [(signal.SIGTERM, 1), (signal.SIGHUP, 1), (signal.SIGTERM, 2)],
                         ids=["SIGTERM", "SIGHUP", "SIGTERM-nproc-2"])
def test_a_signal_to_run_stops_the_workload_and_what_it_forked(tmp_path, signo, ranks):
    """It left the workload running (without its --timeout), and the workload's children."""
    marker = tmp_path / "forked"
    (tmp_path / "w.py").write_text(_SLEEPS_AND_FORKS.format(marker=str(marker)))
    proc = _kernlint(["run", f"{tmp_path / 'w.py'}:build", "--device", "cpu", "--out", tmp_path / "runs",
                      "--timeout", "300", *(["--nproc", str(ranks)] if ranks > 1 else [])])
    # Each rank's process and its child
    _until(lambda: marker.exists() and len(_descendants(proc.pid)) >= 2 * ranks, what="the workload to fork")
    started = _descendants(proc.pid)
    sessions = {proc.pid} | {os.getsid(p.pid) for p in started}
    start = time.monotonic()
    proc.send_signal(signo)
    _, err = proc.communicate(timeout=15)
    seconds = time.monotonic() - start
    _assert_all_gone(started, sessions)
    assert proc.returncode == 128 + signo, err
    assert len(err.decode().splitlines()) == 1 and f"terminated by {signo.name}" in err.decode()
    assert seconds < 8, seconds


_FORKS_AND_RETURNS = """\
import os
import time

def build(device):
    if os.fork() == 0:
        open({marker!r}, "w").write(str(os.getpid()))
        time.sleep({child_sleeps})
        os._exit(0)
    time.sleep({sleeps})
    return lambda: None
"""


@pytest.mark.parametrize("sleeps, args, code, line", [
    (0, [], 0, None),
    (600, ["--timeout", "2"], 2, "did not finish within 2 s"),
], ids=["exit-0", "timeout"])
def test_what_the_workload_forked_ends_with_the_run(tmp_path, sleeps, args, code, line):
    """A forked child stayed in kernlint's process group after exit 0 (and held its output pipe)."""
    marker = tmp_path / "child.pid"
    (tmp_path / "w.py").write_text(_FORKS_AND_RETURNS.format(marker=str(marker), child_sleeps=600, sleeps=sleeps))
    start = time.monotonic()
    proc = _kernlint(["run", f"{tmp_path / 'w.py'}:build", "--device", "cpu", "--out", tmp_path / "runs", *args])
    _, err = proc.communicate(timeout=_WAIT_S)
    seconds = time.monotonic() - start
    _until(lambda: marker.exists() and marker.read_text(), 5, "the child's pid")
    forked = psutil.Process(int(marker.read_text())) if psutil.pid_exists(int(marker.read_text())) else None
    _assert_all_gone([forked] if forked else [], {proc.pid})
    assert proc.returncode == code, err
    lines = err.decode().splitlines()
    assert (lines == [] if line is None else len(lines) == 1 and line in lines[0]), err
    assert seconds < 20, seconds


_LONG_LINE = """\
import os

def build(device):
    piece = b"x" * (1 << 20)
    for _ in range({megabytes}):   # one line, no newline anywhere: a progress bar that never ends
        os.write(1, piece)
    return lambda: None
"""


def test_a_long_line_without_newline_is_passed_on_in_bounded_pieces(tmp_path):
    """A 3 GiB line took 9.2 GB of kernlint's memory (held whole), and the trace line after it was lost."""
    megabytes = 200
    (tmp_path / "w.py").write_text(_LONG_LINE.format(megabytes=megabytes))
    with open(tmp_path / "stderr", "wb") as err_file:
        proc = _kernlint(["run", f"{tmp_path / 'w.py'}:build", "--device", "cpu", "--out", tmp_path / "runs"],
                         stdout=subprocess.PIPE, stderr=err_file)
        kernlint = psutil.Process(proc.pid)
        peak = 0
        while proc.poll() is None:
            try:
                peak = max(peak, kernlint.memory_info().rss)
            except psutil.NoSuchProcess:
                break
            time.sleep(0.01)
        out = proc.stdout.read().decode()
        proc.wait()
    assert proc.returncode == 0, out
    assert "Trace: " in out                      # checked: its verdict, not "ended before its trace was written"
    # The workload's output reached the user whole (on stderr), with no error line after it.
    assert (tmp_path / "stderr").stat().st_size >= megabytes << 20
    with open(tmp_path / "stderr", "rb") as fh:
        fh.seek(-200, os.SEEK_END)
        assert set(fh.read().strip()) == {ord("x")}
    assert peak < 150 << 20, f"kernlint's peak RSS {peak >> 20} MiB for a {megabytes} MiB line"


def test_the_output_is_passed_on_line_by_line_in_bounded_pieces(tmp_path):
    """Lines as they were written; one longer than 64 Ki characters in pieces; a character cut between two reads whole;
    an unfinished last line passed on too."""
    from kernlint.capture.child import _OUTPUT_CHUNK, _pass_on

    long_line = "é" * 100_000   # 200,000 bytes: reads end inside its characters
    written = f"first\n{long_line}\nlast, no newline"
    (tmp_path / "out").write_bytes(written.encode())
    pieces: list[str] = []
    with open(tmp_path / "out", "rb") as stream:
        _pass_on(stream, pieces.append)
    assert pieces[0] == "first" and pieces[-1] == "last, no newline"
    assert "".join(pieces[1:-1]) == long_line and len(pieces) > 3
    assert all(len(piece) <= _OUTPUT_CHUNK for piece in pieces)


def test_a_signal_to_the_audit_stops_the_ranks_it_started_beside_other_workloads(tmp_path):
    """The audit starts the distributed workloads' ranks and runs the others meanwhile: a SIGTERM then (outside
    any wait for a child) left the ranks running."""
    proc = _kernlint(["audit", "--device", "cpu", "--out", tmp_path / "runs"], stdout=subprocess.PIPE)

    def ranks() -> list[psutil.Process]:
        found = []
        for p in _descendants(proc.pid):
            try:
                cmd = " ".join(p.cmdline())
                # a rank, not a single-process workload's child (the same module, side by side with them)
                if "kernlint.rank_worker" in cmd and "--kl-single" not in cmd:
                    found.append(p)
            except psutil.NoSuchProcess:
                pass
        return found

    _until(lambda: len(ranks()) >= 2 or proc.poll() is not None, what="the ranks to start")
    assert proc.poll() is None, "the audit ended before it could be signalled"
    started = _descendants(proc.pid)
    sessions = {proc.pid} | {os.getsid(p.pid) for p in started if psutil.pid_exists(p.pid)}
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=15)
    _assert_all_gone(started, sessions)
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert len(err.decode().splitlines()) == 1 and "terminated by SIGTERM" in err.decode()
