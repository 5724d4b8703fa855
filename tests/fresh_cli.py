"""The CLI in a fresh process without a fresh interpreter's second of imports.

A fork server (multiprocessing's "forkserver": a clean process started once, holding nothing but
kernlint's modules imported) forks one child per call. The child is a new process that ran nothing before: its
working directory, environment, argv, standard streams, exit code and signals are its own, as with
`python -m kernlint.cli`; only the import of kernlint and its dependencies is already done. The server
never runs a command, so no state of one call reaches another.
"""
from __future__ import annotations

import atexit
import multiprocessing
import os
import subprocess
import sys
import tempfile

_context = multiprocessing.get_context("forkserver")
# What `kernlint check` imports on its way (the CLI imports most of it lazily).
_context.set_forkserver_preload(["kernlint.cli", "kernlint.pipeline", "kernlint.trace.load", "kernlint.rules.engine",
                                 "kernlint.rules.loader", "kernlint.parallel.work", "kernlint.report.text_format",
                                 "kernlint.report.json_format"])


def _child(args: list[str], cwd: str, env: dict[str, str], out_path: str, err_path: str, in_path: str,
           code_path: str) -> None:
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    for fd, path, mode in ((0, in_path, os.O_RDONLY), (1, out_path, os.O_WRONLY), (2, err_path, os.O_WRONLY)):
        target = os.open(path, mode)   # the process's own descriptors, as a subprocess's are
        os.dup2(target, fd)
        os.close(target)
    sys.stdin = open(0, encoding="utf-8", closefd=False)   # noqa: SIM115
    sys.stdout = open(1, "w", encoding="utf-8", closefd=False)   # noqa: SIM115 - flushed before _exit
    sys.stderr = open(2, "w", encoding="utf-8", closefd=False)   # noqa: SIM115
    sys.argv = ["kernlint", *args]
    from kernlint.cli import main

    code = 0
    try:
        main(args, prog_name="kernlint")
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    atexit._run_exitfuncs()   # what a process does at its end (kernlint's and its libraries' handlers)
    sys.stdout.flush()
    sys.stderr.flush()
    # The exit code on a channel of its own too: the fork server reports 255 for a child whose status it could
    # not read back (under many concurrent calls, multiprocessing's popen_forkserver sees EOF on its sentinel).
    with open(code_path, "w") as fh:
        fh.write(str(code))
    os._exit(code)


def _text(data: bytes) -> str:
    # What subprocess.run(text=True) gives: decoded, universal newlines.
    return data.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")


def run_fresh(args, *, cwd=None, env: dict[str, str] | None = None, timeout: float = 120,
              stdin: bytes | str | None = None) -> subprocess.CompletedProcess:
    """`kernlint ARGS` in a new process; a CompletedProcess with text stdout and stderr (TimeoutExpired
    past `timeout`, the child killed). `stdin`: what standard input holds (empty by default)."""
    args = [str(a) for a in args]
    with tempfile.TemporaryDirectory() as tmp:
        out_path, err_path, in_path, code_path = (os.path.join(tmp, n) for n in ("out", "err", "in", "code"))
        for path in (out_path, err_path):
            open(path, "wb").close()
        with open(in_path, "wb") as fh:
            fh.write(stdin.encode() if isinstance(stdin, str) else (stdin or b""))
        child = _context.Process(target=_child, args=(args, str(cwd or os.getcwd()),
                                                      dict(os.environ if env is None else env),
                                                      out_path, err_path, in_path, code_path))
        child.start()
        child.join(timeout)
        if child.exitcode is None:
            child.kill()
            child.join()
            raise subprocess.TimeoutExpired(["kernlint", *args], timeout)
        code = child.exitcode
        if code == 255 and os.path.exists(code_path):
            with open(code_path) as fh:
                written = fh.read()
            code = int(written) if written.lstrip("-").isdigit() else code
        with open(out_path, "rb") as out, open(err_path, "rb") as err:
            return subprocess.CompletedProcess(["kernlint", *args], code, _text(out.read()), _text(err.read()))
