"""The HTML report's finding cards, "Where the time goes", allocation axes and run metadata, opened in headless
Chromium (tests/browser.py), with the numbers on the page checked against the trace's own breakdown
(kernlint.trace.time_breakdown, TraceReport.time).

One card per cause: a `new_ones` placeholder in one `forward` is one card however many layers, steps, graph
replays, ranks or runs repeat it, its instances listed inside and its worst instance's timeline drawn in it.
"""
from __future__ import annotations

import math
import re
import shutil
from pathlib import Path

import pytest

from browser import opened
from fresh_cli import run_fresh
from kernlint.rules.engine import check_trace
from kernlint.trace.load import load_trace

REPO = Path(__file__).resolve().parents[1]
TRACES = REPO / "fixtures" / "traces"
REGRESSED = TRACES / "gpu" / "block_regressed.pt.trace.json.gz"            # 2 FP8 linear layers, one fill each
NEW_ONES = TRACES / "gpu" / "placeholder_new_ones.pt.trace.json.gz"
GRAPH_LAYERS = TRACES / "gpu-graphs" / "graph-new-ones-in-window.pt.trace.json.gz"   # layers x graph replays
TP2_NEW_ONES = TRACES / "gpu-tp2-nccl" / "fp8-tp-mlp-new-ones"            # the placeholder on 2 ranks
DECODE = TRACES / "gpu-decode" / "decode-clean-steps.pt.trace.json.gz"     # 3 ProfilerSteps, one stream
DUMMY_OLD = TRACES / "gpu" / "dummy_init_old.pt.trace.json.gz"            # allocations, FP8 temporaries
WITH_RUN_JSON = TRACES / "gpu-audit" / "fp8-block-linear-new-ones.pt.trace.json.gz"   # .run.json beside it
INTERNAL_ID = re.compile(r"\b(tl|ranks)-\d+(-\d+)?\b")
SOURCE = "regressed/fp8_linear_new_ones.py:17"


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("html_cards")
    runs = path / "two-runs"
    for run in ("run1", "run2"):   # the same program recorded twice: one cause
        (runs / run).mkdir(parents=True)
        shutil.copy(REGRESSED, runs / run / REGRESSED.name)
    return path


REPORTS = {
    "layers": [REGRESSED],
    "one": [NEW_ONES],
    "graph_layers": [GRAPH_LAYERS],
    "two_runs": ["{workdir}/two-runs"],
    "ranks": [TP2_NEW_ONES],
    "decode": [DECODE],
    "dummy_old": [DUMMY_OLD],
    "run_json": [WITH_RUN_JSON],
}


@pytest.fixture(scope="module")
def render(workdir):
    done: dict[str, Path] = {}

    def get(name: str) -> Path:
        if name not in done:
            out = workdir / f"{name}.html"
            inputs = [str(a).format(workdir=workdir) for a in REPORTS[name]]
            proc = run_fresh(["check", *inputs, "--format", "html", "-o", str(out)], cwd=workdir, timeout=300)
            assert proc.returncode in (0, 1) and out.is_file(), proc.stderr[-3000:]
            done[name] = out
        return done[name]

    return get


# --- one card per cause ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("name, instances, traces, ranks", [
    ("layers", 2, 1, None),          # two layers
    ("one", 1, 1, None),
    ("graph_layers", 32, 1, None),   # layers x graph replays
    ("two_runs", 4, 2, None),        # two runs of two layers
    ("ranks", 4, 2, {"0", "1"}),     # two ranks
])
def test_a_regression_repeated_over_layers_steps_runs_and_ranks_is_one_card(browser, render, name, instances,
                                                                            traces, ranks):
    b = opened(browser, render(name))
    cards = b.css('section#findings article.kl-finding[data-rule="KL001"]')
    assert len(cards) == 1, f"{name}: {len(cards)} KL001 cards"
    (card,) = cards
    text = b.text_content(card)
    assert SOURCE in text
    if instances > 1:
        assert f"{instances} times" in text and f"{instances} instances" in text, text[:400]
        rows = card.find_elements("css selector", "tr.kl-instance")
        assert len(rows) == min(instances, 21)
        cells = [[b.text_content(c).strip() for c in r.find_elements("css selector", "td")] for r in rows]
        listed = {c[0] for c in cells}
        assert len(listed) == traces, listed
        if ranks:
            assert {c[1] for c in cells} == ranks
    # The worst instance's timeline is drawn in the card, its fill marked; the link to it says what it is.
    drawn = card.find_elements("css selector", "svg.kl-timeline .kl-kernel.kl-offending")
    assert drawn and all("FillFunctor" in d.get_attribute("data-name") for d in drawn)
    (link,) = card.find_elements("css selector", "a.kl-timeline-link")
    assert not INTERNAL_ID.search(link.text) and "launches and kernels in module" in link.text, link.text
    target = link.get_attribute("href").rsplit("#", 1)[1]
    assert card.find_elements("css selector", f'[id="{target}"]'), "the link points outside the card"
    # No other card repeats it: the page holds one card per cause.
    sources = [b.text_content(s) for s in b.css("article.kl-finding .kl-source")]
    assert sum(SOURCE in s for s in sources) == 1, sources


def test_one_cause_keeps_the_findings_section_short(browser, render):
    """The issue's page: 9 cards and 6,727 px for one placeholder; one card (and the RMSNorm's) now."""
    b = opened(browser, render("graph_layers"))
    height = b.driver.execute_script("return document.querySelector('section#findings').scrollHeight")
    assert len(b.css("article.kl-finding")) <= 3 and height < 2500, height


# --- where the time goes -------------------------------------------------------------------------------------

_STEPS = """
return Array.from(arguments[0].querySelectorAll('tr.kl-step-row')).map(function (r) {
  var cats = {};
  r.querySelectorAll('td.kl-step-cat').forEach(function (c) {
    cats[c.getAttribute('data-category')] = parseFloat(c.getAttribute('data-us')); });
  return [r.getAttribute('data-step'), parseFloat(r.getAttribute('data-wall-us')), cats];
});"""


@pytest.mark.parametrize("name, trace", [("layers", REGRESSED), ("decode", DECODE)])
def test_each_steps_categories_and_idle_add_up_to_its_wall_time(browser, render, name, trace):
    expected = check_trace(load_trace(trace), []).time     # TraceReport.time, as the report has it
    b = opened(browser, render(name))
    (section,) = b.css("section.kl-time")
    steps = b.driver.execute_script(_STEPS, section)
    assert len(steps) == expected["steps"] == len(expected["per_step"]), steps
    for (label, wall, cats), want in zip(steps, expected["per_step"]):
        assert label == want["label"]
        assert math.isclose(wall, want["wall_us"], rel_tol=1e-6)
        assert math.isclose(sum(cats.values()), wall, rel_tol=0.01), (label, wall, cats)
        assert math.isclose(cats.pop("idle"), want["idle_us"], rel_tol=1e-6)
        assert {c: v for c, v in cats.items() if v} == pytest.approx(want["categories"], rel=1e-6)
    # The means: every category's share and idle's add up to the wall time (one stream).
    shares = [float(r.text.rstrip("%").lstrip("<")) for r in section.find_elements(
        "css selector", ".kl-time-table tr.kl-time-row td:last-child")]
    assert sum(shares) == pytest.approx(100, abs=1.0), shares
    delay = b.text_content(section.find_element("css selector", ".kl-launch-delay"))
    assert "mean" in delay and "median" in delay and "queue time" in delay, delay
    assert "no communication kernels" in b.text_content(section.find_element("css selector", ".kl-comm-overlap"))


def test_each_finding_is_listed_beside_the_category_its_cost_falls_in(browser, render):
    b = opened(browser, render("layers"))
    (section,) = b.css("section.kl-time")
    (row,) = section.find_elements("css selector", '.kl-time-findings tr[data-rule="KL001"]')
    cells = [c.text for c in row.find_elements("css selector", "td")]
    assert "FillFunctor" in cells[1] and cells[3] == "memset/fill" and "in memset/fill" in cells[2], cells
    card = row.find_element("css selector", "a").get_attribute("href").rsplit("#", 1)[1]
    assert b.css(f'article.kl-finding[id="{card}"][data-rule="KL001"]')


def test_a_folder_of_ranks_has_a_per_rank_breakdown_with_communication_overlap(browser, render):
    b = opened(browser, render("ranks"))
    (table,) = b.css("table.kl-rank-time")
    assert [r.get_attribute("data-rank") for r in table.find_elements("css selector", "tr.kl-rank-row")] == ["0", "1"]
    heads = [h.text for h in table.find_elements("css selector", "th")]
    assert "communication" in heads and "idle" in heads and "comm overlapped" in heads, heads
    overlap = [b.text_content(e) for e in b.css("section.kl-time .kl-comm-overlap")]
    assert len(overlap) == 2 and all("overlapped by other device work" in t for t in overlap), overlap


# --- allocations and metadata -------------------------------------------------------------------------------

_TICKS = "return Array.from(arguments[0].querySelectorAll('text.tick:not(.y-tick)')).map(function (t) {" \
         " return [t.getAttribute('x'), t.textContent]; });"


def test_the_allocation_chart_has_a_byte_axis_and_the_traces_time_axis(browser, render):
    from kernlint.report.time_view import trace_axis

    b = opened(browser, render("dummy_old"))
    (chart,) = b.css("section#allocations svg.kl-allocations")
    labels = [t.text for t in chart.find_elements("css selector", "text.y-tick")]
    assert len(labels) == 5 and labels[0] == "0 B", labels
    assert all(re.fullmatch(r"\d+(\.\d)? (B|KiB|MiB|GiB)", label) for label in labels), labels
    assert labels[-1] == "768.0 KiB"                     # the peak (the header says it too)
    assert "768.0 KiB" in b.text_content(b.css("section#allocations")[0])
    assert "bytes live" in b.text_content(chart)
    # One x scale per trace: the allocation chart and the steps strip are drawn on the trace's time axis.
    (strip,) = b.css("svg.kl-step-strip")
    t0, t1 = trace_axis(load_trace(DUMMY_OLD))
    for svg in (chart, strip):
        assert float(svg.get_attribute("data-t0")) == pytest.approx(t0)
        assert float(svg.get_attribute("data-t1")) == pytest.approx(t1)
    assert b.driver.execute_script(_TICKS, chart) == b.driver.execute_script(_TICKS, strip)


def test_run_metadata_is_a_key_value_table(browser, render):
    b = opened(browser, render("layers"))
    (section,) = b.css("section#metadata")
    assert not section.find_elements("css selector", "pre")
    rows = {th.text: th.find_element("xpath", "following-sibling::td").text
            for th in section.find_elements("css selector", "table.kl-meta th")}
    assert rows.get("gpu") == "NVIDIA H200", rows
    b = opened(browser, render("run_json"))              # a .run.json: versions, NVML, nested
    (section,) = b.css("section#metadata")
    nested = section.find_elements("css selector", "table.kl-meta table.kl-meta")
    assert nested, "nested values are not tables"
    assert "{" not in section.text and '"' not in section.text, section.text[:300]
