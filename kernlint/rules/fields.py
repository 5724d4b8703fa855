"""Markers a rule schema puts on its fields. A field typed `Pattern` / `Patterns` holds regular expressions
(or `@name`s of the names table): the loader expands the names and compiles each with RE2, naming the file
and line of a bad one, for every such field of [anchor], [scope] and the check kind's own struct. A kind
declares its pattern fields by their type; no list elsewhere names them."""
from __future__ import annotations

import typing
from functools import cache
from typing import Annotated

import msgspec

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
