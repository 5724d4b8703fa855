"""Writing a file whole or not at all, reading a file a user or a trace names only when it is a regular file
(never blocking on a FIFO, never reading a device or more than a bound), and SIGTERM / SIGHUP as an error.
Imports nothing of kernlint but its typed errors, so every layer may use it."""
from __future__ import annotations

import contextlib
import errno
import os
import signal
import stat
import tempfile
import threading
from pathlib import Path

from kernlint.errors import KernlintError

# The run metadata `kernlint run` / `audit` write beside each trace (`<worker>.<ms>.run.json`): known files,
# never a trace, never "skipped".
RUN_METADATA_SUFFIX = ".run.json"

# Signals that end a write early: the temporary file is removed before the process goes.
_CLEANUP_SIGNALS = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGINT", "SIGHUP") if hasattr(signal, name))
_CHUNK = 1 << 20


class NotRegularFileError(OSError):
    """`open_regular` met a folder, a FIFO, a socket or a device: `kind` says which ("a FIFO")."""

    def __init__(self, path, kind: str):
        super().__init__(errno.EINVAL, f"not a regular file ({kind})", str(path))
        self.kind = kind
        self.is_folder = kind == "a folder"


class FileTooLargeError(OSError):
    """`read_regular` met a file larger than its bound."""

    def __init__(self, path, limit: int):
        super().__init__(errno.EFBIG, f"larger than {limit:,} bytes", str(path))
        self.limit = limit


def file_kind(mode: int) -> str:
    """What a stat mode that is no regular file is, in words ("a FIFO")."""
    for test, name in ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device")):
        if test(mode):
            return name
    return "a special file"


def open_regular(path, *, follow_links: bool = True):
    """`path` open for binary reading when it is a regular file; NotRegularFileError otherwise, OSError when it
    cannot be opened. The open is non-blocking (a FIFO would wait for a writer; /dev/zero would never end a
    read): the mode is read from the open file (fstat), so a file swapped after a check is caught too."""
    flags = os.O_RDONLY | os.O_NONBLOCK | (0 if follow_links else getattr(os, "O_NOFOLLOW", 0))
    try:
        fd = os.open(path, flags)
    except IsADirectoryError:
        raise NotRegularFileError(path, "a folder") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise NotRegularFileError(path, file_kind(mode))
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return os.fdopen(fd, "rb")


def read_regular(path, max_bytes: int, *, follow_links: bool = True) -> bytes:
    """The bytes of `path` (open_regular), FileTooLargeError past `max_bytes` (its size is looked at before a
    byte is read, and no more than max_bytes + 1 are read should it grow)."""
    with open_regular(path, follow_links=follow_links) as fh:
        if os.fstat(fh.fileno()).st_size > max_bytes:
            raise FileTooLargeError(path, max_bytes)
        data = fh.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise FileTooLargeError(path, max_bytes)
    return data


def read_user_file(path, max_bytes: int, error: type[KernlintError], noun: str) -> bytes:
    """read_regular for a file the user names as a `noun` ("baseline", "suppressions file"): every refusal is
    one `error` naming the file (a folder, a FIFO or device, past the bound, unreadable)."""
    try:
        return read_regular(path, max_bytes)
    except NotRegularFileError as exc:
        raise error(path, f"is a folder, not a {noun}" if exc.is_folder else
                    f"not a regular file ({exc.kind}): not a {noun}") from None
    except FileTooLargeError:
        raise error(path, f"larger than {max_bytes >> 20} MiB: not a kernlint {noun}") from None
    except OSError as exc:
        raise error(path, f"cannot read the {noun}: {exc.strerror or exc}") from None


def _umask() -> int:
    """The process umask, read without changing it where Linux allows (/proc), else set and restored."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _write_all(fh, text: str) -> None:
    """Write `text` to the open file in chunks (a signal is handled between two of them)."""
    for start in range(0, len(text), _CHUNK):
        fh.write(text[start:start + _CHUNK])


@contextlib.contextmanager
def removed_on_signal(paths: set):
    """While the block runs, SIGTERM / SIGINT / SIGHUP first remove the files named in `paths` (a set the
    block adds its temporary files to and discards them from once they are renamed into place), then act
    as they would have: a Python handler (SIGINT's KeyboardInterrupt) is called; a default one ends the
    process by the same signal, so the shell sees 128 + signo. Ignored signals stay ignored. The previous
    handlers are back afterwards. Outside the main thread (where handlers cannot be set) nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield paths
        return
    previous: dict[int, object] = {}

    def restore() -> None:
        for signo, before in previous.items():
            with contextlib.suppress(ValueError, OSError, TypeError):
                signal.signal(signo, before)

    def handler(signo, frame):
        for leftover in list(paths):
            with contextlib.suppress(OSError):
                os.remove(leftover)
            paths.discard(leftover)
        before = previous.get(signo, signal.SIG_DFL)
        restore()
        if callable(before):
            before(signo, frame)
            return
        signal.signal(signo, signal.SIG_DFL)
        os.kill(os.getpid(), signo)
        raise SystemExit(128 + signo)   # only if the signal did not end the process

    try:
        for signo in _CLEANUP_SIGNALS:
            before = signal.getsignal(signo)
            if before in (signal.SIG_IGN, None):   # ignored (nohup), or set outside Python: leave it alone
                continue
            previous[signo] = before
            signal.signal(signo, handler)
        yield paths
    finally:
        restore()


class TerminatedError(KernlintError):
    """SIGTERM or SIGHUP arrived while kernlint had processes of its own running (a worker pool, a workload):
    raised where the main thread was, so that they are stopped on the way out, as after Ctrl-C. Its exit
    code is the shell's for that signal, 128 + signo."""

    def __init__(self, signo: int):
        self.signo = signo
        self.exit_code = 128 + signo
        super().__init__(None, f"terminated by {signal.Signals(signo).name}; the processes kernlint started "
                               "were stopped and nothing was checked")


# The signals that end kernlint as Ctrl-C does (SIGINT is Python's KeyboardInterrupt already).
_TERMINATING_SIGNALS = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name))


@contextlib.contextmanager
def termination_raised():
    """While the block runs, SIGTERM and SIGHUP raise TerminatedError in the main thread instead of ending
    the process at once (which would leave its children running and holding its stdout). Only signals left
    at their default are taken: an ignored one (nohup) stays ignored, a handler set by someone else stays.
    The previous handlers are back afterwards. Outside the main thread nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous: dict[int, object] = {}

    def handler(signo, frame):
        raise TerminatedError(signo)

    try:
        for signo in _TERMINATING_SIGNALS:
            if signal.getsignal(signo) == signal.SIG_DFL:
                previous[signo] = signal.signal(signo, handler)
        yield
    finally:
        for signo, before in previous.items():
            with contextlib.suppress(ValueError, OSError, TypeError):
                signal.signal(signo, before)


def _target(path: Path) -> Path:
    """The file to write: `path`, or through symbolic links the file they point to (a dangling link's
    target is created). Raises FileNotFoundError when the folder it goes in does not exist."""
    target = Path(os.path.realpath(path))
    if not target.parent.is_dir():
        if target.parent.exists() or target.parent.is_symlink():
            raise NotADirectoryError(errno.ENOTDIR, "not a folder", str(target.parent))
        raise FileNotFoundError(errno.ENOENT, "folder does not exist", str(target.parent))
    return target


# A file name that is not UTF-8 reaches a report as lone surrogates (the file system encoding keeps its bytes);
# written out, each becomes a visible escape (\udcff) instead of failing the whole report.
_ENCODE_ERRORS = "backslashreplace"


def write_text_atomically(path: str | os.PathLike, text: str) -> Path:
    """Write `text` to a temporary file beside `path`, then rename it into place: a reader never sees a
    half-written file, and a failed or interrupted write (SIGTERM, SIGINT, SIGHUP included) leaves nothing
    behind. Like a careful Unix tool:

    - the new file's mode follows the umask (0o666 & ~umask), or the replaced file's mode;
    - a symbolic link is written through: its target gets the text and the link stays;
    - the folder must exist (FileNotFoundError "folder does not exist"; nothing is created);
    - an existing target that is not a regular file (a FIFO, /dev/stdout, a terminal) is written directly.

    Returns the path written. Raises OSError.
    """
    path = Path(path)
    target = _target(path)
    try:
        st = os.stat(target)
    except FileNotFoundError:
        st = None
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise IsADirectoryError(errno.EISDIR, "is a folder", str(path))
    if st is not None and not stat.S_ISREG(st.st_mode):
        with open(target, "w", encoding="utf-8", errors=_ENCODE_ERRORS) as fh:
            _write_all(fh, text)
        return path
    mode = stat.S_IMODE(st.st_mode) if st is not None else 0o666 & ~_umask()
    pending: set[str] = set()
    with removed_on_signal(pending):
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
        pending.add(tmp)
        try:
            with os.fdopen(fd, "w", encoding="utf-8", errors=_ENCODE_ERRORS) as fh:
                os.fchmod(fh.fileno(), mode)
                _write_all(fh, text)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, target)
            pending.discard(tmp)
        except BaseException:
            if tmp in pending:
                with contextlib.suppress(OSError):
                    os.remove(tmp)
                pending.discard(tmp)
            raise
    return path
