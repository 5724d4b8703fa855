"""The HTML report without a browser: what the view keeps of a trace, the Content-Security-Policy against
the page's own inline code, grouping, the baseline section, the per-rank stall table. (`audit --html` is in
tests/test_run_and_audit.py; tests/test_html_report.py opens the reports in headless Chromium.)"""
from __future__ import annotations

import base64
import hashlib
import html
import json
import re
import sys
from pathlib import Path

import numpy as np
from click.testing import CliRunner

from kernlint.cli import main
from kernlint.report.views import MAX_INSTANCES, build_report_view
from kernlint.rules.engine import check_traces
from kernlint.rules.loader import load_rules
from kernlint.rules.result import CheckResult
from kernlint.trace.load import load_trace

REPO = Path(__file__).resolve().parents[1]
GPU = REPO / "fixtures" / "traces" / "gpu"
REGRESSED = GPU / "block_regressed.pt.trace.json.gz"


def report(tmp_path, *args) -> str:
    out = tmp_path / "report.html"
    result = CliRunner().invoke(main, ["report", *map(str, args), "-o", str(out), "--isolated"])
    assert result.exit_code == 0, result.output
    return out.read_text(encoding="utf-8")


def _sha(text: str) -> str:
    return "sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode()


def test_the_csp_allows_exactly_the_inline_style_and_script(tmp_path):
    page = report(tmp_path, REGRESSED)
    (csp,) = re.findall(r'<meta http-equiv="Content-Security-Policy" content="([^"]+)"', page)
    csp = html.unescape(csp)
    assert "default-src 'none'" in csp and "unsafe" not in csp
    (style,) = re.findall(r"<style>(.*?)</style>", page, re.S)
    (script,) = re.findall(r"<script>(.*?)</script>", page, re.S)
    assert f"style-src '{_sha(style)}'" in csp and f"script-src '{_sha(script)}'" in csp
    assert not re.search(r"""\s(?:src|href)=["'](?:https?:)?//""", page)     # nothing fetched from anywhere
    assert ' style="' not in page                                            # inline style attributes are blocked


def test_a_view_keeps_the_offending_kernel_its_anchor_and_the_flows():
    table = load_trace(REGRESSED)
    # The subject is KL001's fills: the trace's RMSNorm, a chain of kernels, is also (rightly) flagged by KL902
    # unfused-norm, a card of its own, so the view is of KL001 alone.
    rules = [r for r in load_rules() if r.id == "KL001"]
    view = build_report_view(CheckResult(check_traces([table], rules), rules, 1), [table])
    (trace,) = view.traces
    # The two layers' fills are one cause (one line): one card, the timeline of its worst instance's layer.
    (card,) = view.findings
    assert card.count == 2 and [i.scope for i in card.listed] == [card.finding.scope, card.instances[0].scope]
    assert [len(t.flows) for t in trace.timelines] == [3]    # fill, quant and GEMM launches of that layer
    assert trace.timelines[0].title == card.finding.scope
    for timeline in trace.timelines:
        marked = {(b.name, m) for b in timeline.bars for m in b.marks}
        assert marked == {("vectorized_elementwise_kernel[FillFunctor<BFloat16>]", "offending"),
                          ("scale_1x128_kernel", "anchor")}
        assert sum(f.offending for f in timeline.flows) == 1
    assert [f.timeline_id for f in view.findings] == ["tl-0-0"]
    assert trace.kernels[0].total_us >= trace.kernels[-1].total_us            # most device time first


def test_repeated_findings_are_grouped_with_their_instances(tmp_path):
    sys.path.insert(0, str(REPO / "bench" / "trace_speed"))
    from generate import grow

    path = grow(GPU / "block_regressed.pt.trace.json.gz", 0, tmp_path / "big.json", copies=49)  # 30K events
    table = load_trace(path)
    # The subject is KL001's repeated fills: the copies' RMSNorm chains are also (rightly) flagged by KL902
    # unfused-norm, a cause of its own, so the view and the page are of KL001 alone.
    rules = [r for r in load_rules() if r.id == "KL001"]
    result = CheckResult(check_traces([table], rules), rules, 1)
    view = build_report_view(result, [table])
    assert len(result.findings) > 40
    # Both layers' fills in every copy are one cause (one line): one card, its instances listed inside.
    (card,) = view.findings
    assert card.count == len(result.findings)
    assert len(card.instances) == MAX_INSTANCES and len(card.listed) == MAX_INSTANCES + 1
    page = report(tmp_path, path, "--select", "KL001")
    assert page.count('class="kl-finding') == 1 and f"{card.count} times" in page
    assert f"{card.count} instances: 2 scopes" in page and page.count('class="kl-instance"') == MAX_INSTANCES + 1


def test_the_baseline_section_lists_the_added_kernel(tmp_path):
    baseline = tmp_path / "b.json"
    assert CliRunner().invoke(main, ["baseline", "record", str(GPU / "block_clean.pt.trace.json.gz"), "-o",
                                     str(baseline), "-q", "--isolated"]).exit_code == 0
    page = report(tmp_path, REGRESSED, "--baseline", baseline)
    section = page[page.index('<section id="baseline">'):]
    section = section[:section.index("</section>")]
    assert section.count('class="kl-added') == 2 and "FillFunctor" in section
    assert 'id="baseline"' not in report(tmp_path, REGRESSED)


def test_hostile_names_are_escaped_in_the_markup(tmp_path):
    payload = '<script>alert(1)</script><img src=x onerror="alert(2)">'
    events = [
        {"ph": "X", "cat": "python_function", "name": f"nn.Module: Linear{payload}", "pid": 1, "tid": 1, "ts": 0,
         "dur": 100},
        {"ph": "X", "cat": "cpu_op", "name": "aten::fill_", "pid": 1, "tid": 1, "ts": 10, "dur": 5},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 11, "dur": 2,
         "args": {"correlation": 1}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 30, "dur": 2,
         "args": {"correlation": 2}},
        {"ph": "X", "cat": "kernel", "name": f"fill_kernel{payload}", "pid": 0, "tid": 7, "ts": 50, "dur": 1,
         "args": {"correlation": 1}},
        {"ph": "X", "cat": "kernel", "name": "scale_1x128_kernel", "pid": 0, "tid": 7, "ts": 52, "dur": 1,
         "args": {"correlation": 2}},
    ]
    path = tmp_path / "hostile.json"
    path.write_text(json.dumps({"traceEvents": events}))
    page = report(tmp_path, path)
    assert "<img src=x" not in page and page.count("<script>") == 1
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page


def test_a_cross_rank_finding_shows_who_waited_for_whom(tmp_path):
    """Rank 1 alone calls .item() (KL003/KL004), yet it is rank 0 that reached the AllReduce last: 293.7 ms
    after rank 1 on their common clock (rank 0's trace began 291.9 ms later), so rank 1 spent 293.9 ms in it
    waiting for rank 0, and rank 0 0.2 ms. The table names rank 0 as the one waited for, rank 1 as the waiter
    (and the rank of the divergent launch, which is not what the collective waited for)."""
    rank1_sync = REPO / "fixtures" / "traces" / "gpu-tp2-nccl" / "fp8-tp-mlp-rank1-sync"
    page = report(tmp_path, rank1_sync)
    table = page[page.index('<table class="stalls">'):]
    table = table[:table.index("</table>")]
    rows = re.findall(r'<tr class="(stall-\w+)" data-rank="(\d)" data-waited-for="(\d?)"( data-last="1")?'
                      r'( data-divergent="1")?>(.*?)</tr>', table, re.S)
    assert [(r[0], r[1], r[2], bool(r[3]), bool(r[4])) for r in rows] == [
        ("stall-late", "0", "", True, False), ("stall-waiter", "1", "0", False, True)], table
    cells = {r[1]: re.findall(r'data-us="([\d.]+)"', r[5]) for r in rows}
    assert [float(v) for v in cells["0"]] == [203.6, 0.0]           # time in it, waiting
    assert float(cells["1"][0]) == 293882.0 and abs(float(cells["1"][1]) - 293678.5) < 1.0
    assert "arrived last: rank 1 waited for it" in rows[0][5] and "waited for rank 0" in rows[1][5]
    caption = html.unescape(re.sub(r"<[^>]+>", "", table[:table.index("</caption>")]))
    assert "Rank 0 reached ncclDevKernel_AllReduce_Sum_bf16_RING_LL last, 293.7 ms after rank 1" in caption
    assert "is on rank 1, which was not late" in caption and "common clock" in caption


def test_collective_waits_from_the_clock_and_from_the_durations_agree(monkeypatch):
    """Who waited for whom, with no divergent launch (the run's first collective) and with one; arrival on the
    common clock, and (no clock) from the times in the collective, whose ends are taken as simultaneous."""
    from kernlint.report import rank_view
    from kernlint.rules.result import Finding

    nccl = REPO / "fixtures" / "traces" / "gpu-tp2-nccl"
    clean = {t.meta.rank: t for t in map(load_trace, sorted((nccl / "fp8-tp-mlp").glob("*.pt.trace.json.gz")))}
    waits = rank_view.collective_waits(clean, None)
    assert waits.basis == "clock" and waits.late_rank == 1 and not waits.after_divergent
    (waiter,) = [r for r in waits.rows if not r.last]
    assert waiter.rank == 0 and waiter.waited_for == 1 and abs(waiter.waited_us - 619400.7) < 2.0
    assert waits.summary.startswith("Rank 1 reached") and "divergent" not in waits.summary
    monkeypatch.setattr(rank_view, "_clock_offset_us", lambda table: None)
    by_durations = rank_view.collective_waits(clean, None)
    assert by_durations.basis == "durations" and by_durations.late_rank == 1
    # The two readings differ by no more than the collective's ends differ on the clock (about 1 µs).
    assert waits.end_spread_us < 2.0
    assert all(abs(a.waited_us - b.waited_us) <= waits.end_spread_us + 0.05
               for a, b in zip(by_durations.rows, waits.rows, strict=True))
    # The divergent rank that is also the late one is named as the cause.
    late = Finding("KL004", "host-sync-on-some-ranks", "error", "", clean[1].path, "ranks 0, 1", "aten::item", "op",
                   "sync_op", "aten::item", None, None, None, float(np.nanmin(clean[1].columns["ts"])), rank=1)
    said = rank_view.collective_waits(clean, late)
    assert said.after_divergent and said.late_rank == 1 and "Rank 1 issued the divergent launch" in said.summary


def test_a_strip_plot_draws_every_run_of_both_sides_on_one_axis():
    from kernlint.report.baseline_view import MAX_DOTS, strip_plot

    assert strip_plot(None) is None and strip_plot({"shift_us": 1.0, "baseline_runs_us": [1.0]}) is None
    details = {"direction": "slower", "baseline_runs_us": [10.0, 10.2, 9.9, 10.1], "candidate_runs_us": [11.0, 11.3],
               "baseline_run_process": [0, 0, 1, 1]}
    plot = strip_plot(details)
    base, cand = plot.rows
    assert (base.side, base.runs, len(base.dots)) == ("baseline", 4, 4) and (cand.runs, len(cand.dots)) == (2, 2)
    assert {cls for _, _, cls in base.dots} == {"strip-dot strip-p0", "strip-dot strip-p1"}   # a colour a process
    assert {cls for _, _, cls in cand.dots} == {"strip-dot strip-cand strip-slower"}
    xs = [x for row in plot.rows for x, _, _ in row.dots]
    assert plot.label_width <= min(xs) and max(xs) <= plot.width          # one axis, inside the plot
    assert base.median_x < cand.median_x and "4 vs 2 runs" in plot.caption
    many = strip_plot({"baseline_runs_us": [1.0] * 3000, "candidate_runs_us": [2.0] * 5})
    assert len(many.rows[0].dots) <= MAX_DOTS and many.rows[0].runs == 3000
