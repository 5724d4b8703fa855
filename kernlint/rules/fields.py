"""Markers a rule schema puts on its fields: the loader checks a field by its declared type, so a check kind
declares what its fields hold and no list elsewhere names them.

- A field typed `Pattern` / `Patterns` / `OptionalPattern` holds regular expressions (or `@name`s of the names
  table): the loader expands the names and compiles each with RE2, naming the file and line of a bad one, for
  every such field of [anchor], [scope] and the check kind's own struct.
- A field typed by a value set holds names from a fixed vocabulary: `DeviceCategories` (categories of device
  events, trace.names.DEVICE_CATEGORIES), `OpCategories` (of host events: ops and runtime calls,
  HOST_CATEGORIES), `Categories` (either: a field read at kernel and at op level), `OpCategoryNames` (host
  categories, compared as names: no "*"), `EventKinds` (trace.table.KINDS), `Dtypes` (dtype names as
  trace.dtypes spells them). "*" (every working event) is accepted where the set says so. A value outside
  the set is an error naming the file, the line and the key, with the known values."""
from __future__ import annotations

import typing
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Annotated

import msgspec

from kernlint.trace.dtypes import INPUT_TYPE_NAMES, SCALAR_TYPE_CODES
from kernlint.trace.kinds import KINDS
from kernlint.trace.names import DEVICE_CATEGORIES, HOST_CATEGORIES

PATTERN = msgspec.Meta(extra={"kernlint": "pattern"})
Pattern = Annotated[str, PATTERN]
OptionalPattern = Annotated[str | None, PATTERN]
Patterns = Annotated[list[str], PATTERN]


@cache
def pattern_fields(struct: type) -> tuple[tuple[str, str], ...]:
    """(attribute, key in the rule file) of each pattern field of a msgspec Struct type."""
    hints = typing.get_type_hints(struct, include_extras=True)
    out = []
    for f in msgspec.structs.fields(struct):
        hint = hints.get(f.name)
        if typing.get_origin(hint) is Annotated and any(m is PATTERN for m in hint.__metadata__):
            out.append((f.name, f.encode_name))
    return tuple(out)


@dataclass(frozen=True)
class ValueSet:
    """The values a field may hold: one of `known()`, or "*" where `wildcard` (every working event)."""

    name: str                               # the field type, as schema and docs name it: "device-category"
    what: str                               # how an error names a value: "device category"
    known: Callable[[], tuple[str, ...]]
    wildcard: bool = False

    def problem(self, value: object) -> str | None:
        """None when `value` is one of the set; else the error, listing the known values."""
        if (self.wildcard and value == "*") or value in self.known():
            return None
        return f"unknown {self.what} {value!r} (known: {', '.join(self.known())}{', *' if self.wildcard else ''})"


def _unique(*groups: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(v for g in groups for v in g))


DEVICE_CATEGORY = ValueSet("device-category", "device category", lambda: DEVICE_CATEGORIES, wildcard=True)
OP_CATEGORY = ValueSet("op-category", "op category", lambda: HOST_CATEGORIES, wildcard=True)
CATEGORY = ValueSet("category", "category", lambda: _unique(DEVICE_CATEGORIES, HOST_CATEGORIES), wildcard=True)
OP_CATEGORY_NAME = ValueSet("op-category-name", "op category", lambda: HOST_CATEGORIES)
EVENT_KIND = ValueSet("event-kind", "event kind", lambda: KINDS)
DTYPE = ValueSet("dtype", "dtype", lambda: _unique(tuple(SCALAR_TYPE_CODES.values()),
                                                   tuple(INPUT_TYPE_NAMES.values())))
VALUE_SETS: dict[str, ValueSet] = {v.name: v for v in (DEVICE_CATEGORY, OP_CATEGORY, CATEGORY, OP_CATEGORY_NAME,
                                                        EVENT_KIND, DTYPE)}


def _of(value_set: ValueSet) -> msgspec.Meta:
    return msgspec.Meta(extra={"kernlint": value_set.name})


DeviceCategories = Annotated[list[str], _of(DEVICE_CATEGORY)]
OpCategories = Annotated[list[str], _of(OP_CATEGORY)]
Categories = Annotated[list[str], _of(CATEGORY)]
OpCategoryNames = Annotated[list[str], _of(OP_CATEGORY_NAME)]
EventKinds = Annotated[list[str], _of(EVENT_KIND)]
Dtypes = Annotated[list[str], _of(DTYPE)]


@cache
def value_set_fields(struct: type) -> tuple[tuple[str, str, ValueSet], ...]:
    """(attribute, key in the rule file, value set) of each field of a msgspec Struct type that a value set
    types (DeviceCategories, EventKinds, ...)."""
    hints = typing.get_type_hints(struct, include_extras=True)
    out = []
    for f in msgspec.structs.fields(struct):
        hint = hints.get(f.name)
        if typing.get_origin(hint) is not Annotated:
            continue
        for meta in hint.__metadata__:
            extra = getattr(meta, "extra", None) if isinstance(meta, msgspec.Meta) else None
            found = VALUE_SETS.get((extra or {}).get("kernlint", ""))
            if found is not None:
                out.append((f.name, f.encode_name, found))
    return tuple(out)
