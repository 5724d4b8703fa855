"""The one registry type: check kinds, output formats, parallel backends and workloads are each a Registry.

A registry holds named items. It fills itself on first use, from plugins, one code path for all of them (as
pytest loads its `default_plugins` and then its `pytest11` entry points): first its default plugins, the
modules of kernlint that hold its built-ins (`Registry(..., default_plugins=("kernlint.workloads.fp8",))`),
then every entry point of its group (`[project.entry-points."kernlint.formats"] mine = "my_pkg.fmt:FORMAT"`).
A plugin is named the way an entry point's value is: `module` (a module that registers its items on import)
or `module:attr` (the item itself, registered under the entry point's name); `load_plugin` loads one more
later (the audit's regressed workloads, a Python file of a source checkout). What a default plugin registers
is built-in. Another package can add items, never replace a built-in one; a plugin that fails to load is one
line naming it (ConfigError), not a traceback. A plugin that raises later, while it runs, is named too:
`plugin_in_traceback` finds the plugin whose module raised, in any process (a worker that never loaded the
registry included), from the entry points alone.

Ground floor: imports nothing of kernlint but errors.
"""
from __future__ import annotations

import importlib
import os
import sys
import types
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Generic, TypeVar

from kernlint.errors import ConfigError, KernlintError, PluginError

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint, EntryPoints

T = TypeVar("T")

# Every installed package's entry points, read once per sys.path (one scan of the dist-infos serves every
# registry: three scans took twice the time of one at start-up).
_entry_points: tuple[tuple[str, ...], EntryPoints] | None = None
# Per sys.path: the text of every entry_points.txt that importlib.metadata would read, or None where it might
# read others too (a zip or egg on the path, a finder of distributions besides the path's). importlib.metadata
# costs 20-30 ms to import; a group that no such file names has no entry point, which these files say for a
# fraction of that.
_declared: tuple[tuple[str, ...], bytes | None] | None = None


def _entry_point_texts(path: tuple[str, ...]) -> bytes | None:
    """The entry_points.txt files of the distributions on `path`, joined; None when importlib.metadata could
    find distributions this scan does not see (it is then asked)."""
    from importlib.machinery import PathFinder

    if any(f is not PathFinder and hasattr(f, "find_distributions") for f in sys.meta_path):
        return None
    texts = []
    for root in path:
        if not isinstance(root, str):
            return None
        try:
            children = os.listdir(root or ".")
        except OSError:
            if os.path.exists(root or "."):   # a zip (or something importlib.metadata may read as one)
                return None
            continue
        is_egg = os.path.basename(root).lower().endswith(".egg")
        for child in children:
            low = child.lower()
            if low.endswith((".dist-info", ".egg-info")) or (is_egg and low == "egg-info"):
                try:
                    with open(os.path.join(root, child, "entry_points.txt"), "rb") as f:
                        texts.append(f.read())
                except OSError:   # no entry points (or an egg-info file): importlib.metadata reads none either
                    continue
    return b"\n".join(texts)


def _may_declare(group: str) -> bool:
    """False when no distribution on sys.path can have an entry point in `group` (no entry_points.txt that
    importlib.metadata reads holds its name)."""
    global _declared
    path = tuple(sys.path)
    if _declared is None or _declared[0] != path:
        _declared = (path, _entry_point_texts(path))
    texts = _declared[1]
    return texts is None or group.encode("utf-8") in texts


def _group(group: str) -> EntryPoints | tuple[EntryPoint, ...]:
    global _entry_points
    if not _may_declare(group):
        return ()
    path = tuple(sys.path)
    if _entry_points is None or _entry_points[0] != path:
        from importlib.metadata import entry_points

        _entry_points = (path, entry_points())
    return _entry_points[1].select(group=group)


# entry-point group -> what its registry holds ("output format"), for naming a plugin of the group.
_WHAT: dict[str, str] = {}


def _described(group: str, entry: EntryPoint) -> str:
    return f"{_WHAT.get(group, group)} plugin {entry.name!r} ({entry.value})"


def _module_of(entry: EntryPoint) -> str:
    return entry.value.partition(":")[0].strip()


def plugin_in_traceback(exc: BaseException) -> str | None:
    """"check kind plugin 'NAME' (module:attr)" for the plugin whose code raised `exc` (the innermost frame of
    its traceback that runs a module of a kernlint entry point, or of that module's top-level package); None
    when no plugin's code is in it. Reads the entry points only when there is a traceback to look at."""
    frames = []
    tb = exc.__traceback__
    while tb is not None:
        frames.append(tb.tb_frame.f_globals.get("__name__") or "")
        tb = tb.tb_next
    if not frames:
        return None
    from importlib.metadata import distributions

    plugins = []   # (module, entry, group) of every kernlint entry point that is not kernlint's own module
    every = [e for dist in distributions() for e in dist.entry_points]
    for entry in sorted(every, key=lambda e: (e.group, e.name)):
        module = _module_of(entry)
        if entry.group.startswith("kernlint.") and module and module.partition(".")[0] != "kernlint":
            plugins.append((module, entry, entry.group))
    for name in reversed(frames):   # the innermost frame first
        for module, entry, group in plugins:
            if name == module or name.startswith(module + "."):
                return _described(group, entry)
        for module, entry, group in plugins:   # a helper module of the plugin's package
            if name.partition(".")[0] == module.partition(".")[0]:
                return _described(group, entry)
    return None


def plugin_failed(exc: BaseException) -> PluginError | None:
    """A PluginError naming the plugin whose code raised `exc` (not a KernlintError: those are the plugin's
    intended one-line errors), or None when no plugin's code raised it."""
    if isinstance(exc, KernlintError):
        return None
    plugin = plugin_in_traceback(exc)
    if plugin is None:
        return None
    return PluginError(None, f"{plugin} raised {type(exc).__name__}: {exc} (a bug in that plugin, not in "
                             "kernlint; rerun with --debug for the traceback)")


def _resolve(value: str) -> object:
    """What a plugin's name names: `module` (the module, imported) or `module:attr.attr` (that object of it), as
    importlib.metadata.EntryPoint.load reads an entry point's value (extras in brackets ignored)."""
    module, _, attrs = value.partition("[")[0].strip().partition(":")
    loaded: object = importlib.import_module(module.strip())
    for attr in filter(None, attrs.strip().split(".")):
        loaded = getattr(loaded, attr)
    return loaded


class Registry(Generic[T]):
    def __init__(self, what: str, group: str, default_plugins: Sequence[str] = (),
                 summary: Callable[[T], str] | None = None) -> None:
        self.what = what            # "output format": how errors name an item
        self.group = group          # the entry-point group other packages register in
        # kernlint's own plugins, loaded first by the same code as the entry points: their items are built-in
        self.default_plugins = tuple(default_plugins)
        self._summary = summary
        self._items: dict[str, T] = {}
        self._builtin_names: set[str] = set()
        self._origins: dict[str, str] = {}   # item name -> the plugin (entry point) that registered it
        self._plugins: dict[str, list[str]] = {}   # plugin (its value) -> the names it registered
        self._state = "empty"       # empty -> loading (default plugins) -> plugins -> loaded
        _WHAT.setdefault(group, what)

    def register(self, name: str, item: T) -> T:
        """Add `item` under `name` (what a plugin module does on import). The same item again is a no-op;
        another item under a taken name is an error, so a plugin cannot shadow a built-in."""
        taken = self._items.get(name)
        if taken is not None and taken is not item:
            raise ConfigError(None, f"{self.what} {name!r} is registered twice")
        self._items[name] = item
        if self._state in ("empty", "loading"):
            self._builtin_names.add(name)
        return item

    def load_plugin(self, value: str, *, name: str | None = None, origin: str | None = None,
                    load: Callable[[], object] | None = None) -> list[str]:
        """Load one plugin and return the names of the items it registered (again: what it registered the first
        time, without loading it twice). `value`: `module` or `module:attr` (an entry point's value); `load`
        imports it otherwise (a Python file by its path: kernlint.checkout.import_path). A module registers its
        own items on import; an item is registered under `name`. `origin` names a plugin that is not
        kernlint's own (`workload plugin 'mine' (my_pkg.mod)`): its failure to load is one line naming it, and
        its items remember it (`origin()`); kernlint's own plugins fail as kernlint's bugs."""
        self._load()   # the default plugins and entry points first (a no-op while they load)
        if value in self._plugins:
            return list(self._plugins[value])
        before = set(self._items)
        try:
            loaded = load() if load is not None else _resolve(value)
        except Exception as exc:
            if origin is None:
                raise
            raise PluginError(None, f"{origin} failed to load: {type(exc).__name__}: {exc}") from exc
        if not isinstance(loaded, types.ModuleType):   # the item itself; a module registered its own
            if name is None:
                raise ConfigError(None, f"{self.what} plugin {value!r} names an item without a name to register "
                                        "it under (name a module that registers its items)")
            self.register(name, loaded)
        added = [n for n in self._items if n not in before]
        if origin is not None:
            for n in added:
                self._origins[n] = origin
        self._plugins[value] = added
        return list(added)

    def _load(self) -> None:
        if self._state != "empty":
            return
        self._state = "loading"
        try:
            for plugin in self.default_plugins:
                self.load_plugin(plugin)
            self._state = "plugins"
            for entry in sorted(_group(self.group), key=lambda e: e.name):
                if entry.name in self._builtin_names:
                    continue   # a plugin cannot replace a built-in
                self.load_plugin(entry.value, name=entry.name, origin=_described(self.group, entry))
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

    def origin(self, name: str) -> str | None:
        """"parallel backend plugin 'NAME' (module:attr)": the entry point that registered the item; None for
        an item registered otherwise (a built-in, or one registered by a call)."""
        self._load()
        return self._origins.get(name)

    def is_builtin(self, name: str) -> bool:
        self._load()
        return name in self._builtin_names

    def summaries(self) -> dict[str, str]:
        """name -> one line (for --help), where the registry knows how to summarize an item."""
        self._load()
        return {n: (self._summary(i) if self._summary else "") for n, i in sorted(self._items.items())}
