"""The processes backend: a pool of local worker processes (concurrent.futures), one trace a task.

Workers start from a fork server that has imported kernlint once (no fork of a parent holding tables or
threads, no fresh interpreter per worker); they ignore Ctrl-C, which the parent handles by stopping them.
The rules and options are sent once per worker, not once per trace.

The parallel backends register on every check (the registry loads its built-ins), so this module imports
multiprocessing and concurrent.futures only when a pool runs (`--jobs N`), not when it registers.
"""
from __future__ import annotations

import contextlib
import signal
import sys
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from kernlint.parallel import Backend, register
from kernlint.parallel.work import WorkerError

if TYPE_CHECKING:
    from concurrent.futures import ProcessPoolExecutor

_shared: tuple = ()
# Ctrl-C ignored first (kernlint._sigint_ignored), then kernlint imported once for every forked worker.
_PRELOAD = ["kernlint._sigint_ignored", "kernlint.parallel.work"]


def _start(shared: tuple) -> None:
    global _shared
    signal.signal(signal.SIGINT, signal.SIG_IGN)   # the parent stops the pool; no traceback from a worker
    _shared = shared


def _call(fn, item):
    return fn(item, *_shared)


def _context():
    import multiprocessing

    if sys.platform.startswith("linux"):
        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload(_PRELOAD)
        return ctx
    return multiprocessing.get_context("spawn")


def _stop(pool: ProcessPoolExecutor) -> None:
    processes = list((getattr(pool, "_processes", None) or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    # A worker still busy with a large trace would hold the exit until it finishes: end it, and wait for it
    # to be gone, so that the pool's manager thread (which the interpreter joins at exit) sees a dead pool at
    # once instead of waiting on work that was cancelled.
    for process in processes:
        if process.is_alive():
            process.terminate()
    for process in processes:
        process.join(timeout=5)
        if process.is_alive():
            process.kill()
            process.join(timeout=5)


@contextlib.contextmanager
def _ctrl_c_deferred():
    """Ctrl-C held back while the pool forks its workers (submit starts them): a worker interrupted halfway
    is not yet in the pool's list, so stopping the pool could not end it, and it would die later with a
    traceback of its own. A Ctrl-C pressed meanwhile is raised as soon as this block ends."""
    if threading.current_thread() is not threading.main_thread() or not callable(signal.getsignal(signal.SIGINT)):
        yield   # Ctrl-C ignored (nohup, a background job) or not Python's to handle: nothing to hold back
        return
    pressed: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: pressed.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if pressed:
        previous(signal.SIGINT, None)   # Python's own handler raises KeyboardInterrupt


def run(fn, shared: tuple, items: list, *, workers: int, address: str | None = None
        ) -> Iterator[tuple[int, Any]]:
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
    from concurrent.futures.process import BrokenProcessPool

    pool = ProcessPoolExecutor(max_workers=workers, mp_context=_context(), initializer=_start, initargs=(shared,))
    finished = False
    try:
        with _ctrl_c_deferred():
            futures = {pool.submit(_call, fn, item): i for i, item in enumerate(items)}
        pending = set(futures)
        while pending:
            done, pending = wait(pending, return_when=FIRST_COMPLETED)
            for future in sorted(done, key=futures.get):
                try:
                    result = future.result()
                except BrokenProcessPool:
                    raise WorkerError(f"a worker process died (killed, or out of memory?) before "
                                      f"{items[futures[future]]} was checked: try fewer --jobs") from None
                yield futures[future], result
        finished = True
    finally:
        if finished:
            pool.shutdown(wait=True)
        else:
            _stop(pool)


register(Backend(name="processes", summary="a pool of local worker processes", run=run))
