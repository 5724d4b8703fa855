"""The task a worker runs: one trace in, its CheckedTrace (or its error) out.

A worker never raises: an error comes back as a `Failure` holding the exception's class and state, so that
the process that collects the results raises the same typed error (a TraceError stays a TraceError naming its
file, exit 2) whatever the engine does with exceptions of its tasks (pickles them by their args, which
KernlintError's constructor does not take back; logs them; retries them). An exception raised by a plugin's
code (a check kind of another package) comes back as a PluginError naming that plugin: its traceback, which
says so, stays in the worker.

A task carries its index and path, and its result echoes them (`Task`, `Done`): `matched_results` checks that
a backend (another package's, too) returns each task's own result once, never another task's.
"""
from __future__ import annotations

import dataclasses
import gc
import os
import pickle
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernlint.errors import KernlintError, PluginError
from kernlint.registry import plugin_failed
from kernlint.rules.engine import summarize_trace
from kernlint.rules.summary import CheckedTrace
from kernlint.trace import load as trace_load

# Tables of at least this many events are collected as soon as they are checked (check_path).
_COLLECT_AFTER_EVENTS = 100_000


@dataclass
class Failure:
    """An exception raised while checking `path`, as data that pickles."""

    path: str
    kind: type
    args: tuple
    state: dict[str, Any]
    text: str                      # `Type: message`, for when the state does not pickle

    def exception(self) -> BaseException:
        """The same exception again: its class, args and attributes."""
        exc = self.kind.__new__(self.kind)
        exc.args = self.args
        exc.__dict__.update(self.state)
        return exc


class WorkerError(RuntimeError):
    """A worker failed in a way that is not a kernlint error: a bug, or it died (killed, out of memory)."""


def failure(path: str, exc: BaseException) -> Failure:
    named = plugin_failed(exc)   # a plugin's code raised it: the error names the plugin
    if named is not None:
        exc = PluginError(path, named.problem)
    found = Failure(path, type(exc), exc.args, dict(exc.__dict__), f"{type(exc).__name__}: {exc}")
    try:
        pickle.loads(pickle.dumps(found))
    except Exception:   # an exception holding something that does not pickle: keep its text
        return Failure(path, WorkerError, (f"{found.text} (checking {path})",), {}, found.text)
    return found


def check_path(path: str, rules: list, max_bytes: int, baseline_parts: bool, base: str | None = None,
               captures: dict[str, list[str]] | None = None,
               outside_captures: frozenset[str] = frozenset(), graph_roles: bool = False) -> CheckedTrace | Failure:
    """Load one trace and check it (kernlint.rules.engine.summarize_trace). `base`: the folder a relative
    path is relative to, when this worker runs elsewhere (a remote cluster); the trace keeps `path` as its
    name either way. `captures`: capture traces to merge into a trace, by its path; `outside_captures`: the
    capture traces merged into others, loaded without their capture windows. `graph_roles`: the result carries
    the trace's CUDA-graph role (kernlint.trace.pairing.role_of_table), for pairing without a second read."""
    def located(p: str) -> Path:
        return Path(base, p) if base is not None and not os.path.isabs(p) else Path(p)

    where = located(path)
    mine = [located(c) for c in (captures or {}).get(path, ())]
    table = None
    try:
        try:
            # looked up now: tests replace it (with a loader that need not know outside_captures)
            extra = {"outside_captures": True} if path in outside_captures else {}
            table = trace_load.load_trace(where, max_bytes=max_bytes, captures=mine, **extra)
        except KernlintError as exc:
            if str(where) != path and exc.path == str(where):   # name the file as the user did
                raise type(exc)(path, exc.problem, exc.line) from None
            raise
        if str(where) != path:
            table.meta = dataclasses.replace(table.meta, path=path)
        checked = summarize_trace(table, rules, baseline_part=baseline_parts)
        if graph_roles:
            from kernlint.trace.pairing import role_of_table

            checked.graph_role = role_of_table(table, Path(path))
        return checked
    except Exception as exc:
        return failure(path, exc)
    finally:
        # The table's cached indexes point back at it: a cycle. Clearing them lets the table go with its last
        # reference. A full collection after large tables is a safety net for cycles elsewhere (the collector
        # runs by object count, not bytes); after small ones it would cost as much as checking them.
        large = table is not None and len(table) >= _COLLECT_AFTER_EVENTS
        if table is not None:
            table.clear_caches()
        table = None
        if large:
            gc.collect()


@dataclass(frozen=True)
class Task:
    """One trace to check, as a backend receives it: its index among the paths, and the path."""

    index: int
    path: str


@dataclass(frozen=True)
class Done:
    """A task's result, echoing the task it is the result of."""

    index: int
    path: str
    value: Any          # CheckedTrace | Failure


def run_task(task: Task, *shared) -> Done:
    """What a backend runs: check_path(task.path, *shared), its result labelled with the task."""
    return Done(task.index, task.path, check_path(task.path, *shared))


def matched_results(run: Callable[..., Iterator[tuple[int, Any]]], backend: str, origin: str | None,
                    shared: tuple, items: list[str], **options) -> Iterator[tuple[int, Any]]:
    """(index, result) of `run` (a backend's) over `items`, each result checked to be its task's own: a result
    that is not a task's, or is another task's, or a task's again, is a PluginError naming the backend's plugin
    (`origin`), or for a built-in backend a WorkerError (kernlint's bug). Closing this closes the backend's."""
    runner = run(run_task, shared, [Task(i, p) for i, p in enumerate(items)], **options)
    seen: set[int] = set()
    try:
        for index, done in runner:
            problem = None
            if not isinstance(done, Done) or not isinstance(index, int) or not 0 <= index < len(items):
                problem = f"yielded ({type(index).__name__}, {type(done).__name__}), not a task's index and result"
            elif done.index != index or done.path != items[index]:
                problem = (f"returned the result of task #{done.index + 1} ({done.path}) as that of task "
                           f"#{index + 1} ({items[index]})")
            elif index in seen:
                problem = f"returned the result of task #{index + 1} ({items[index]}) twice"
            if problem is not None:
                if origin is not None:
                    raise PluginError(None, f"{origin}: {problem} (a bug in that plugin, not in kernlint; run "
                                            f"without --backend {backend})")
                raise WorkerError(f"the {backend} backend {problem}")
            seen.add(index)
            yield index, done.value
    finally:
        runner.close()
