"""The processes backend: a pool of local worker processes (concurrent.futures), one trace a task.

Workers start from a fork server that has imported kernlint once (no fork of a parent holding tables or
threads, no fresh interpreter per worker); they ignore Ctrl-C, which the parent handles by stopping them. SIGTERM
and SIGHUP to the parent stop them the same way (kernlint.fileio.TerminatedError): the pool's processes never
outlive it.
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

from kernlint.fileio import termination_raised
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


# Held back while the pool forks its workers; SIGTERM and SIGHUP raise TerminatedError there (run()).
_DEFERRED_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@contextlib.contextmanager
def _signals_deferred():
    """Ctrl-C (and SIGTERM, SIGHUP) held back while the pool forks its workers (submit starts them): a worker
    interrupted halfway is not yet in the pool's list, so stopping the pool could not end it, and it would die
    later with a traceback of its own. A signal that came meanwhile is handled as soon as this block ends."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pressed: list[int] = []
    previous = {}
    for signo in _DEFERRED_SIGNALS:
        handler = signal.getsignal(signo)
        if callable(handler):   # ignored (nohup, a background job) or not Python's to handle: left alone
            previous[signo] = signal.signal(signo, lambda signum, frame: pressed.append(signum))
    try:
        yield
    finally:
        for signo, handler in previous.items():
            signal.signal(signo, handler)
    if pressed:
        previous[pressed[0]](pressed[0], None)   # Python's own handler raises KeyboardInterrupt; ours TerminatedError


def run(fn, shared: tuple, items: list, *, workers: int, address: str | None = None
        ) -> Iterator[tuple[int, Any]]:
    with termination_raised():
        yield from _run_pool(fn, shared, items, workers)


def _run_pool(fn, shared: tuple, items: list, workers: int) -> Iterator[tuple[int, Any]]:
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
    from concurrent.futures.process import BrokenProcessPool

    pool = ProcessPoolExecutor(max_workers=workers, mp_context=_context(), initializer=_start, initargs=(shared,))
    finished = False
    try:
        with _signals_deferred():
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
