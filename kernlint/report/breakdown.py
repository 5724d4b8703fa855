"""What every format says of a trace's device-time breakdown (kernlint.trace.time_breakdown, `TraceReport.time`):
the one-line summary and the top costs, as plain text that the renderers wrap in their own markup."""
from __future__ import annotations

from kernlint.report.safe import format_duration_us, format_share, printable

# Where the HTML report's breakdown section of a trace is: findings link to it.
ANCHOR_PREFIX = "time-"
TOP_SHOWN = 5
# Categories below this share (0.1%) are left out of the one-line summary (they stay in the JSON and HTML tables).
_SHOWN_SHARE = 0.001

_BASIS_PLURAL = {"ProfilerStep": ("ProfilerStep", "ProfilerSteps"), "graph replay": ("graph replay", "graph replays")}


def anchor(position: int) -> str:
    """The HTML id of the breakdown of the `position`-th trace report."""
    return f"{ANCHOR_PREFIX}{position}"


def steps_text(time: dict) -> str:
    """`per step (3 ProfilerSteps, 12.3 ms)` / `in the profiled window (4.5 ms)`: what the means are over, and
    a step's device wall time."""
    wall = format_duration_us(time["wall_us"])
    devices = f" on {time['devices']} devices" if time.get("devices", 1) > 1 else ""
    if time["basis"] == "profiled window":
        return f"in the profiled window ({wall}{devices})"
    one, many = _BASIS_PLURAL.get(time["basis"], (time["basis"], time["basis"]))
    return f"per step ({time['steps']} {one if time['steps'] == 1 else many}, {wall}{devices})"


def summary_line(time: dict) -> str:
    """`device time per step (3 ProfilerSteps, 12.3 ms): gemm 41% · attention 30% · idle 8%`: the categories
    of at least 0.1%, largest first, then idle."""
    parts = [f"{c['category']} {format_share(c['share'])}" for c in time["categories"] if c["share"] >= _SHOWN_SHARE]
    parts.append(f"idle {format_share(time['idle']['share'])}")
    overlap = time["kernel_us"] - time["busy_us"]
    streams = (f" (streams overlap: the categories sum to {format_share(time['kernel_us'] / time['wall_us'])} of "
               "the wall time)" if time["wall_us"] > 0 and overlap > 0.01 * time["wall_us"] else "")
    return f"device time {printable(steps_text(time))}: " + " · ".join(parts) + streams


def top_texts(time: dict, n: int = TOP_SHOWN) -> list[str]:
    """`1. nvjet_sm90_... 243.0 µs (4.1%) gemm, 64 launches` per top cost, at most `n`."""
    out = []
    for i, c in enumerate(time["top"][:n], 1):
        launches = c["launches_per_step"]
        count = f"{launches:.0f}" if abs(launches - round(launches)) < 0.05 else f"{launches:.1f}"
        out.append(f"{i}. {printable(c['name'])} {format_duration_us(c['us_per_step'])} "
                   f"({format_share(c['share'])}) {c['category']}, {count} launch{'' if count == '1' else 'es'}")
    return out
