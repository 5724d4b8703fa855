"""Outputs are written whole or not at all, and like a careful Unix tool: umask, links, folders, signals."""
from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import textwrap
import threading

import pytest

from kernlint import fileio
from kernlint.fileio import write_text_atomically

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_write_replaces_the_target_whole(tmp_path):
    target = tmp_path / "deep" / "report.json"
    target.parent.mkdir()
    write_text_atomically(target, "first")
    write_text_atomically(target, "second")
    assert target.read_text() == "second"
    assert sorted(p.name for p in target.parent.iterdir()) == ["report.json"]


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temporary(tmp_path, monkeypatch):
    target = tmp_path / "report.json"
    target.write_text("old")

    def disk_full(fh, text):   # the disk fills up after the first character
        fh.write(text[:1])
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(fileio, "_write_all", disk_full)
    with pytest.raises(OSError, match="No space left"):
        write_text_atomically(target, "new text")
    assert target.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.json"]


def test_a_name_that_is_not_utf8_is_written_escaped(tmp_path):
    """A file name with bytes that are not UTF-8 reaches a report as lone surrogates: shown as an escape."""
    target = write_text_atomically(tmp_path / "report.txt", "bad \udcff name")
    assert target.read_text() == "bad \\udcff name"


@pytest.fixture
def umask():
    def set_mask(mask: int) -> None:
        os.umask(mask)

    before = os.umask(0o022)
    os.umask(before)
    yield set_mask
    os.umask(before)


@pytest.mark.parametrize("mask, mode", [(0o022, 0o644), (0o002, 0o664), (0o027, 0o640)])
def test_a_new_file_follows_the_umask(tmp_path, umask, mask, mode):
    umask(mask)
    target = write_text_atomically(tmp_path / "report.json", "x")
    assert stat.S_IMODE(os.stat(target).st_mode) == mode


def test_a_replaced_file_keeps_its_mode(tmp_path, umask):
    umask(0o077)
    target = tmp_path / "report.json"
    target.write_text("old")
    os.chmod(target, 0o640)
    write_text_atomically(target, "new")
    assert target.read_text() == "new" and stat.S_IMODE(os.stat(target).st_mode) == 0o640


@pytest.mark.parametrize("exists", [True, False])
def test_a_symlink_is_written_through_not_replaced(tmp_path, exists):
    real = tmp_path / "reports" / "report.json"
    real.parent.mkdir()
    if exists:
        real.write_text("old")
    (tmp_path / "out").mkdir()
    link = tmp_path / "out" / "latest.json"
    link.symlink_to(real)
    write_text_atomically(link, "new")
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert real.read_text() == "new"
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["latest.json"]
    assert sorted(p.name for p in real.parent.iterdir()) == ["report.json"]


def test_a_missing_folder_is_an_error_and_is_not_created(tmp_path):
    target = tmp_path / "missing" / "report.json"
    with pytest.raises(FileNotFoundError) as info:
        write_text_atomically(target, "x")
    assert info.value.strerror == "folder does not exist"
    assert not (tmp_path / "missing").exists()


def test_a_fifo_target_is_written_into_not_replaced(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_text()), daemon=True)
    reader.start()
    write_text_atomically(fifo, "through the pipe")
    reader.join(timeout=10)
    assert got == ["through the pipe"]
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)


def test_a_cleanup_handler_is_set_during_the_write_and_the_previous_one_is_back_after(tmp_path, monkeypatch):
    def mine(signo, frame):
        pass

    seen = []
    real_fdopen = os.fdopen

    def spying_fdopen(*args, **kwargs):
        seen.append(signal.getsignal(signal.SIGTERM))
        return real_fdopen(*args, **kwargs)

    before = signal.signal(signal.SIGTERM, mine)
    try:
        monkeypatch.setattr(os, "fdopen", spying_fdopen)
        write_text_atomically(tmp_path / "r.json", "x")
        assert seen and seen[0] not in (mine, signal.SIG_DFL)   # kernlint's cleanup handler while writing
        assert signal.getsignal(signal.SIGTERM) is mine
    finally:
        signal.signal(signal.SIGTERM, before)


_SLOW_WRITER = textwrap.dedent("""
    import os, sys, time
    import kernlint.fileio as fileio

    real_fdopen = os.fdopen

    class Slow:
        # the temporary file, with a write that stops halfway for a minute
        def __init__(self, fh):
            self.fh = fh
        def __enter__(self):
            return self
        def __exit__(self, *exc):
            return self.fh.__exit__(*exc)
        def __getattr__(self, name):
            return getattr(self.fh, name)
        def write(self, text):
            self.fh.write(text[: len(text) // 2])
            self.fh.flush()
            print("writing", flush=True)
            time.sleep(float(sys.argv[2]))
            return self.fh.write(text[len(text) // 2:])

    os.fdopen = lambda *a, **k: Slow(real_fdopen(*a, **k))
    fileio.write_text_atomically(sys.argv[1], "x" * 5_000_000)
    print("done", flush=True)
""")


# (SIGINT is KeyboardInterrupt, which the write already cleaned up after.)
@pytest.mark.parametrize("signo", [signal.SIGTERM, signal.SIGHUP])
def test_a_signal_during_the_write_leaves_no_temporary(tmp_path, signo):
    out = tmp_path / "out"
    out.mkdir()
    target = out / "report.json"
    env = {**os.environ, "PYTHONPATH": REPO_ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    # The child starts with the signal's default action even where this suite inherited it ignored (nohup).
    proc = subprocess.Popen([sys.executable, "-c", _SLOW_WRITER, str(target), "60"], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True, env=env,
                            preexec_fn=lambda: signal.signal(signo, signal.SIG_DFL))
    try:
        assert proc.stdout.readline().strip() == "writing"
        assert [p.name for p in out.iterdir()] != [], "the temporary file exists while writing"
        proc.send_signal(signo)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode in (-signo, 128 + signo), proc.returncode
    assert list(out.iterdir()) == []


def test_an_inherited_ignored_sighup_stays_ignored_and_the_write_completes(tmp_path):
    target = tmp_path / "report.json"
    env = {**os.environ, "PYTHONPATH": REPO_ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.Popen([sys.executable, "-c", _SLOW_WRITER, str(target), "1"], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True, env=env,
                            preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_IGN))   # as under nohup
    try:
        assert proc.stdout.readline().strip() == "writing"
        proc.send_signal(signal.SIGHUP)
        rest, _ = proc.communicate(timeout=60)
        assert rest.split()[-1:] == ["done"], rest
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0
    assert target.read_text() == "x" * 5_000_000
