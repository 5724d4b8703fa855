"""Making trace-borne values safe to show: no terminal control, no NaN.

A trace is data from elsewhere. Its kernel, op, frame and scope names, and the paths it came from, may hold
escape sequences (retitle the terminal, clear the screen), carriage returns or newlines (forge a line of
kernlint's own output). Every text renderer passes every such string through `printable`, which shows those
characters visibly (`\\x1b`, `\\n`) instead of sending them to the terminal. The JSON renderers pass their
data through `json_safe`, so a NaN or an infinity becomes null rather than invalid JSON.
"""
from __future__ import annotations

import math
import re
from typing import Any

from kernlint.rules.result import is_missing  # noqa: F401  (the renderers' import)

# C0 controls (newline and tab included), DEL, C1 controls; and the Unicode line and paragraph separators
# and bidirectional overrides/isolates, which reorder or break what a terminal shows.
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(m: re.Match) -> str:
    ch = m.group()
    if ch in _NAMED:
        return _NAMED[ch]
    code = ord(ch)
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def printable(value: object) -> str:
    """`value` as one line of inert text: control characters (C0 with newline and tab, DEL, C1, so every
    escape sequence), line separators and bidi controls are shown as `\\x1b`, `\\n`, `\\u202e`; a missing
    value (None, NaN, pandas NA) is the empty string."""
    if is_missing(value):
        return ""
    text = value if isinstance(value, str) else str(value)
    return _UNSAFE.sub(_escape, text)


def present(value: Any) -> Any:
    """`value`, or None where it is missing (NaN, NA): for optional fields that a renderer tests."""
    return None if is_missing(value) else value


def json_safe(value: Any) -> Any:
    """A copy of `value` (dicts, lists, tuples, scalars) that json.dumps(allow_nan=False) accepts: NaN and
    infinite floats and pandas NA become None; numpy scalars become Python ones; dict keys become strings."""
    if isinstance(value, dict):
        return {str(k) if not isinstance(k, str) else k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        items = sorted(value, key=repr) if isinstance(value, (set, frozenset)) else value
        return [json_safe(v) for v in items]
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, int):
        return value
    if is_missing(value):
        return None
    item = getattr(value, "item", None)   # numpy scalars
    if callable(item) and type(value).__module__ == "numpy":
        return json_safe(item())
    return value


def format_duration_us(us: float | None) -> str:
    """A device time in µs as a reader wants it: `12.3 µs`, `4.5 ms`, `1.20 s`; `-` when unknown."""
    if us is None or is_missing(us):
        return "-"
    for limit, unit, scale in ((1e3, "µs", 1.0), (1e6, "ms", 1e3)):
        if abs(us) < limit:
            return f"{us / scale:.1f} {unit}"
    return f"{us / 1e6:.2f} s"


def format_bytes(n: int | None) -> str:
    """A byte count: `512 B`, `1.5 KiB`, `3.0 GiB`; `-` when unknown."""
    if n is None or is_missing(n):
        return "-"
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(value) < 1024 or unit == "GiB":
            return f"{int(value)} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GiB"  # pragma: no cover


def finite_number(value) -> float | None:
    """A finite number, or None: a missing cost may come as None, NaN, pandas NA or ""."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) and type(value).__module__ != "numpy":
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def format_share(share: float | None) -> str | None:
    """A share as a percentage for a reader: `0.4%`, `0.095%`, `<0.01%`; None when unknown."""
    share = finite_number(share)
    if share is None:
        return None
    pct = 100.0 * share
    if pct >= 0.1:
        return f"{pct:.1f}%"
    return f"{pct:.2g}%" if pct >= 0.01 else ("0%" if pct == 0 else "<0.01%")


def measured_cost_text(cost) -> str | None:
    """A finding's measured cost (kernlint.rules.cost): `12.3 µs host blocked + device idle (0.4% of the
    step)`; None when it measured no time."""
    us = finite_number(getattr(cost, "us", None)) if cost is not None else None
    if us is None:
        return None
    share = format_share(cost.share)
    where = [f"{share} of {cost.of}"] if share and cost.of else []
    category = getattr(cost, "category", None)
    if category:   # where it falls in the trace's device-time breakdown
        where.append(f"in {printable(category)}")
    return f"{format_duration_us(us)} {cost.basis}" + (f" ({'; '.join(where)})" if where else "")


def cost_text(finding) -> str | None:
    """What a finding (or a cause: its instances summed) costs, for a reader: `34.7 µs host blocked + device
    idle (1.3% of the step), 1.4 µs device time, 256.0 KiB allocated`; None when unknown. The device time is
    not repeated where the measured cost is that device time."""
    parts = []
    cost = getattr(finding, "cost", None)
    measured = measured_cost_text(cost)
    if measured:
        parts.append(measured)
    device_us, allocated = finite_number(finding.device_us), finite_number(finding.bytes)
    if device_us is not None and not (measured and cost.basis == "device time"):
        parts.append(f"{format_duration_us(device_us)} device time")
    if allocated is not None:
        parts.append(f"{format_bytes(int(allocated))} allocated")
    return ", ".join(parts) or None
