"""The HTML report, opened in a real headless Chromium (tests/browser.py): what a reviewer sees, whether the
page's script runs under its own CSP, and that names from a trace can never run as code.

The reports are rendered once per module through the CLI (`kernlint check --format html`, `kernlint report`),
in a temporary working directory so that no config file of the checkout applies.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

from baseline_traces import fp8_linear_trace
from browser import Browser, Screenshot, opened
from fresh_cli import run_fresh

REPO = Path(__file__).resolve().parents[1]
TRACES = REPO / "fixtures" / "traces"
REGRESSED = TRACES / "gpu" / "block_regressed.pt.trace.json.gz"
CLEAN = TRACES / "gpu" / "block_clean.pt.trace.json.gz"
DUMMY_OLD = TRACES / "gpu" / "dummy_init_old.pt.trace.json.gz"
DUMMY_FIXED = TRACES / "gpu" / "dummy_init_fixed.pt.trace.json.gz"
TP2_RANK1_SYNC = TRACES / "gpu-tp2-nccl" / "fp8-tp-mlp-rank1-sync"    # KL003/KL004: rank 1 alone calls .item()
BASELINE_H200 = REPO / "fixtures" / "baselines" / "h200-fp8-block-linear.json"
BASELINE_RUN = TRACES / "gpu-baseline" / "fp8-block-linear-run1.pt.trace.json.gz"

SCRIPT = "<script>window.__pwned=1</script>"
IMG = '<img src=x onerror="window.__pwned=1">'
SVG = '"><svg onload=window.__pwned=1>'
ATTR = '" onmouseover="window.__pwned=1" data-x=\''      # breaks out of a double- or single-quoted attribute
CONTROL = "\x01\x07\x1b[31m\x7f"
PAYLOAD = SCRIPT + IMG + SVG + "]]>" + "&amp;" + CONTROL
MAX_BYTES = 5 * 1024 * 1024
HOSTILE_FILE = f"x{SVG.replace('/', '')}.json"      # the trace's file name is hostile too


# --- rendering ---------------------------------------------------------------------------------------------

def kernlint(*args, cwd: Path) -> subprocess.CompletedProcess:
    return run_fresh(args, cwd=cwd, timeout=300)


def _events(kernels: list[tuple[str, float]], op: str = "aten::mm") -> list[dict]:
    """A launch (cpu_op + cudaLaunchKernel) and its kernel for each (name, duration), one after another."""
    events, ts = [], 0.0
    for corr, (name, dur) in enumerate(kernels, start=1):
        events += [
            {"ph": "X", "cat": "cpu_op", "name": op, "pid": 1, "tid": 1, "ts": ts, "dur": 4},
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": ts + 1,
             "dur": 2, "args": {"correlation": corr}},
            {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": ts + 3, "dur": dur,
             "args": {"correlation": corr}},
        ]
        ts += max(dur, 4) + 2
    return events


def hostile_trace(path: Path) -> Path:
    """The shape of tests/test_engine_checks.py's _synthetic (a fill kernel, then scale_1x128_kernel, in one
    Linear module), with markup, quotes, CDATA ends, entities and control characters in every name."""
    events = [
        {"ph": "X", "cat": "python_function", "name": f"nn.Module: Linear_0{SVG}{SCRIPT}", "pid": 1, "tid": 1,
         "ts": 0, "dur": 100},
        {"ph": "X", "cat": "python_function", "name": f"/srv/{IMG}/{SCRIPT}]]>&amp;.py(17): f{IMG}{CONTROL}",
         "pid": 1, "tid": 1, "ts": 5, "dur": 20},
        {"ph": "X", "cat": "cpu_op", "name": f"aten::fill_{PAYLOAD}", "pid": 1, "tid": 1, "ts": 10, "dur": 5},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 11, "dur": 2,
         "args": {"correlation": 1}},
        {"ph": "X", "cat": "cuda_driver", "name": "cuLaunchKernelEx", "pid": 1, "tid": 1, "ts": 30, "dur": 2,
         "args": {"correlation": 2}},
        {"ph": "X", "cat": "cpu_op", "name": f"aten::_scaled_mm{SCRIPT}", "pid": 1, "tid": 1, "ts": 40, "dur": 5},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 41, "dur": 2,
         "args": {"correlation": 3}},
        # The readable kernel name keeps what comes before the first '<': the quotes and entity survive.
        {"ph": "X", "cat": "kernel", "name": f"fill_kernel{ATTR}&amp;]]>{CONTROL}{SCRIPT}", "pid": 0, "tid": 7,
         "ts": 50, "dur": 1, "args": {"correlation": 1}},
        {"ph": "X", "cat": "kernel", "name": "scale_1x128_kernel", "pid": 0, "tid": 7, "ts": 52, "dur": 1,
         "args": {"correlation": 2}},
        {"ph": "X", "cat": "kernel", "name": f"nvjet_sm90_gemm{ATTR}{IMG}", "pid": 0, "tid": 7, "ts": 54,
         "dur": 1, "args": {"correlation": 3}},
    ]
    trace = {"traceEvents": events, "deviceProperties": [{"id": 0, "name": f"H200 {SCRIPT}{IMG}"}]}
    path.write_text(json.dumps(trace))
    return path


def counted_trace(path: Path) -> Path:
    """Kernels launched 1, 2, 9, 10 and 100 times: sorted as text, the counts would come out 1, 10, 100, 2, 9;
    the names' case and their count order disagree too."""
    counts = {"delta_kernel": 9, "Alpha_kernel": 100, "echo_kernel": 1, "bravo_kernel": 10, "Charlie_kernel": 2}
    kernels = [(name, 1.0 + i) for i, (name, n) in enumerate(counts.items()) for _ in range(n)]
    path.write_text(json.dumps({"traceEvents": _events(kernels)}))
    return path


# name: (command..., the exit codes it may end with). {out} is the report; {b_clean} and {b_timing} are baselines
# recorded when first needed (BASELINES); {hostile}, {counted}, {slower} are synthetic traces.
REPORTS = {
    "regressed": (["check", REGRESSED, "--format", "html", "-o", "{out}"], {1}),
    # block_clean is clean for the mission rules (KL00x); its RMSNorm, a chain of kernels, is rightly flagged by
    # KL902 unfused-norm, so the clean report selects the mission rules.
    "clean": (["check", CLEAN, "--select", "KL00", "--format", "html", "-o", "{out}"], {0}),
    "dummy_old": (["check", DUMMY_OLD, "--format", "html", "-o", "{out}"], {1}),
    # dummy_init_fixed fixes the FP8 temporary (KL002); it was recorded when the reference init still randomized
    # weight_scale, which KL005 rightly flags, so the fixed report selects KL002, its subject.
    "dummy_fixed": (["check", DUMMY_FIXED, "--select", "KL002", "--format", "html", "-o", "{out}"], {0}),
    "baseline_h200": (["check", BASELINE_RUN, "--baseline", BASELINE_H200, "--format", "html", "-o", "{out}"],
                      {0}),
    "baseline_added": (["check", REGRESSED, "--baseline", "{b_clean}", "--format", "html", "-o", "{out}"], {1}),
    "baseline_slower": (["check", "{slower}", "--baseline", "{b_timing}", "--format", "html", "-o", "{out}"], {1}),
    "report_regressed": (["report", REGRESSED, "-o", "{out}"], {0}),    # report exits 0 once written
    "multi_rank": (["report", TP2_RANK1_SYNC, "-o", "{out}"], {0}),
    "hostile": (["check", "{hostile}", "--format", "html", "-o", "{out}"], {1}),
    "counted": (["check", "{counted}", "--format", "html", "-o", "{out}"], {0}),
}


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("html_report")


@pytest.fixture(scope="module")
def render(workdir):
    """render(name) -> the report file, rendered once per module."""
    done: dict[str, Path] = {}
    inputs = {"hostile": hostile_trace(workdir / HOSTILE_FILE),
              "counted": counted_trace(workdir / "counted.json"),
              # tests/test_baseline_cli.py's timing case: every kernel 3% slower than 20 baseline runs (KL804)
              "slower": fp8_linear_trace(workdir / "pr" / "slow.json", runs=10, seed=3, slowdown={"*": 1.03})}
    baselines = {"b_clean": [CLEAN], "b_timing": [fp8_linear_trace(workdir / "main" / "t.json", runs=20, seed=1)]}

    def get(name: str) -> Path:
        if name in done:
            return done[name]
        args, codes = REPORTS[name]
        values = {"out": workdir / f"{name}.html", **inputs}
        for key, sources in baselines.items():
            if "{" + key + "}" in args:
                values[key] = workdir / f"{key}.json"
                if not values[key].exists():
                    rec = kernlint("baseline", "record", *sources, "-o", values[key], cwd=workdir)
                    assert rec.returncode == 0, rec.stderr
        args = [str(a).format(**values) if isinstance(a, str) else a for a in args]
        proc = kernlint(*args, cwd=workdir)
        assert proc.returncode in codes and values["out"].is_file(), (
            f"kernlint {' '.join(map(str, args))}: exit {proc.returncode}\n"
            f"{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")
        done[name] = values["out"]
        return values["out"]

    return get


# --- the harness itself --------------------------------------------------------------------------------------

def _page(tmp_path: Path, name: str, body: str, head: str = "") -> Path:
    path = tmp_path / f"{name}.html"
    path.write_text(f"<!doctype html><html><head><meta charset=utf-8>{head}<title>{name}</title></head>"
                    f"<body>{body}</body></html>")
    return path


def test_the_browser_harness_reports_console_errors(browser, tmp_path):
    problems = browser.open(_page(tmp_path, "err", "<p>x</p><script>console.error('deliberate failure')</script>"))
    assert any("deliberate failure" in line for line in problems.console), problems
    problems = browser.open(_page(tmp_path, "throws", "<p>x</p><script>throw new Error('boom here')</script>"))
    assert any("boom here" in e for e in problems.errors), problems
    # Each page's problems are its own: a clean page after failing ones reports nothing.
    assert not browser.open(_page(tmp_path, "ok", "<p>x</p><script>console.log('fine')</script>"))


def test_the_browser_harness_reports_csp_violations_and_hashed_scripts_run(browser, tmp_path):
    import base64
    import hashlib

    strict = "<meta http-equiv=Content-Security-Policy content=\"default-src 'none'\">"
    problems = browser.open(_page(tmp_path, "csp", "<script>document.title='ran'</script>", strict))
    assert problems.violations and browser.driver.title == "csp", problems
    assert any("Content Security Policy" in line for line in problems.console), problems
    # The report's way: a script allowed by its hash runs, and nothing is reported.
    code = "document.title='ran'"
    digest = base64.b64encode(hashlib.sha256(code.encode()).digest()).decode()
    hashed = f"<meta http-equiv=Content-Security-Policy content=\"default-src 'none'; script-src 'sha256-{digest}'\">"
    assert not browser.open(_page(tmp_path, "hashed", f"<script>{code}</script>", hashed))
    assert browser.driver.title == "ran"


def test_the_browser_harness_tells_a_blank_page(browser, tmp_path):
    browser.open(_page(tmp_path, "blank", ""))
    assert browser.screenshot().blank()
    browser.open(_page(tmp_path, "one-line", "<p>only a line of text</p>"))
    assert browser.screenshot().blank()
    bars = "".join(f'<rect x="{20 * i}" y="{i}" width="18" height="300" fill="hsl({i * 9},70%,50%)"/>'
                   for i in range(40))
    browser.open(_page(tmp_path, "drawn", f"<h1>Title</h1><svg width=900 height=400>{bars}</svg>"))
    shot = browser.screenshot()
    assert not shot.blank() and (shot.width, shot.height) == (1400, 1000), shot


def test_screenshot_statistics():
    import io

    from PIL import Image

    image = Image.new("RGB", (100, 100), "white")
    for x in range(10):
        image.putpixel((x, 0), (x, 0, 0))
    buf = io.BytesIO()
    image.save(buf, "PNG")
    shot = Screenshot.from_png(buf.getvalue())
    assert (shot.colours, round(shot.ink, 4)) == (11, 0.001)


# --- the file: strict CSP, self-contained ------------------------------------------------------------------

class _Html(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict]] = []
        self.styles: list[str] = []
        self._in_style = False

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, {k.lower(): (v or "") for k, v in attrs}))
        self._in_style = tag == "style"

    handle_startendtag = handle_starttag

    def handle_endtag(self, tag):
        self._in_style = False

    def handle_data(self, data):
        if self._in_style:
            self.styles.append(data)


URL_ATTRIBUTES = ("src", "href", "xlink:href", "srcset", "action", "formaction", "poster", "data", "background")
REMOTE = re.compile(r"^\s*(https?:)?//", re.I)


@pytest.mark.parametrize("name", list(REPORTS))
def test_report_file_has_a_strict_csp_and_loads_nothing(render, name):
    path = render(name)
    assert path.stat().st_size < MAX_BYTES
    html = path.read_text(encoding="utf-8")
    parser = _Html()
    parser.feed(html)
    tags = parser.tags
    csp = [(i, a.get("content", "")) for i, (t, a) in enumerate(tags)
           if t == "meta" and a.get("http-equiv", "").lower() == "content-security-policy"]
    assert len(csp) == 1, f"{name}: CSP meta elements: {csp}"
    at, policy = csp[0]
    assert "default-src 'none'" in policy and "unsafe-inline" not in policy and "unsafe-eval" not in policy, policy
    # A meta CSP covers only what comes after it.
    first_code = min((i for i, (t, _) in enumerate(tags) if t in ("script", "style", "link")), default=len(tags))
    assert at < first_code, f"{name}: the CSP meta comes after a script or style"
    assert not [a for t, a in tags if t == "script" and "src" in a], "a <script src>"
    assert not [a for t, a in tags if t == "link"], "a <link> (stylesheet or other)"
    assert not [t for t, _ in tags if t in ("iframe", "object", "embed", "base")]
    remote = [(t, k, v) for t, a in tags for k, v in a.items() if k in URL_ATTRIBUTES and REMOTE.match(v)]
    assert not remote, f"{name}: network references: {remote[:5]}"
    css = "".join(parser.styles)
    assert "@import" not in css and not re.search(r"url\(\s*['\"]?\s*(https?:)?//", css, re.I)


# --- opened in the browser -------------------------------------------------------------------------------

@pytest.mark.parametrize("name", list(REPORTS))
def test_report_opens_without_errors_and_draws_something(browser, render, name):
    b = opened(browser, render(name))
    assert b.css("section#verdicts tr[data-rule]"), f"{name}: no verdict rows"
    shot = b.screenshot()
    assert not shot.blank(), f"{name}: the page looks blank: {shot}"
    # The page's own script ran under its CSP (nothing blocked was logged above): the sort handlers are there.
    assert b.driver.execute_script("return document.scripts.length") >= 1


def test_verdicts_table(browser, render):
    b = opened(browser, render("regressed"))
    statuses = {tr.get_attribute("data-rule"): tr.get_attribute("data-status")
                for tr in b.css("section#verdicts tr[data-rule]")}
    assert statuses.get("KL001") == "failed" and statuses.get("KL002") == "not-applicable", statuses
    assert set(statuses.values()) <= {"failed", "passed", "not-applicable", "incomplete"}
    b = opened(browser, render("clean"))
    statuses = {tr.get_attribute("data-rule"): tr.get_attribute("data-status")
                for tr in b.css("section#verdicts tr[data-rule]")}
    assert statuses.get("KL001") == "passed", statuses


def _shown(b: Browser, element) -> bool:
    # At least a pixel each way: a 0.8 µs kernel on a millisecond axis must still be drawn to be seen.
    width, height = b.box(element)
    return element.is_displayed() and width >= 1 and height >= 1


def test_offending_and_anchor_kernels_are_drawn(browser, render):
    b = opened(browser, render("regressed"))
    kernels = b.css("svg.kl-timeline .kl-kernel")
    assert kernels and all(k.get_attribute("data-name") for k in kernels), "kernel bars without data-name"
    offending = b.css('svg.kl-timeline .kl-kernel.kl-offending[data-name*="FillFunctor"]')
    anchors = b.css('svg.kl-timeline .kl-kernel.kl-anchor[data-name*="scale_1x128"]')
    assert offending and anchors, (len(offending), len(anchors))
    assert all(_shown(b, e) for e in offending), "an offending kernel is not visible"
    assert all(_shown(b, e) for e in anchors), "an anchor kernel is not visible"
    # Only the fills are blamed: the anchor and the GEMM are not offending.
    blamed = {e.get_attribute("data-name") for e in b.css("svg.kl-timeline .kl-offending")}
    assert blamed and all("FillFunctor" in n for n in blamed), blamed
    assert b.css("svg.kl-timeline .kl-op"), "no CPU op bars"
    flows = b.css("svg.kl-timeline .kl-flow")
    assert flows and {f.tag_name for f in flows} <= {"path", "line", "polyline"}, [f.tag_name for f in flows]


def test_a_clean_report_blames_nothing(browser, render):
    b = opened(browser, render("clean"))
    assert not b.css(".kl-offending") and not b.css("article.kl-finding")
    assert b.css("svg.kl-timeline .kl-kernel") or b.css("table#kernels tr.kl-kernel-row")


def test_finding_article_explains_kl001_with_source_and_op(browser, render):
    b = opened(browser, render("regressed"))
    articles = b.css('section#findings article.kl-finding[data-rule="KL001"]')
    # The fill of both FP8 linear modules is one cause (one line): one card, both listed inside.
    assert len(articles) == 1, len(articles)
    # The one other card is the RMSNorm's kernel chain (KL902 unfused-norm), rightly: it blames no fill.
    others = b.css('section#findings article.kl-finding:not([data-rule="KL001"])')
    assert {a.get_attribute("data-rule") for a in others} <= {"KL902"}, [a.get_attribute("data-rule") for a in others]
    for article in articles:
        assert "What it does" in b.text_content(article) and "2 instances: 2 scopes" in b.text_content(article)
        (source,) = article.find_elements("css selector", ".kl-source")
        (op,) = article.find_elements("css selector", ".kl-launch-op")
        assert "regressed/fp8_linear_new_ones.py:17" in source.text, source.text   # .text: visible text only
        assert "aten::fill_" in op.text, op.text


# --- the kernel table -------------------------------------------------------------------------------------

_ROWS = """
return Array.from(arguments[0].querySelectorAll('tr.kl-kernel-row')).map(function (r) {
  return Array.from(r.cells).map(function (c) { return c.textContent.trim(); });
});"""


def _sorted_text(b: Browser, values: list[str], descending: bool) -> bool:
    """Sorted by code point, ignoring case, or by the browser's localeCompare: any is a fine text order."""
    seq = values[::-1] if descending else values
    if seq == sorted(seq) or seq == sorted(seq, key=str.lower):
        return True
    return b.driver.execute_script(
        "var a = arguments[0]; return a.every(function (v, i) { return i === 0 || "
        "a[i - 1].localeCompare(v, undefined, {numeric: true}) <= 0 || a[i - 1].localeCompare(v) <= 0; });", seq)


def _count(text: str) -> float:
    return float(re.sub(r"[^\d.]", "", text))


def _click_sorts(b: Browser, header_text, kind: str):
    table = b.css("table#kernels")[0]
    headers = table.find_elements("css selector", "th[data-sort]")
    names = [h.text.strip(" ▲▼↑↓⇅").lower() for h in headers]
    th = next((h for h, n in zip(headers, names) if header_text(n, h)), None)
    assert th is not None and th.get_attribute("data-sort") == kind, names
    index = b.driver.execute_script("return arguments[0].cellIndex", th)
    before = b.driver.execute_script(_ROWS, table)
    column = [row[index] for row in before]
    key = _count if kind == "num" else (lambda v: v)
    assert len({key(v) for v in column}) > 1, f"the fixture has one value in this column: {column}"
    orders = []
    for _ in range(2):
        th.click()                                       # a real click, dispatched by the browser
        rows = b.driver.execute_script(_ROWS, table)
        assert sorted(rows) == sorted(before), "rows were changed, not only reordered"
        values = [row[index] for row in rows]
        if kind == "num":
            keys = [key(v) for v in values]
            orders.append("asc" if keys == sorted(keys) else "desc" if keys == sorted(keys, reverse=True) else None)
        else:
            orders.append("asc" if _sorted_text(b, values, False) else "desc" if _sorted_text(b, values, True)
                          else None)
        assert orders[-1], f"after click {len(orders)} not sorted by {th.text!r}: {values}"
    assert orders[0] != orders[1], f"a second click did not reverse the order: {orders}"


def test_kernel_table_sorts_numerically_by_count_on_click(browser, render):
    b = opened(browser, render("counted"))
    _click_sorts(b, lambda name, th: name == "count", "num")


def test_kernel_table_sorts_by_a_text_column_on_click(browser, render):
    b = opened(browser, render("regressed"))
    _click_sorts(b, lambda name, th: th.get_attribute("data-sort") == "text", "text")


# --- allocations, baseline, metadata ----------------------------------------------------------------------

def test_fp8_temporaries_are_marked(browser, render):
    b = opened(browser, render("dummy_old"))
    assert b.css("section#allocations svg")
    marked = b.css("section#allocations .kl-fp8-temporary")
    assert marked and any(_shown(b, m) for m in marked), len(marked)
    b = opened(browser, render("dummy_fixed"))      # the fix allocates no FP8 temporary
    assert not b.css(".kl-fp8-temporary")


def test_baseline_section_only_with_a_baseline(browser, render):
    b = opened(browser, render("regressed"))
    assert not b.css("section#baseline")
    b = opened(browser, render("baseline_added"))   # baseline recorded from block_clean: the fills are new
    added = b.css("section#baseline .kl-added")
    assert any("FillFunctor" in b.text_content(a) for a in added), [b.text_content(a) for a in added]
    assert not b.css("section#baseline .kl-timing")  # one run each side: not timed
    b = opened(browser, render("baseline_slower"))   # every kernel 3% slower: a timing change
    timing = b.css("section#baseline .kl-timing")
    assert timing and any(_shown(b, t) for t in timing), len(timing)
    assert not b.css("section#baseline .kl-added")
    b = opened(browser, render("baseline_h200"))     # the same launches, timings within noise: no change listed
    assert b.css("section#baseline") and not b.css("section#baseline .kl-added")


def test_metadata_names_the_gpu(browser, render):
    b = opened(browser, render("regressed"))
    (section,) = b.css("section#metadata")
    assert "NVIDIA H200" in b.text_content(section)


# --- names from a trace are text ---------------------------------------------------------------------------

_ON_ATTRIBUTES = """
var out = [];
document.querySelectorAll('*').forEach(function (e) {
  for (var i = 0; i < e.attributes.length; i++) {
    if (/^on/i.test(e.attributes[i].name)) { out.push(e.tagName + ' ' + e.attributes[i].name); }
  }
});
return out;"""


def test_hostile_names_execute_nothing_and_show_as_text(browser, render, workdir):
    # The payload does reach a finding (else this test would prove nothing).
    proc = kernlint("check", workdir / HOSTILE_FILE, "--format", "json", cwd=workdir)
    (finding,) = json.loads(proc.stdout)["findings"]
    assert SCRIPT in finding["launch_op"] and IMG in finding["source"] and ATTR in finding["event"], finding

    clean = opened(browser, render("clean"))
    clean_scripts = clean.driver.execute_script("return document.scripts.length")
    path = render("hostile")
    raw = path.read_text(encoding="utf-8").lower()
    for needle in ("<script>window.__pwned", "<img src=x", "<svg onload", "onmouseover=\"window"):
        assert needle not in raw, f"unescaped in the file: {needle}"

    b = opened(browser, path)   # also: no CSP violation, so nothing injected even tried to run
    assert b.driver.execute_script("return window.__pwned") is None
    assert b.driver.execute_script(_ON_ATTRIBUTES) == []
    assert not b.css("img") and not b.css("svg[onload]")
    assert b.driver.execute_script("return document.scripts.length") == clean_scripts
    scripts = b.driver.execute_script(
        "return Array.from(document.scripts).map(function (s) { return [s.type, s.textContent]; })")
    assert all("__pwned" not in text for kind, text in scripts if kind != "application/json"), scripts

    text = b.visible_text()
    for literal in (SCRIPT, IMG, "&amp;", "]]>"):
        assert literal in text, f"not shown literally: {literal!r}"
    (offending,) = b.css("svg.kl-timeline .kl-offending")
    assert ATTR in offending.get_attribute("data-name")
    assert SCRIPT in b.text_content(b.css("section#metadata")[0])


# --- several ranks -----------------------------------------------------------------------------------------

def test_multi_rank_report_has_a_lane_per_rank_and_marks_the_divergent_launch(browser, render):
    b = opened(browser, render("multi_rank"))
    ranks = {e.get_attribute("data-rank") for e in b.css("svg.kl-timeline [data-rank]")}
    labels = " ".join(b.text_content(s) for s in b.css("svg.kl-timeline")).lower()
    assert {"0", "1"} <= ranks or ("rank 0" in labels and "rank 1" in labels), (ranks, labels[:300])
    divergent = b.css("svg.kl-timeline .kl-divergent")
    assert divergent and any(_shown(b, d) for d in divergent), len(divergent)
    # Rank 1 alone issued the extra abs/amax/item: a mark with a rank is on rank 1.
    marked = {d.get_attribute("data-rank") for d in divergent} - {None, ""}
    assert marked <= {"1"}, marked
    assert b.css('section#verdicts tr[data-rule="KL003"][data-status="failed"]')
    assert b.css('section#verdicts tr[data-rule="KL004"][data-status="failed"]')


# --- the browser's installation (scripts/install_browser.sh, run by make browser, never by make test) -----

INSTALL = REPO / "scripts" / "install_browser.sh"


def _install(tmp_path: Path, uid: int, chromium: Path, driver: Path, creates: bool = True, require: bool = True):
    """Run the script with fake `id` and `apt-get` first on PATH; the fake apt-get logs its arguments and, for
    `install`, creates the two binaries (as the packages would)."""
    bin_ = tmp_path / "bin"
    bin_.mkdir(exist_ok=True)
    log = tmp_path / "apt.log"
    (bin_ / "id").write_text(f"#!/bin/sh\necho {uid}\n")
    make = f'for f in "{chromium}" "{driver}"; do printf "#!/bin/sh\\n" > "$f"; chmod +x "$f"; done' if creates else ""
    (bin_ / "apt-get").write_text(f'#!/bin/sh\necho "$*" >> "{log}"\n'
                                  f'case "$*" in *install*) {make};; esac\nexit 0\n')
    for f in ("id", "apt-get"):
        (bin_ / f).chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_}:{os.environ['PATH']}", "KERNLINT_CHROMIUM": str(chromium),
           "KERNLINT_CHROMEDRIVER": str(driver), "KERNLINT_REQUIRE_BROWSER": "1" if require else "0"}
    proc = subprocess.run(["bash", str(INSTALL)], capture_output=True, text=True, env=env, timeout=60)
    return proc, (log.read_text().splitlines() if log.exists() else [])


def test_install_browser_does_nothing_when_both_are_there(tmp_path):
    chromium, driver = tmp_path / "chromium", tmp_path / "chromedriver"
    for f in (chromium, driver):
        f.write_text("#!/bin/sh\n")
        f.chmod(0o755)
    proc, apt = _install(tmp_path, 0, chromium, driver)
    assert proc.returncode == 0 and apt == [] and "are installed" in proc.stdout, proc


def test_install_browser_installs_what_is_missing_with_apt_get(tmp_path):
    proc, apt = _install(tmp_path, 0, tmp_path / "chromium", tmp_path / "chromedriver")
    assert proc.returncode == 0, proc
    assert apt == ["update -qq", "install -y -q chromium chromium-driver"], apt
    assert "installing chromium and chromium-driver" in proc.stdout


def test_install_browser_fails_in_one_line_when_it_cannot(tmp_path):
    (tmp_path / "chromium").write_text("")       # there, but not executable: missing as well
    proc, apt = _install(tmp_path, 1000, tmp_path / "chromium", tmp_path / "chromedriver")
    assert proc.returncode == 1 and apt == [] and proc.stdout == "", proc
    (line,) = proc.stderr.splitlines()
    assert "not root" in line and "chromedriver" in line, line
    # Root, but apt-get "succeeds" without the binaries appearing: an error, not a silent pass.
    proc, apt = _install(tmp_path, 0, tmp_path / "chromium", tmp_path / "chromedriver", creates=False)
    assert proc.returncode == 1 and "still missing" in proc.stderr.splitlines()[-1], proc


def test_make_browser_without_root_fails_in_one_line_saying_what_to_do(tmp_path):
    """`make browser` is asked for explicitly: not root is an error (one line: how to do it), required or not."""
    proc, apt = _install(tmp_path, 1000, tmp_path / "chromium", tmp_path / "chromedriver", require=False)
    assert proc.returncode == 1 and apt == [] and proc.stdout == "", proc
    (line,) = proc.stderr.splitlines()
    assert "not root" in line and "make browser" in line and "apt-get install chromium chromium-driver" in line, line


def test_a_missing_browser_is_a_skip_reason_that_says_how_to_install_it(tmp_path, monkeypatch):
    import browser as browser_module

    monkeypatch.setattr(browser_module, "CHROMIUM", str(tmp_path / "chromium"))
    why = browser_module.missing()
    assert why.startswith(f"{tmp_path / 'chromium'} is missing: run `make browser`"), why
    assert "KERNLINT_CHROMIUM" in why


def test_make_test_never_installs_the_browser_make_browser_does_and_ci_runs_it_first(tmp_path):
    import shutil

    if shutil.which("make") is None:
        pytest.skip("no make")

    def dry_run(target):
        # --no-print-directory: under a make of its own (CI runs `make test`), make would add Entering/Leaving lines
        proc = subprocess.run(["make", "-n", "-B", "--no-print-directory", "-f", str(REPO / "Makefile"),
                               f"VENV={tmp_path / 'venv'}", target],
                              capture_output=True, text=True, cwd=REPO, timeout=60)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout.splitlines()

    lines = dry_run("test")
    assert [line for line in lines if "-m pytest" in line], lines
    assert not [line for line in lines if "install_browser" in line or "apt-get" in line], lines
    assert not [line for line in dry_run("audit") if "install_browser" in line]
    assert dry_run("browser") == ["bash scripts/install_browser.sh"]
    # CI installs it explicitly, before the tests, which must then run (never skip) there.
    ci = (REPO / ".ci" / "run").read_text().splitlines()
    assert ci.index("make browser") < ci.index("make test")
    assert "export KERNLINT_REQUIRE_BROWSER=1" in ci
