"""Reading and writing baseline files: JSON, schema-versioned, in a stable order, written atomically.

One launch per line, its timing samples on the same line, so that a baseline diff in a pull request shows
which launch changed.
"""
from __future__ import annotations

import json
from pathlib import Path

import msgspec

from kernlint.baseline.model import SCHEMA_VERSION, Baseline
from kernlint.errors import BaselineError
from kernlint.fileio import write_text_atomically

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


def read_baseline(path: str | Path) -> Baseline:
    path = Path(path)
    try:
        with open(path, "rb") as fh:
            data = fh.read(MAX_BASELINE_BYTES + 1)
    except IsADirectoryError:
        raise BaselineError(path, "is a folder, not a baseline file") from None
    except OSError as exc:
        raise BaselineError(path, f"cannot read the baseline: {exc.strerror or exc}") from None
    if len(data) > MAX_BASELINE_BYTES:
        raise BaselineError(path, f"larger than {MAX_BASELINE_BYTES >> 20} MiB: not a kernlint baseline")
    try:
        raw = msgspec.json.decode(data)
    except msgspec.DecodeError as exc:
        raise BaselineError(path, f"not JSON ({exc}); record one with `kernlint baseline record`") from None
    if not isinstance(raw, dict) or "schema_version" not in raw or "programs" not in raw:
        raise BaselineError(path, "not a kernlint baseline (no schema_version and programs); record one with "
                                  "`kernlint baseline record`")
    if raw["schema_version"] != SCHEMA_VERSION:
        raise BaselineError(path, f"baseline schema version {raw['schema_version']!r}; this kernlint reads "
                                  f"version {SCHEMA_VERSION}: record it again with `kernlint baseline record`")
    try:
        baseline = msgspec.convert(raw, Baseline)
    except msgspec.ValidationError as exc:
        raise BaselineError(path, f"malformed baseline: {exc}") from None
    for name, program in baseline.programs.items():
        for label, scope in program.scopes.items():
            for launch in scope.launches:
                if any(not (us >= 0 and us < float("inf")) for us in launch.us):
                    raise BaselineError(path, f"malformed baseline: {name} / {label} / position {launch.pos} "
                                              "has a negative or non-finite time")
    return baseline
