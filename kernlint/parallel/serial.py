"""The serial backend: every trace in this process, one at a time (only one table alive at once)."""
from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from kernlint.parallel import Backend, register


def run(fn, shared: tuple, items: list, *, workers: int = 1, address: str | None = None
        ) -> Iterator[tuple[int, Any]]:
    for i, item in enumerate(items):
        yield i, fn(item, *shared)


register(Backend(name="serial", summary="in this process, one trace at a time", run=run))
