"""The one registry type: check kinds, output formats, parallel backends and workloads are each a Registry.

A registry holds named items. It fills itself on first use: the built-ins first (`builtins()` imports the
modules that register them), then every entry point of its group (`[project.entry-points."kernlint.formats"]
mine = "my_pkg.my_format:FORMAT"`): an entry point names either the item itself, registered under the entry
point's name, or a module that registers its items on import. Another package can add items, never replace a
built-in one; a plugin that fails to load is one line naming it (ConfigError), not a traceback.

Ground floor: imports nothing of kernlint but errors.
"""
from __future__ import annotations

import sys
import types
from collections.abc import Callable, Iterator
from importlib.metadata import EntryPoints, entry_points
from typing import Generic, TypeVar

from kernlint.errors import ConfigError

T = TypeVar("T")

# Every installed package's entry points, read once per sys.path (one scan of the dist-infos serves every
# registry: three scans took twice the time of one at start-up).
_entry_points: tuple[tuple[str, ...], EntryPoints] | None = None


def _group(group: str) -> EntryPoints:
    global _entry_points
    path = tuple(sys.path)
    if _entry_points is None or _entry_points[0] != path:
        _entry_points = (path, entry_points())
    return _entry_points[1].select(group=group)


class Registry(Generic[T]):
    def __init__(self, what: str, group: str, builtins: Callable[[], None] = lambda: None,
                 summary: Callable[[T], str] | None = None) -> None:
        self.what = what            # "output format": how errors name an item
        self.group = group          # the entry-point group other packages register in
        self._builtins = builtins
        self._summary = summary
        self._items: dict[str, T] = {}
        self._builtin_names: set[str] = set()
        self._state = "empty"       # empty -> loading -> loaded

    def register(self, name: str, item: T) -> T:
        """Add `item` under `name` (what a module does on import). The same item again is a no-op; another
        item under a taken name is an error, so a plugin cannot shadow a built-in."""
        taken = self._items.get(name)
        if taken is not None and taken is not item:
            raise ConfigError(None, f"{self.what} {name!r} is registered twice")
        self._items[name] = item
        if self._state != "plugins":
            self._builtin_names.add(name)
        return item

    def _load(self) -> None:
        if self._state != "empty":
            return
        self._state = "loading"
        self._builtins()
        self._state = "plugins"
        try:
            for entry in sorted(_group(self.group), key=lambda e: e.name):
                if entry.name in self._builtin_names:
                    continue   # a plugin cannot replace a built-in
                try:
                    loaded = entry.load()
                except Exception as exc:   # another package's bug: one line naming it
                    raise ConfigError(None, f"{self.what} plugin {entry.name!r} ({entry.value}) failed to load: "
                                            f"{type(exc).__name__}: {exc}") from exc
                if not isinstance(loaded, types.ModuleType):   # the item itself; a module registered its own
                    self.register(entry.name, loaded)
        finally:
            self._state = "loaded"

    def get(self, name: str) -> T:
        self._load()
        if name not in self._items:
            raise ConfigError(None, f"no {self.what} {name!r} (known: {', '.join(self.names())})")
        return self._items[name]

    def find(self, name: str) -> T | None:
        """The item, or None."""
        self._load()
        return self._items.get(name)

    def values(self) -> list[T]:
        self._load()
        return list(self._items.values())

    def remove(self, name: str) -> T:
        """Take an item out (a test's temporary one)."""
        self._builtin_names.discard(name)
        return self._items.pop(name)

    def __contains__(self, name: object) -> bool:
        self._load()
        return name in self._items

    def names(self) -> list[str]:
        self._load()
        return sorted(self._items)

    def items(self) -> Iterator[tuple[str, T]]:
        """(name, item) in the order registered: the built-ins as their module lists them, then plugins."""
        self._load()
        yield from list(self._items.items())

    def is_builtin(self, name: str) -> bool:
        self._load()
        return name in self._builtin_names

    def summaries(self) -> dict[str, str]:
        """name -> one line (for --help), where the registry knows how to summarize an item."""
        self._load()
        return {n: (self._summary(i) if self._summary else "") for n, i in sorted(self._items.items())}
