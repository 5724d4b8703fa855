"""Compiling the regular expressions that rules bring: in linear time, whatever the pattern.

A rule file is input like a trace: a pattern such as `(a+)+$` takes Python's backtracking `re` minutes on
a 32-character name. Rule patterns therefore run on RE2 (google-re2), whose matching time is linear in
the name. RE2 has no lookaround and no backreferences; a rule pattern that needs them is rejected with its
file and line by the rule loader. The names table's own patterns (kernlint.trace.names) are ours, written
to be linear, and may use lookbehind: they run on `re`.
"""
from __future__ import annotations

import re
from functools import lru_cache
from typing import Protocol

import re2

from kernlint.trace.names import NAMED_PATTERNS

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False          # RE2 would log parse errors on stderr; we raise PatternError instead
_OPTIONS.max_mem = 64 << 20          # per pattern: a pathological one fails to compile instead of hogging memory
_TRUSTED = frozenset(NAMED_PATTERNS.values())


class Searcher(Protocol):
    def search(self, text: str): ...


class PatternError(ValueError):
    """A pattern that the linear-time engine cannot run (or that does not parse)."""


@lru_cache(maxsize=4096)
def compile_pattern(pattern: str) -> Searcher:
    """A compiled pattern with `.search(text)`, matching like `re.search`."""
    if pattern in _TRUSTED:
        return re.compile(pattern)
    try:
        return re2.compile(pattern, options=_OPTIONS)
    except re2.error as exc:
        detail = exc.args[0].decode(errors="replace") if exc.args and isinstance(exc.args[0], bytes) else str(exc)
        try:
            re.compile(pattern)
        except re.error as bad:
            raise PatternError(f"bad regular expression {pattern!r}: {bad}") from None
        raise PatternError(f"{pattern!r} needs a construct the linear-time engine (RE2) does not run "
                           f"({detail}): lookaround and backreferences are not supported in rule patterns; "
                           "use a names-table entry (@name) or rewrite it") from None
