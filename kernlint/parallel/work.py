"""The task a worker runs: one trace in, its CheckedTrace (or its error) out.

A worker never raises: an error comes back as a `Failure` holding the exception's class and state, so that
the process that collects the results raises the same typed error (a TraceError stays a TraceError naming its
file, exit 2) whatever the engine does with exceptions of its tasks (pickles them by their args, which
KernlintError's constructor does not take back; logs them; retries them).
"""
from __future__ import annotations

import dataclasses
import gc
import os
import pickle
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernlint.errors import KernlintError
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
    found = Failure(path, type(exc), exc.args, dict(exc.__dict__), f"{type(exc).__name__}: {exc}")
    try:
        pickle.loads(pickle.dumps(found))
    except Exception:   # an exception holding something that does not pickle: keep its text
        return Failure(path, WorkerError, (f"{found.text} (checking {path})",), {}, found.text)
    return found


def check_path(path: str, rules: list, max_bytes: int, baseline_parts: bool, base: str | None = None,
               captures: dict[str, list[str]] | None = None,
               outside_captures: frozenset[str] = frozenset()) -> CheckedTrace | Failure:
    """Load one trace and check it (kernlint.rules.engine.summarize_trace). `base`: the folder a relative
    path is relative to, when this worker runs elsewhere (a remote cluster); the trace keeps `path` as its
    name either way. `captures`: capture traces to merge into a trace, by its path; `outside_captures`: the
    capture traces merged into others, loaded without their capture windows."""
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
        return summarize_trace(table, rules, baseline_part=baseline_parts)
    except Exception as exc:
        return failure(path, exc)
    finally:
        # The table's derived indexes point back at it: a cycle. Clearing them lets the table go with its last
        # reference. A full collection after large tables is a safety net for cycles elsewhere (the collector
        # runs by object count, not bytes); after small ones it would cost as much as checking them.
        large = table is not None and len(table) >= _COLLECT_AFTER_EVENTS
        if table is not None:
            table.derived.clear()
        table = None
        if large:
            gc.collect()
