"""The HTML report's baseline section and rank view, opened in a real headless Chromium (tests/browser.py): the
baseline table fits the page, every timing finding draws both sides' runs, every run of a folder gets its rank
view, and the stall table says who waited for whom.

Reports are rendered in this process through the pipeline (a KL804 timing case needs its trace slowed, as
fixtures/cases/KL804.toml does), once per module.
"""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from browser import Browser
from kernlint.baseline import build_baseline, profile_traces, read_baseline
from kernlint.cases import _slowed
from kernlint.pipeline import BaselineInput, CheckRequest, Execution, Inputs, run_check
from kernlint.report.baseline_view import MAX_DOTS
from kernlint.report.html_format import render
from kernlint.rules.loader import load_rules
from kernlint.trace.load import load_trace

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "fixtures"
TRACES = FIXTURES / "traces"
BASELINE_H200 = FIXTURES / "baselines" / "h200-fp8-block-linear.json"
RUN1 = TRACES / "gpu-baseline" / "fp8-block-linear-run1.pt.trace.json.gz"
RUN2 = TRACES / "gpu-baseline" / "fp8-block-linear-run2.pt.trace.json.gz"
CLEAN = TRACES / "gpu" / "block_clean.pt.trace.json.gz"
GEMM = "^nvjet_sm90_qqtst_128x128_128x6_4x1_v_bz_coopA_algo2_Ablk128_Bvec128_TNN$"
NCCL = TRACES / "gpu-tp2-nccl"
TWO_INVOCATIONS = TRACES / "cpu-runs" / "two-invocations"
WIDTHS = (1000, 1400)


def _check(out: Path, *, tables=None, paths=None, baseline=None):
    inputs = Inputs(paths=list(paths or []), tables=list(tables or []))
    result = run_check(CheckRequest(rules=load_rules(), inputs=inputs, baseline=BaselineInput(baseline, hint=None),
                                    execution=Execution(keep_tables=True)))
    out.write_text(render(result), encoding="utf-8")
    return result


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    """name -> (report file, CheckResult), rendered on first use."""
    root = tmp_path_factory.mktemp("html_baseline")
    done: dict[str, tuple[Path, object]] = {}

    def two_runs() -> Path:   # the clean TP run and the rank-1 .item() run in one folder: two runs of ranks
        folder = root / "two-runs"
        for run in ("fp8-tp-mlp", "fp8-tp-mlp-rank1-sync"):
            shutil.copytree(NCCL / run, folder, dirs_exist_ok=True)
        return folder

    makers = {
        # fixtures/cases/KL804.toml: one 23 µs GEMM 5% slower; every kernel 2% slower (the total timed too)
        "gemm_5pct": lambda out: _check(out, tables=[_slowed(load_trace(RUN2), 1.05, GEMM)],
                                        baseline=read_baseline(BASELINE_H200)),
        "every_2pct": lambda out: _check(out, tables=[_slowed(load_trace(RUN1), 1.02, None)],
                                         baseline=read_baseline(BASELINE_H200)),
        # block_regressed against a baseline of block_clean: the fills are launches added, not timed
        "added": lambda out: _check(out, paths=[TRACES / "gpu" / "block_regressed.pt.trace.json.gz"],
                                    baseline=build_baseline(profile_traces([load_trace(CLEAN)]))),
        "rank1_sync": lambda out: _check(out, paths=[NCCL / "fp8-tp-mlp-rank1-sync"]),
        "two_gpu_runs": lambda out: _check(out, paths=[two_runs()]),
        "two_cpu_runs": lambda out: _check(out, paths=[TWO_INVOCATIONS]),
    }

    def get(name: str):
        if name not in done:
            out = root / f"{name}.html"
            done[name] = (out, makers[name](out))
        return done[name]

    return get


def _open(b: Browser, path: Path, width: int = 1400) -> Browser:
    b.driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                             {"width": width, "height": 1000, "deviceScaleFactor": 1, "mobile": False})
    problems = b.open(path)
    assert not problems, f"{path.name}: {problems}"
    return b


_WIDE = """
var out = {page: [document.scrollingElement.scrollWidth, document.scrollingElement.clientWidth], wide: []};
document.querySelectorAll(arguments[0]).forEach(function (s) {
  var sw = s.getBoundingClientRect().width;
  s.querySelectorAll('table').forEach(function (t) {
    var w = t.getBoundingClientRect().width;
    if (w > sw + 0.5) { out.wide.push([s.id, t.className, Math.round(w), Math.round(sw)]); }
  });
});
return out;"""


# --- the baseline table fits --------------------------------------------------------------------------------

@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("name", ["gemm_5pct", "every_2pct", "added"])
def test_the_baseline_table_fits_its_section(browser, reports, name, width):
    """Issue 40: "Against the baseline" was 1,704 px inside 1,272: long kernel names and messages now wrap,
    clipped names keep their full text on hover."""
    b = _open(browser, reports(name)[0], width)
    got = b.driver.execute_script(_WIDE, "section#baseline")
    assert b.css("section#baseline tbody tr") and not got["wide"], got
    clipped = b.css("section#baseline .kl-clip")
    assert clipped and all(c.get_attribute("title") == b.text_content(c) for c in clipped)


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("name", ["gemm_5pct", "every_2pct"])
def test_a_report_against_a_baseline_does_not_scroll_sideways(browser, reports, name, width):
    b = _open(browser, reports(name)[0], width)
    got = b.driver.execute_script(_WIDE, "section")
    scroll, client = got["page"]
    assert scroll <= client and not got["wide"], got


# --- strip plots ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["gemm_5pct", "every_2pct"])
def test_every_timing_finding_draws_both_sides_runs(browser, reports, name):
    path, result = reports(name)
    timed = [f for f in result.findings if f.rule == "KL804"]
    assert timed
    b = _open(browser, path)
    rows = b.css('section#baseline tr.kl-timing[data-rule="KL804"]')
    assert len(rows) == len(timed)
    for row, finding in zip(rows, timed):   # the table lists them in the findings' order
        (strip,) = row.find_elements("css selector", "svg.kl-strip")
        width, height = b.box(strip)
        assert strip.is_displayed() and width >= 150 and height >= 30
        sides = {g.get_attribute("data-side"): g for g in strip.find_elements("css selector", "g.strip-row")}
        assert set(sides) == {"baseline", "candidate"}
        for side, key in (("baseline", "baseline_runs"), ("candidate", "candidate_runs")):
            runs = finding.details[key]
            assert int(sides[side].get_attribute("data-runs")) == runs == len(finding.details[f"{key}_us"])
            dots = sides[side].find_elements("css selector", "circle.strip-dot")
            assert len(dots) == min(runs, MAX_DOTS) and all(d.is_displayed() for d in dots[:3])
        # The medians are drawn where the details put them: the candidate's right of the baseline's (slower).
        medians = [float(sides[s].find_element("css selector", ".strip-median").get_attribute("x1"))
                   for s in ("baseline", "candidate")]
        assert medians[1] > medians[0], medians
    assert "runs" in b.text_content(b.css("section#baseline")[0])


def test_a_launch_change_has_no_strip_plot(browser, reports):
    b = _open(browser, reports("added")[0])
    assert b.css("section#baseline tr.kl-added") and not b.css("section#baseline svg.kl-strip")


# --- the rank view: every run, who waited for whom --------------------------------------------------------

def _runs(b: Browser) -> list[dict]:
    return b.driver.execute_script("""
function text(e) { return e.textContent; }
return Array.from(document.querySelectorAll('.kl-rank-run')).map(function (run) {
  return {label: run.getAttribute('data-run'),
          traces: Array.from(run.querySelectorAll('.rank-traces [data-rank]')).map(text),
          lanes: Array.from(run.querySelectorAll('svg.kl-timeline text.lane-label')).map(text),
          divergent: Array.from(run.querySelectorAll('svg.kl-timeline .kl-divergent')).map(function (e) {
            return e.getAttribute('data-rank'); }),
          stalls: run.querySelectorAll('table.stalls tbody tr').length};
});""")


def test_a_folder_of_two_gpu_runs_gets_a_rank_view_for_each(browser, reports):
    b = _open(browser, reports("two_gpu_runs")[0])
    runs = _runs(b)
    assert len(runs) == 2, runs
    assert ["run 1" in runs[0]["label"], "run 2" in runs[1]["label"]] == [True, True], runs
    traces = [t for run in runs for t in run["traces"]]
    assert len(traces) == len(set(traces)) == 4     # each run shows its own two ranks' traces
    for run in runs:
        assert run["lanes"] == ["rank 0", "rank 1"] and run["stalls"] == 2, run
    # Only the run where rank 1 calls .item() has a divergent launch, on rank 1.
    marked = [set(run["divergent"]) for run in runs]
    assert sorted(marked, key=len) == [set(), {"1"}], marked
    assert all(_visible(b, e) for e in b.css(".kl-rank-run svg.kl-timeline"))


def test_a_folder_of_two_cpu_runs_gets_a_rank_view_for_each(browser, reports):
    b = _open(browser, reports("two_cpu_runs")[0])
    runs = _runs(b)
    assert len(runs) == 2 and len({r["label"] for r in runs}) == 2, runs
    assert all(run["lanes"] == ["rank 0", "rank 1"] and set(run["divergent"]) == {"1"} for run in runs), runs
    assert len({t for run in runs for t in run["traces"]}) == 4
    # A CPU collective's op times nothing: no stall table, and the view says why.
    assert all(run["stalls"] == 0 for run in runs) and "not measured" in b.visible_text()


def _visible(b: Browser, element) -> bool:
    width, height = b.box(element)
    return element.is_displayed() and width >= 1 and height >= 1


def test_the_stall_table_names_who_waited_for_whom(browser, reports):
    """Rank 1 alone calls .item(); rank 0 reached the AllReduce last (its trace began 291.9 ms after rank 1's):
    rank 1 spent 293.9 ms in it waiting for rank 0, rank 0 0.2 ms. The late rank is shown as the one waited
    for, the long time as the waiter's."""
    b = _open(browser, reports("rank1_sync")[0])
    (table,) = b.css("table.stalls")
    rows = {r.get_attribute("data-rank"): r for r in table.find_elements("css selector", "tbody tr")}
    assert set(rows) == {"0", "1"}
    late, waiter = rows["0"], rows["1"]
    assert late.get_attribute("data-last") == "1" and waiter.get_attribute("data-waited-for") == "0"
    assert "arrived last: rank 1 waited for it" in late.text and "waited for rank 0" in waiter.text
    assert "divergent launch" in waiter.text and "divergent" not in late.text
    cells = [c.text for c in waiter.find_elements("css selector", "td")]
    assert cells[2:5] == ["+0.0 µs", "293.9 ms", "293.7 ms"], cells       # arrived, time in it, waiting
    cells = [c.text for c in late.find_elements("css selector", "td")]
    assert cells[2:5] == ["+293.7 ms", "203.6 µs", "0.0 µs"], cells
    caption = table.find_element("css selector", "caption").text
    assert "Rank 0 reached ncclDevKernel_AllReduce_Sum_bf16_RING_LL last, 293.7 ms after rank 1" in caption
    assert "rank 1 waited 293.7 ms in it for rank 0" in caption and "which was not late" in caption
    got = b.driver.execute_script(_WIDE, "section#findings")
    assert not got["wide"], got
