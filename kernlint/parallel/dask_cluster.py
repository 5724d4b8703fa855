"""The dask backend: Dask distributed, on a local cluster of worker processes or on an existing cluster.

`--backend dask --jobs N` starts a LocalCluster of N single-threaded worker processes for this check and
stops it afterwards; `--scheduler ADDRESS` connects to a running scheduler instead (its workers need this
version of kernlint installed and the trace files readable at the same paths; relative paths are resolved
against this process's working directory). Dask is an optional extra: `pip install 'kernlint[distributed]'`.

The module registers on every check; what only a Dask run needs (logging, socket, uuid) is imported then.
"""
from __future__ import annotations

import re
import signal
import threading
from collections.abc import Iterator
from typing import Any

from kernlint.errors import ConfigError
from kernlint.parallel import Backend, register
from kernlint.parallel.work import WorkerError

_EXTRA = "pip install 'kernlint[distributed]'"


def _call(fn, shared: tuple, item):
    return fn(item, *shared)


def _distributed():
    try:
        import distributed
    except ImportError:
        raise ConfigError(None, f"the dask backend needs Dask distributed, which is not installed: {_EXTRA}") from None
    return distributed


def _probe(address: str) -> None:
    """A tcp:// scheduler that refuses or does not answer fails here at once: Dask's client would retry
    for its whole timeout before saying so."""
    scheme = re.match(r"([a-z]+)://", address)
    if scheme is None and re.fullmatch(r"\[?[^\]/\s]+?\]?:\d+", address):
        address = f"tcp://{address}"   # host:port, as Dask reads it
    elif scheme is None or scheme.group(1) not in _SCHEMES:
        # Dask would retry such an address for its whole timeout and then print its own traceback (issue 38).
        raise ConfigError(None, f"--scheduler {address}: not a Dask scheduler address (tcp://HOST:PORT, HOST:PORT, "
                                f"or {', '.join(f'{s}://...' for s in sorted(_SCHEMES - {'tcp'}))})")
    found = re.fullmatch(r"tcp://\[?([^\]/]+?)\]?:(\d+)/?", address)
    if not found:
        return   # another protocol (tls://, ucx://, inproc://): Dask's client decides
    import socket

    try:
        socket.create_connection((found.group(1), int(found.group(2))), timeout=_PROBE_S).close()
    except OSError as exc:
        raise ConfigError(None, f"--scheduler {address}: cannot connect to a Dask scheduler there "
                                f"({exc.strerror or type(exc).__name__})") from None


_PROBE_S = 5.0
# The address schemes Dask's comm layer knows.
_SCHEMES = frozenset({"tcp", "tls", "ucx", "inproc", "ws", "wss"})


def _connect(distributed, address: str | None, workers: int):
    """(client, cluster or None): a client of the cluster at `address`, or of a new local one."""
    import logging

    if address:
        _probe(address)
        try:
            return distributed.Client(address, timeout="15s", set_as_default=False), None
        except (OSError, TimeoutError, ValueError) as exc:
            raise ConfigError(None, f"--scheduler {address}: cannot connect to a Dask scheduler there "
                                    f"({type(exc).__name__}: {exc})") from None
    # Ctrl-C is this process's to handle (it stops the cluster): the worker processes started now inherit an
    # ignored SIGINT (a blocked one is not inherited), so none prints a traceback of its own. A Ctrl-C pressed
    # during these start-up seconds is lost; the next one interrupts. Only the main thread may set handlers.
    main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN) if main else None
    try:
        cluster = distributed.LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                           dashboard_address=None, silence_logs=logging.CRITICAL)
    finally:
        if main:
            signal.signal(signal.SIGINT, previous)
    try:
        return distributed.Client(cluster, set_as_default=False), cluster
    except BaseException:
        cluster.close()
        raise


def run(fn, shared: tuple, items: list, *, workers: int, address: str | None = None
        ) -> Iterator[tuple[int, Any]]:
    import uuid

    distributed = _distributed()
    client, cluster = _connect(distributed, address, workers)
    index: dict = {}
    try:
        [data] = client.scatter([shared], broadcast=True, hash=False)   # the rules once per worker
        run_id = uuid.uuid4().hex[:12]
        futures = [client.submit(_call, fn, data, item, key=f"kernlint-check-{run_id}-{i}", pure=False)
                   for i, item in enumerate(items)]
        index = {f.key: i for i, f in enumerate(futures)}
        for future in distributed.as_completed(futures, loop=client.loop):
            try:
                result = future.result()
            except distributed.KilledWorker:
                raise WorkerError(f"the Dask worker checking {items[index[future.key]]} died (killed, or out "
                                  "of memory?)") from None
            yield index[future.key], result
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


register(Backend(name="dask", summary="Dask distributed: a local cluster, or an existing one (--scheduler)",
                 run=run, remote=True))
