"""The HTML report's baseline section, as layout data: the strip plot of a timing finding's per-run durations.

A timing verdict (kernlint.baseline.stats) rests on two sets of runs; its finding's details carry both
(`baseline_runs_us`, `candidate_runs_us`, and the process of each run where a side had several). The strip
plot draws every run as a dot on one shared µs axis, one row per side, with each side's median as a tick, so
a reader judges by eye how far apart the two clouds sit against their own spread: the noise the verdict
weighed. Pixels here, markup in the template.
"""
from __future__ import annotations

from dataclasses import dataclass

from kernlint.report.safe import format_duration_us

STRIP_WIDTH = 200        # px, the whole plot
STRIP_LABEL = 34         # px, the side labels on the left
ROW_HEIGHT = 16          # px per side
MAX_DOTS = 400           # per side: more runs are thinned evenly (the median and range stay exact)
_PALETTE = 6             # process colours, cycled (report.css: .strip-p0 .. .strip-p5)


@dataclass
class StripRow:
    side: str                              # "baseline" or "candidate"
    label: str                             # "base", "cand"
    y: float                               # the row's middle
    dots: list[tuple[float, float, str]]   # (x, y, css class) per run drawn
    median_x: float
    tooltip: str                           # runs, median, range, processes: one line each
    runs: int                              # runs on this side (all, not only those drawn)


@dataclass
class StripPlot:
    width: int
    height: int
    label_width: int
    rows: list[StripRow]
    ticks: list[tuple[float, str, str]]    # (x, text, text-anchor) of the axis' ends
    axis_y: float
    caption: str                           # "20 vs 10 runs; medians 23.10 µs -> 24.25 µs"


def _numbers(values) -> list[float]:
    if not isinstance(values, list):
        return []
    return [float(v) for v in values if isinstance(v, (int, float)) and not isinstance(v, bool) and v == v]


def _us(value: float) -> str:
    """A run's duration with the decimals its size deserves (a 1.5 µs kernel moves by ns)."""
    if abs(value) >= 1000:
        return format_duration_us(value)
    digits = 3 if abs(value) < 10 else 2 if abs(value) < 100 else 1
    return f"{value:.{digits}f} µs"


def _median(values: list[float]) -> float:
    s = sorted(values)
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


def strip_plot(details: dict | None) -> StripPlot | None:
    """The strip plot of a timing finding's details; None for a finding without both sides' runs."""
    if not details:
        return None
    sides = [("baseline", "base", _numbers(details.get("baseline_runs_us"))),
             ("candidate", "cand", _numbers(details.get("candidate_runs_us")))]
    if not all(values for _, _, values in sides):
        return None
    everything = [v for _, _, values in sides for v in values]
    low, high = min(everything), max(everything)
    pad = max((high - low) * 0.06, abs(high) * 1e-4, 1e-6)
    low, high = low - pad, high + pad
    plot = STRIP_WIDTH - STRIP_LABEL - 6

    def x(v: float) -> float:
        return round(STRIP_LABEL + (v - low) / (high - low) * plot, 2)

    direction = details.get("direction")
    rows = []
    for n, (side, label, values) in enumerate(sides):
        middle = 4 + ROW_HEIGHT * n + ROW_HEIGHT / 2
        process = details.get(f"{side}_run_process")
        process = process if isinstance(process, list) and len(process) == len(values) else None
        step = max(1, -(-len(values) // MAX_DOTS))
        dots = []
        for i in range(0, len(values), step):
            # A fixed jitter (no randomness: the same report draws the same plot), within the row.
            dy = ((i * 7) % 9 - 4) * (ROW_HEIGHT - 6) / 8
            if process is not None:
                cls = f"strip-dot strip-p{int(process[i]) % _PALETTE}"
            else:
                cls = "strip-dot " + ("strip-base" if side == "baseline" else f"strip-cand strip-{direction}")
            dots.append((x(values[i]), round(middle + dy, 2), cls))
        median = _median(values)
        processes = len(set(process)) if process is not None else 1
        step_note = details.get(f"{side}_runs_step")
        tip = [f"{side}: {len(values)} run(s)" + (f" listed (every {step_note}th run)" if step_note else "")
               + (f" from {processes} processes (a colour each)" if processes > 1 else ""),
               f"median {_us(median)}, range {_us(min(values))} to "
               f"{_us(max(values))}"]
        rows.append(StripRow(side, label, middle, dots, x(median), "\n".join(tip), len(values)))
    axis_y = 4 + ROW_HEIGHT * len(sides) + 2
    ticks = [(STRIP_LABEL, _us(low + pad), "start"),
             (STRIP_WIDTH - 6, _us(high - pad), "end")]
    caption = (f"{rows[0].runs} vs {rows[1].runs} runs; medians {_us(_median(sides[0][2]))} -> "
               f"{_us(_median(sides[1][2]))}")
    return StripPlot(STRIP_WIDTH, int(axis_y + 14), STRIP_LABEL, rows, ticks, axis_y, caption)
