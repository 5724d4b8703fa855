"""Checking many traces in parallel: the map over traces runs on a backend, the reduce runs here.

Each task loads one trace, runs the per-trace rules and summarizes it (kernlint.parallel.work.check_path);
what comes back is small (kernlint.rules.summary). The reduce (run grouping, cross-rank rules, baseline
comparison) is kernlint.rules.engine.combine_checked, the same code the serial path runs, so the reports do
not depend on the backend or on the order in which workers finish: results are put back in argument order.

Backends are registered by name; each is one module of this package that calls `register` when imported,
listed in DEFAULT_PLUGINS (the registry loads them as it loads another package's plugin):
`serial` (in this process, one trace at a time), `processes` (a local pool of worker processes),
`dask` (Dask distributed: a local cluster, or an existing one by its scheduler address). A backend yields
(index, result) pairs as tasks finish; closing its generator cancels what has not started.

Layer: imports trace, baseline and rules (through the engine); never report or the CLI. Prints nothing.
"""
from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernlint.errors import ConfigError
from kernlint.parallel.work import Failure, WorkerError, matched_results
from kernlint.registry import Registry
from kernlint.rules.summary import CheckedTrace

__all__ = ["Backend", "BACKENDS", "WorkerError", "backend_names", "check_paths", "get_backend", "register",
           "resolve_jobs"]

# One task a trace: fn(item, *shared) -> result. `shared` is sent once per worker where the backend can.
Runner = Callable[..., Iterator[tuple[int, Any]]]


@dataclass(frozen=True)
class Backend:
    name: str
    summary: str
    # run(fn, shared, items, workers=N, address=ADDRESS or None) -> (index, result) as tasks finish.
    run: Runner
    remote: bool = False      # can connect to an existing cluster (--scheduler ADDRESS)


# The built-in backends: kernlint's own plugins of the registry, loaded as an entry point's module is (each
# registers its backend on import; Dask itself is imported only when its backend runs).
DEFAULT_PLUGINS: tuple[str, ...] = ("kernlint.parallel.serial", "kernlint.parallel.processes",
                                    "kernlint.parallel.dask_cluster")

# The backends: the default plugins, then those other packages name in the entry-point group
# `kernlint.parallel_backends` (a Backend, or a module that registers its own).
BACKENDS: Registry[Backend] = Registry("parallel backend", "kernlint.parallel_backends",
                                       default_plugins=DEFAULT_PLUGINS, summary=lambda b: b.summary)


def register(backend: Backend) -> Backend:
    return BACKENDS.register(backend.name, backend)


def backend_names() -> list[str]:
    return BACKENDS.names()


def get_backend(name: str) -> Backend:
    return BACKENDS.get(name)


def cpu_count() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def resolve_jobs(jobs: int | str | None) -> int:
    """`--jobs`: a positive number, or 0 / "auto" for one worker per CPU this process may use."""
    if jobs in (None, "auto", 0, "0"):
        return cpu_count()
    try:
        n = int(jobs)
    except (TypeError, ValueError):
        raise ConfigError(None, f"--jobs: expected a number of worker processes or auto, got {jobs!r}") from None
    if n < 0:
        raise ConfigError(None, f"--jobs: expected 0 (auto) or more, got {n}")
    return n or cpu_count()


def check_paths(paths: Sequence[str | Path], rules: Sequence, *, max_bytes: int, jobs: int = 1,
                backend: str | None = None, scheduler: str | None = None,
                baseline_parts: bool = False, captures: dict[str, list[str]] | None = None,
                outside_captures: Iterable[str] = (), graph_roles: bool = False) -> list[CheckedTrace]:
    """Check each trace file on a backend: its report and summary (kernlint.rules.summary.CheckedTrace), in
    the order of `paths`. `jobs`: worker processes of a local backend; `backend`: a registered name (default:
    serial for one job or one trace, else processes; dask when `scheduler` names an existing cluster);
    `baseline_parts`: also make each trace's baseline part (its runs and environment); `captures`: a trace's
    capture traces, merged into it; `outside_captures`: capture traces merged into others, checked outside
    their capture windows (kernlint.trace.pairing); `graph_roles`: each result carries its trace's CUDA-graph
    role (CheckedTrace.graph_role). Raises the error of the first failing trace in the order
    of `paths` (the one a serial check would meet first), of the type it was raised with."""
    items = [str(p) for p in paths]
    name = backend or ("dask" if scheduler else "serial" if jobs <= 1 or len(items) <= 1 else "processes")
    chosen = get_backend(name)
    if scheduler and not chosen.remote:
        raise ConfigError(None, f"--scheduler connects to a cluster: it needs a backend that can (dask), "
                                f"not {name}")
    # A remote worker has a working directory of its own: relative paths are resolved against ours.
    base = os.getcwd() if scheduler else None
    shared = (list(rules), max_bytes, baseline_parts, base, dict(captures or {}), frozenset(outside_captures),
              graph_roles)
    results: list[Any] = [None] * len(items)
    done = [False] * len(items)
    first_failed: int | None = None
    # each result checked to be its own task's: a plugin backend that mixes them up is named, not trusted
    runner = matched_results(chosen.run, name, BACKENDS.origin(name), shared, items,
                             workers=max(1, min(jobs, len(items))), address=scheduler)
    try:
        for i, result in runner:
            results[i], done[i] = result, True
            if isinstance(result, Failure) and (first_failed is None or i < first_failed):
                first_failed = i
            # Stop as soon as the error a serial check would raise first is known.
            if first_failed is not None and all(done[:first_failed]):
                break
    finally:
        runner.close()
    if first_failed is not None:
        raise results[first_failed].exception()
    missing = [items[i] for i, ok in enumerate(done) if not ok]
    if missing:   # a backend that stopped early without saying why
        raise WorkerError(f"no result for {missing[0]} from the {name} backend")
    return results
