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


def test_a_cross_rank_finding_shows_the_collective_each_rank_waited_in(tmp_path):
    rank1_sync = REPO / "fixtures" / "traces" / "gpu-tp2-nccl" / "fp8-tp-mlp-rank1-sync"
    page = report(tmp_path, rank1_sync)
    table = page[page.index('<table class="stalls">'):]
    table = table[:table.index("</table>")]
    rows = re.findall(r'<tr data-rank="(\d)"><td>([^<]*)</td><td class="mono">([^<]*)</td>'
                      r'<td class="num">([\d.]+)</td><td class="num stall">([\d.]+)</td>', table)
    assert [(r[0], r[1]) for r in rows] == [("0", "0"), ("1", "1 (divergent)")], table
    assert all(html.unescape(r[2]).startswith("ncclDevKernel_AllReduce_Sum_bf16") for r in rows)
    # rank 1's .item() held the AllReduce: 293.9 ms there against 203.6 µs on rank 0 (the kernel table's times)
    assert [float(r[3]) for r in rows] == [203.6, 293882.0]
    assert [float(r[4]) for r in rows] == [0.0, 293678.5]
