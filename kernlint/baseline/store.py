"""Reading and writing baseline files: JSON, schema-versioned, in a stable order, written atomically.

One launch per line, its timing samples on the same line, so that a baseline diff in a pull request shows
which launch changed.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec

from kernlint.baseline.model import SCHEMA_VERSION, Baseline
from kernlint.errors import BaselineError
from kernlint.errors import shorten as shorten_text
from kernlint.fileio import read_user_file, write_text_atomically

MAX_BASELINE_BYTES = 256 << 20


def _is_leaf(value) -> bool:
    """Scalars, and lists or objects of scalars or of lists of scalars (a launch with its samples)."""
    if isinstance(value, dict):
        return all(not isinstance(v, dict) and (not isinstance(v, list) or all(not isinstance(x, (list, dict))
                                                                            for x in v)) for v in value.values())
    if isinstance(value, list):
        return all(not isinstance(x, (list, dict)) for x in value)
    return True


def _lines(value, indent: int) -> str:
    if _is_leaf(value):
        return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(", ", ": "))
    pad, inner = " " * indent, " " * (indent + 1)
    if isinstance(value, dict):
        items = [f"{inner}{json.dumps(k, ensure_ascii=False)}: {_lines(v, indent + 1)}" for k, v in value.items()]
        return "{\n" + ",\n".join(items) + f"\n{pad}}}"
    return "[\n" + ",\n".join(inner + _lines(v, indent + 1) for v in value) + f"\n{pad}]"


def render_baseline(baseline: Baseline) -> str:
    """JSON with one launch a line (fields in schema order, scopes and programs sorted by name)."""
    return _lines(msgspec.to_builtins(baseline), 0) + "\n"


def write_baseline(path: str | Path, baseline: Baseline) -> Path:
    try:
        return write_text_atomically(path, render_baseline(baseline))
    except OSError as exc:
        raise BaselineError(path, f"cannot write the baseline: {exc.strerror or exc}") from None


_MISSING = object()


class _Head(msgspec.Struct):
    schema_version: Any = _MISSING
    programs: msgspec.Raw = msgspec.Raw(b"")


def shorten(text: str, limit: int = 200) -> str:
    """A baseline's value in an error: 200 characters at most, with the marker."""
    return shorten_text(text, limit)


def _read_regular_file(path: Path) -> bytes:
    """The file's bytes, at most MAX_BASELINE_BYTES: a folder, a FIFO or a device is refused before reading
    (a FIFO would block the read forever)."""
    return read_user_file(path, MAX_BASELINE_BYTES, BaselineError, "baseline")


def read_baseline(path: str | Path) -> Baseline:
    path = Path(path)
    data = _read_regular_file(path)
    try:   # the head first, cheaply (the programs stay raw JSON), then the whole, typed in one pass
        head = msgspec.json.decode(data, type=_Head)
    except msgspec.ValidationError:
        head = None
    except msgspec.DecodeError as exc:
        raise BaselineError(path, f"not JSON ({shorten(str(exc))}); record one with `kernlint baseline record`"
                            ) from None
    except RecursionError:
        raise BaselineError(path, "not a kernlint baseline: its JSON nests too deeply to read") from None
    if head is None or head.schema_version is _MISSING or not memoryview(head.programs).nbytes:
        raise BaselineError(path, "not a kernlint baseline (no schema_version and programs); record one with "
                                  "`kernlint baseline record`")
    if head.schema_version != SCHEMA_VERSION:
        raise BaselineError(path, f"baseline schema version {shorten(repr(head.schema_version))}; this kernlint "
                                  f"reads version {SCHEMA_VERSION}: record it again with `kernlint baseline record`")
    try:
        baseline = msgspec.json.decode(data, type=Baseline)
    except msgspec.ValidationError as exc:
        raise BaselineError(path, f"malformed baseline: {shorten(str(exc))}") from None
    except (msgspec.DecodeError, RecursionError):
        raise BaselineError(path, "not a kernlint baseline: its JSON nests too deeply to read") from None
    for name, program in baseline.programs.items():
        if program.runs < 1:
            raise BaselineError(path, f"malformed baseline: {shorten(name)} has runs = {program.runs}; at least 1")
        if len(program.total_us) > program.runs:
            raise BaselineError(path, f"malformed baseline: {shorten(name)} has {len(program.total_us)} timed runs "
                                      f"of {program.runs}")
        for label, scope in program.scopes.items():
            for launch in scope.launches:
                if len(launch.us) > program.runs:   # at most one sample a run (none where it had no duration)
                    raise BaselineError(path, f"malformed baseline: {shorten(name)} / {shorten(label)} / position "
                                              f"{launch.pos} has {len(launch.us)} samples for {program.runs} runs")
                if any(not (us >= 0 and us < float("inf")) for us in launch.us):
                    raise BaselineError(path, f"malformed baseline: {shorten(name)} / {shorten(label)} / position "
                                              f"{launch.pos} has a negative or non-finite time")
    return baseline
