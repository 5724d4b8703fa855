"""HTML: one self-contained file (inline SVG timelines, inline style and script, no network) to attach to a PR.

Built with Jinja2 (autoescape on: every name from a trace is escaped). Timelines and charts are SVG drawn
here, not by a charting library: a report stays a few hundred kB and opens at once, where an inline
plotly.js alone would add about 4.5 MB and a second of script start-up. The Content-Security-Policy allows
the page's own inline style and script, by hash, and nothing else (no network, no other script).
"""
from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass, field
from importlib import resources

import jinja2

from kernlint._version import __version__
from kernlint.report import RenderContext, Renderer
from kernlint.report.baseline_view import strip_plot
from kernlint.report.breakdown import summary_line
from kernlint.report.safe import cost_text, format_bytes, format_duration_us, format_share, json_safe, printable
from kernlint.report.step_view import step_context
from kernlint.report.time_view import byte_ticks, step_strip
from kernlint.report.views import Allocations, ReportView, Timeline, build_report_view
from kernlint.rules.result import CheckResult

PLOT_WIDTH = 1000        # px of the time axis
LABEL_WIDTH = 170        # px of the lane labels
LANE_HEIGHT = 24
BAR_HEIGHT = 16
ALLOC_HEIGHT = 160


_CHAR_PX = 6.2   # the width of one character of a bar label (10 px monospace)


@dataclass
class SvgBar:
    x: float
    y: float
    w: float
    classes: str
    name: str
    tooltip: str
    rank: int | None
    mark: str                 # "", "offending", "anchor", "divergent"
    label: str = ""           # the name, cut to what fits on the bar ("" when too narrow)


@dataclass
class SvgTimeline:
    id: str
    title: str
    width: int
    height: int
    lanes: list[tuple[str, float]]
    bars: list[SvgBar]
    flows: list[tuple[float, float, float, float, str]]
    ticks: list[tuple[float, str]]
    labels: list[tuple[float, float, str, str]]   # x, y, text, class: the marked bars named above them
    finding_ids: list[str]
    omitted: int
    multi_rank: bool
    stalls: list = field(default_factory=list)   # views.RankStall rows of a multi-rank timeline


def _ticks(span: float, scale: float) -> list[tuple[float, str]]:
    """Five intervals along the axis; the last label ends at the axis' end instead of running past it."""
    ticks = [(round(LABEL_WIDTH + span * i / 5 * scale, 2), f"+{format_duration_us(span * i / 5)}") for i in range(6)]
    x, label = ticks[-1]
    ticks[-1] = (round(x - 8 * len(label), 2), label)
    return ticks


def _classes(bar) -> str:
    kind = {"op": "kl-op", "runtime": "kl-runtime"}.get(bar.kind, "kl-kernel")
    out = [kind]
    if kind == "kl-kernel":
        out.append(f"cat-{bar.category}")
    out += [f"kl-{m}" for m in bar.marks]
    return " ".join(out)


def layout_timeline(timeline: Timeline, tid: str) -> SvgTimeline:
    span = max(timeline.end - timeline.start, 1e-3)
    scale = PLOT_WIDTH / span
    top = 20 + 11 * min(3, sum(1 for b in timeline.bars if b.marks))   # room for stacked mark labels
    lane_y = {lane: top + i * LANE_HEIGHT for i, lane in enumerate(timeline.lanes)}
    bars, labels = [], []
    for bar in sorted(timeline.bars, key=lambda b: bool(b.marks)):   # marked bars drawn last, on top
        x = LABEL_WIDTH + (bar.start - timeline.start) * scale
        w = max(bar.dur * scale, 1.5)
        y = lane_y[bar.lane] + (LANE_HEIGHT - BAR_HEIGHT) / 2
        tooltip = f"{bar.name}\n{bar.kind}, {bar.category}, {format_duration_us(bar.dur)}"
        if bar.detail:
            tooltip += f"\n{bar.detail}"
        mark = next((m for m in ("offending", "divergent", "anchor") if m in bar.marks), "")
        # One printable line each: the tooltip keeps real line breaks, never a literal "\n".
        tip = "\n".join(printable(line) for line in tooltip.split("\n"))
        fits = int((w - 4) / _CHAR_PX)
        label = "" if fits < 4 else (bar.name if len(bar.name) <= fits else bar.name[:fits - 1] + "…")
        bars.append(SvgBar(round(x, 2), round(y, 2), round(w, 2), _classes(bar), bar.name, tip, bar.rank, mark,
                           printable(label)))
        if mark:
            text = {"offending": "▼ offending", "divergent": "▼ divergent", "anchor": "▼ anchor"}[mark]
            # Labels of marks close together are stacked, not drawn over each other.
            close = sum(1 for lx, _, _, _ in labels if abs(lx - x) < 90)
            labels.append((round(x, 2), round(y - 2 - 11 * close, 2), text,
                           "anchor-label" if mark == "anchor" else "marker-label"))
    flows = []
    for flow in timeline.flows:
        x1 = LABEL_WIDTH + (flow.from_us - timeline.start) * scale
        x2 = LABEL_WIDTH + (flow.to_us - timeline.start) * scale
        y1 = lane_y[flow.from_lane] + LANE_HEIGHT / 2
        y2 = lane_y.get(flow.to_lane, y1) + (LANE_HEIGHT - BAR_HEIGHT) / 2
        flows.append((round(x1, 2), round(y1, 2), round(x2, 2), round(y2, 2),
                      "kl-flow offending" if flow.offending else "kl-flow"))
    ticks = _ticks(span, scale)
    height = top + len(timeline.lanes) * LANE_HEIGHT + 24
    return SvgTimeline(tid, timeline.title, LABEL_WIDTH + PLOT_WIDTH + 10, height,
                       [(lane, y) for lane, y in lane_y.items()], bars, flows, ticks, labels,
                       timeline.finding_ids, timeline.omitted, timeline.multi_rank, list(timeline.stalls))


@dataclass
class SvgAllocations:
    width: int
    height: int
    points: str
    temporaries: list[tuple[float, float, float, float, str]]
    ticks: list[tuple[float, str]]
    peak: str
    y_ticks: list[tuple[float, str]] = field(default_factory=list)   # (y, bytes with their unit)
    t0: float = 0.0          # the x axis: the trace's time axis (trace clock, µs), shared by its charts
    t1: float = 0.0


def layout_allocations(allocations: Allocations, axis: tuple[float, float] | None = None) -> SvgAllocations:
    span = max(allocations.end - allocations.start, 1e-3)
    top = max(allocations.peak, 1)
    sx = PLOT_WIDTH / span
    sy = (ALLOC_HEIGHT - 30) / top
    base = ALLOC_HEIGHT - 20
    coords = []
    previous = 0
    for t, live in allocations.points:   # a step curve: live bytes hold until the next event
        x = LABEL_WIDTH + t * sx
        coords.append(f"{x:.1f},{base - previous * sy:.1f}")
        coords.append(f"{x:.1f},{base - live * sy:.1f}")
        previous = live
    temporaries = []
    for temp in allocations.temporaries:
        x = LABEL_WIDTH + temp.ts * sx
        end = temp.end if temp.end is not None else span
        temporaries.append((round(x, 2), base + 4, round(max((end - temp.ts) * sx, 2.0), 2), 8,
                            printable(f"{temp.label}: allocated at +{format_duration_us(temp.ts)}"
                                      + (f", freed at +{format_duration_us(temp.end)}" if temp.end is not None
                                         else ", not freed in the trace"))))
    ticks = _ticks(span, sx)
    t0, t1 = axis if axis is not None else (allocations.start, allocations.end)
    return SvgAllocations(LABEL_WIDTH + PLOT_WIDTH + 10, ALLOC_HEIGHT + 10, " ".join(coords), temporaries, ticks,
                          format_bytes(allocations.peak), byte_ticks(allocations.peak, base, ALLOC_HEIGHT - 30),
                          t0, t1)


def _ci_bar(details: dict | None) -> dict | None:
    """A confidence interval drawn on a ±range axis, in % of the baseline median."""
    if not details or "ci_low_us" not in details or not details.get("baseline_median_us"):
        return None
    median = details["baseline_median_us"]
    low, high = 100 * details["ci_low_us"] / median, 100 * details["ci_high_us"] / median
    shift = 100 * details["shift_us"] / median
    limit = max(abs(low), abs(high), 1.0) * 1.2
    scale = 80 / limit

    def x(v: float) -> float:
        return round(90 + v * scale, 2)

    return {"x1": x(low), "x2": x(high), "dot": x(shift), "zero": x(0), "faster": shift < 0,
            "label": f"{shift:+.2f}% [{low:+.2f}, {high:+.2f}]"}


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.PackageLoader("kernlint.report", "templates"),
                             autoescape=jinja2.select_autoescape(default=True, default_for_string=True),
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters["us"] = format_duration_us
    env.filters["size"] = format_bytes
    env.filters["safe_text"] = printable
    env.filters["cost"] = cost_text
    env.filters["share"] = format_share
    env.filters["time_summary"] = summary_line
    return env


def _asset(name: str) -> str:
    return resources.files("kernlint.report").joinpath("templates", name).read_text(encoding="utf-8")


def _sha256(text: str) -> str:
    return "sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode()


def render_view(view: ReportView, embed: str = "auto") -> str:
    css, js = _asset("report.css"), _asset("report.js")
    css, js = css + _asset("timeline.css"), js + _asset("timeline.js")   # the step timeline (step_view)
    csp = (f"default-src 'none'; style-src '{_sha256(css)}'; script-src '{_sha256(js)}'; img-src data:; "
           "base-uri 'none'; form-action 'none'")
    timelines = {}
    for trace in view.traces:
        n = int(trace.id.split("-")[1])
        for i, timeline in enumerate(trace.timelines):
            timelines[f"tl-{n}-{i}"] = layout_timeline(timeline, f"tl-{n}-{i}")
    cross = [layout_timeline(t, f"ranks-{i}") for i, t in enumerate(view.cross_rank)]
    allocations = {t.id: layout_allocations(t.allocations, t.axis) for t in view.traces if t.allocations}
    strips = {t.id: step_strip(t.time_section, t.axis, t.time.get("devices", 1)) for t in view.traces
              if t.time_section is not None and t.axis is not None}
    baseline = None if view.baseline is None else [
        dict(row=row, ci=_ci_bar(row.details), strip=strip_plot(row.details)) for row in view.baseline]
    metadata = json_safe(view.metadata)
    return _environment().get_template("report.html.j2").render(
        view=view, css=css, js=js, csp=csp, timelines=timelines, cross=cross, allocations=allocations,
        baseline=baseline, metadata=metadata, version=__version__, label_width=LABEL_WIDTH, strips=strips,
        **step_context(view, embed))


def render(result: CheckResult, ctx: RenderContext | None = None) -> str:
    """`check --format html`: needs the tables the check read (CheckResult.tables)."""
    return render_view(build_report_view(result, result.tables or []), embed=getattr(ctx, "embed_trace", "auto"))


def render_audit(run, ctx: RenderContext | None = None) -> str:
    """`audit --html FILE`: each workload's traces and verdicts in one report."""
    from kernlint.report.views import audit_report_view

    return render_view(audit_report_view(run))


# What this format renders (kernlint.report.builtin_formats declares it).
RENDERER = Renderer(check=render, audit=render_audit)
