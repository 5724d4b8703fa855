"""The HTML report's step timeline and its "Open in Perfetto" button (issue 40, items 2 and 4), in a real
headless Chromium (tests/browser.py): a clean trace's report draws its step; wheel zooms, search highlights,
a click shows an event; the button carries the trace and posts what Perfetto's postMessage protocol expects.
The remote page is never loaded: the test page's window.open is replaced before the click.
"""
from __future__ import annotations

import base64
import gzip
import json
import time
from pathlib import Path

import pytest

from browser import Browser, opened
from fresh_cli import run_fresh

REPO = Path(__file__).resolve().parents[1]
TRACES = REPO / "fixtures" / "traces"
REGRESSED = TRACES / "gpu" / "block_regressed.pt.trace.json.gz"
LARGE = TRACES / "gpu-decode" / "large-decode-clean-range.pt.trace.json.gz"
STEP_KERNELS = 32
NAMES = ("gemm_bf16_kernel", "rmsnorm_kernel", "silu_mul_kernel", "rotary_kernel")
HOSTILE = '</script><script>window.__pwned=1</script><img src=x onerror="window.__pwned=1">'


def step_trace(path: Path, steps: int = 3, kernels: int = STEP_KERNELS, kernel_name=None) -> Path:
    """`steps` ProfilerStep#N ranges, each a Python function that calls `kernels` ops (aten::mm), each launching
    one kernel on stream 7; gzipped like kineto's."""
    events, ts, corr = [], 1000.0, 0
    for s in range(steps):
        start = ts
        body = []
        for k in range(kernels):
            corr += 1
            name = kernel_name(k) if kernel_name else f"{NAMES[k % len(NAMES)]}_{k}"
            body += [
                {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": ts, "dur": 8,
                 "args": {"External id": corr}},
                {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": ts + 2,
                 "dur": 4, "args": {"correlation": corr, "External id": corr}},
                {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": ts + 10, "dur": 6 + k % 5,
                 "args": {"correlation": corr, "stream": 7, "device": 0, "External id": corr}},
            ]
            ts += 12
        events.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{s + 1}", "pid": 1, "tid": 1,
                       "ts": start - 1, "dur": ts - start + 20})
        events.append({"ph": "X", "cat": "python_function", "name": "/srv/model.py(42): forward", "pid": 1,
                       "tid": 1, "ts": start - 0.5, "dur": ts - start + 10})
        events += body
        ts += 40
    trace = {"traceEvents": events, "deviceProperties": [{"id": 0, "name": "NVIDIA H200"}]}
    with gzip.open(path, "wt") as fh:
        json.dump(trace, fh)
    return path


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("html_timeline")


def report(workdir: Path, name: str, *args) -> Path:
    out = workdir / f"{name}.html"
    if not out.exists():
        proc = run_fresh(["report", *map(str, args), "-o", str(out)], cwd=workdir, timeout=300)
        assert proc.returncode == 0 and out.is_file(), proc.stderr[-3000:]
    return out


@pytest.fixture(scope="module")
def clean(workdir) -> tuple[Path, Path]:
    trace = step_trace(workdir / "steps.pt.trace.json.gz")
    return trace, report(workdir, "clean", trace)


def view_range(b: Browser) -> tuple[float, float]:
    svg = b.css("svg.kl-stepline")[0]
    return float(svg.get_attribute("data-view-start")), float(svg.get_attribute("data-view-end"))


# --- the step timeline -----------------------------------------------------------------------------------------

def test_a_clean_trace_shows_its_whole_step(browser, clean):
    b = opened(browser, clean[1])
    boxes = b.css(".kl-stepline-box")
    assert len(boxes) == 1
    assert "ProfilerStep#" in boxes[0].find_element("css selector", "h3").text
    kernels = b.css("svg.kl-stepline rect.kl-ev-device")
    assert len(kernels) >= 30 and len(kernels) == STEP_KERNELS, len(kernels)
    assert len(b.css("svg.kl-stepline rect.kl-ev-op")) >= STEP_KERNELS
    assert len(b.css("svg.kl-stepline rect.kl-ev-runtime")) == STEP_KERNELS
    lanes = [t.text for t in b.css("svg.kl-stepline text.lane-label")]
    assert any(s.startswith("CPU ops") for s in lanes) and any(s.startswith("launches") for s in lanes)
    assert any(s.startswith("GPU 0 stream 7") for s in lanes), lanes
    assert not b.css("svg.kl-stepline rect.kl-ev-offending")   # nothing to blame in a clean trace
    w, h = b.box(kernels[0])
    assert w >= 1 and h > 5


def test_wheel_zooms_and_drag_pans_the_visible_time_range(browser, clean):
    b = opened(browser, clean[1])
    a0, b0 = view_range(b)
    plot = b.css("svg.kl-stepline svg.kl-stepline-plot")[0]
    b.box(plot)
    b.driver.execute_script("""
        var plot = arguments[0], r = plot.getBoundingClientRect();
        plot.dispatchEvent(new WheelEvent('wheel', {deltaY: -120, clientX: r.left + r.width / 2,
                                                    clientY: r.top + 5, bubbles: true, cancelable: true}));
    """, plot)
    a1, b1 = view_range(b)
    assert (b1 - a1) < (b0 - a0) * 0.9 and a1 > a0, ((a0, b0), (a1, b1))
    # Zoomed in, fewer kernels are on screen than before.
    shown = b.driver.execute_script(
        "return Array.from(document.querySelectorAll('svg.kl-stepline rect.kl-ev-device'))"
        ".filter(function (r) { return r.getAttribute('display') !== 'none'; }).length")
    assert shown < STEP_KERNELS
    b.driver.execute_script("""
        var plot = arguments[0], r = plot.getBoundingClientRect(), y = r.top + 5;
        plot.dispatchEvent(new MouseEvent('mousedown', {clientX: r.left + 500, clientY: y, bubbles: true}));
        window.dispatchEvent(new MouseEvent('mousemove', {clientX: r.left + 600, clientY: y, bubbles: true}));
        window.dispatchEvent(new MouseEvent('mouseup', {clientX: r.left + 600, clientY: y, bubbles: true}));
    """, plot)
    a2, b2 = view_range(b)
    assert a2 < a1 and abs((b2 - a2) - (b1 - a1)) < 1e-3, ((a1, b1), (a2, b2))   # panned left, same zoom
    b.css(".kl-stepline-reset")[0].click()
    assert view_range(b) == (a0, b0)
    assert not b.problems()


def test_search_highlights_the_kernels_whose_name_matches(browser, clean):
    b = opened(browser, clean[1])
    box = b.css(".kl-stepline-search")[0]
    box.send_keys("GEMM_bf16")
    hits = b.css("svg.kl-stepline rect.kl-hit")
    expected = sum(1 for k in range(STEP_KERNELS) if NAMES[k % len(NAMES)] == "gemm_bf16_kernel")
    assert len(hits) == expected == 8
    names = b.driver.execute_script(
        "return Array.from(document.querySelectorAll('svg.kl-stepline rect.kl-hit'))"
        ".map(function (r) { return r.querySelector('title').textContent.split('\\n')[0]; })")
    assert all(n.startswith("gemm_bf16_kernel_") for n in names), names
    assert "8 device events match" in b.css(".kl-stepline-hits")[0].text
    box.clear()
    box.send_keys("\b")
    b.driver.execute_script("arguments[0].value=''; arguments[0].dispatchEvent(new Event('input'))", box)
    assert not b.css("svg.kl-stepline rect.kl-hit")


def test_a_click_shows_the_events_op_source_duration_and_args(browser, clean):
    b = opened(browser, clean[1])
    kernel = b.css("svg.kl-stepline rect.kl-ev-device")[5]
    b.driver.execute_script("arguments[0].dispatchEvent(new MouseEvent('click', {bubbles: true}))", kernel)
    details = b.css(".kl-stepline-details")[0]
    assert details.is_displayed()
    text = details.text
    assert "rotary_kernel_" in b.css(".kl-stepline-details .kl-d-name")[0].text or "_kernel_" in text
    assert b.css(".kl-stepline-details .kl-d-op")[0].text == "aten::mm"
    assert "model.py" in b.css(".kl-stepline-details .kl-d-source")[0].text
    assert "µs" in b.css(".kl-stepline-details .kl-d-dur")[0].text
    assert "correlation=" in b.css(".kl-stepline-details .kl-d-args")[0].text
    assert "kl-ev-selected" in kernel.get_attribute("class")


def test_a_finding_is_marked_on_the_step_it_is_in(browser, workdir):
    b = opened(browser, report(workdir, "regressed", REGRESSED))
    offending = b.css("svg.kl-stepline rect.kl-ev-offending")
    assert offending, "the worst finding's launch is not outlined"
    assert b.css("svg.kl-stepline text.marker-label")
    links = [a.get_attribute("href") for a in b.css(".kl-stepline-note a")]
    assert any(h.endswith("#finding-1") for h in links), links
    b.driver.execute_script("arguments[0].dispatchEvent(new MouseEvent('click', {bubbles: true}))", offending[0])
    assert b.css(".kl-stepline-details a[href^='#finding-']")


def test_hostile_kernel_names_stay_text_in_the_step_data(browser, workdir):
    trace = step_trace(workdir / "hostile.pt.trace.json.gz", steps=1, kernels=4,
                       kernel_name=lambda k: f"k{k}{HOSTILE}")
    b = opened(browser, report(workdir, "hostile", trace))
    assert b.driver.execute_script("return window.__pwned === undefined")
    assert len(b.css("svg.kl-stepline rect.kl-ev-device")) == 4
    html = (workdir / "hostile.html").read_text(encoding="utf-8")
    data = html.split('class="kl-stepline-data">', 1)[1].split("</script>", 1)[0]
    assert "<" not in data and "k0" in data


# --- large traces: bounded -------------------------------------------------------------------------------------

def test_a_large_step_is_capped_and_merged_and_says_so():
    from kernlint.report.step_view import MAX_EVENTS, step_timeline
    from kernlint.trace.load import load_trace
    from kernlint.trace.scopes import ScopeIndex

    table = load_trace(str(LARGE))
    step = step_timeline(table, ScopeIndex.of(table), [])
    assert step.total > MAX_EVENTS and step.drawn <= MAX_EVENTS
    assert step.merged > 0 and sum(step.count) + step.dropped == step.total


def test_the_report_says_what_was_merged(browser, workdir):
    path = report(workdir, "large", LARGE, "--embed-trace", "never")
    b = opened(browser, path)
    note = b.css(".kl-stepline-note")[0].text
    assert "merged" in note and "Perfetto" in note
    assert len(b.css("svg.kl-stepline rect.kl-ev")) <= 4000
    assert path.stat().st_size < 1_000_000   # 23K events in the step, a few hundred kB of report


def test_a_trace_without_device_events_has_no_step_but_its_perfetto_button(browser, workdir):
    trace = workdir / "cpu.json"
    trace.write_text(json.dumps({"traceEvents": [
        {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": 10 * i, "dur": 5}
        for i in range(10)]}))
    b = opened(browser, report(workdir, "cpu", trace))
    assert not b.css("svg.kl-stepline")
    assert "No step to draw" in b.css(".kl-stepline-note")[0].text
    assert b.css("button.kl-perfetto")[0].get_attribute("data-trace-data")


# --- Open in Perfetto ------------------------------------------------------------------------------------------

_INTERCEPT = """
window.__klOpened = [];
window.__klPosted = [];
window.open = function (url, target) {
  window.__klOpened.push([url, target]);
  return {postMessage: function (message, origin) {
    var p = message && message.perfetto;
    window.__klPosted.push({message: p ? null : message, origin: origin, perfetto: p ? {
      keys: Object.keys(p).sort(), title: p.title, fileName: p.fileName,
      isArrayBuffer: p.buffer instanceof ArrayBuffer, length: p.buffer.byteLength,
      head: Array.from(new Uint8Array(p.buffer, 0, 2))} : null});
  }};
};
"""


def _wait(b: Browser, script: str, timeout: float = 5.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = b.driver.execute_script(script)
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for: {script}")


def test_perfetto_button_carries_the_trace_and_posts_perfettos_message(browser, clean):
    trace, path = clean
    b = opened(browser, path)
    buttons = b.css("button.kl-perfetto")
    assert len(buttons) == 1 and buttons[0].text == "Open in Perfetto"
    embedded = b.css("script#" + buttons[0].get_attribute("data-trace-data"))[0]
    data = base64.b64decode(b.text_content(embedded).strip())
    assert data == trace.read_bytes()   # the trace's own gzip, byte for byte
    b.driver.execute_script(_INTERCEPT)
    buttons[0].click()
    url, target = b.driver.execute_script("return window.__klOpened[0]")
    assert url.startswith("https://ui.perfetto.dev/?visStart=") and "&visEnd=" in url and target == "_blank"
    start = int(url.split("visStart=")[1].split("&")[0])
    end = int(url.split("visEnd=")[1])
    assert 0 < start < end
    # The opener pings until the UI answers.
    _wait(b, "return window.__klPosted.some(function (p) { return p.message === 'PING'; })")
    assert all(p["origin"] == "https://ui.perfetto.dev" for p in b.driver.execute_script("return window.__klPosted"))
    # A PONG from another origin is ignored; the UI's PONG gets the trace.
    b.driver.execute_script("window.dispatchEvent(new MessageEvent('message', "
                            "{data: 'PONG', origin: 'https://evil.example'}))")
    assert not b.driver.execute_script("return window.__klPosted.some(function (p) { return p.perfetto; })")
    b.driver.execute_script("window.dispatchEvent(new MessageEvent('message', "
                            "{data: 'PONG', origin: 'https://ui.perfetto.dev'}))")
    posted = _wait(b, "return window.__klPosted.filter(function (p) { return p.perfetto; })")
    assert len(posted) == 1
    p = posted[0]["perfetto"]
    assert posted[0]["origin"] == "https://ui.perfetto.dev"
    assert p["keys"] == ["buffer", "fileName", "title"]
    assert p["isArrayBuffer"] and p["length"] == len(data) and p["head"] == [0x1F, 0x8B]
    assert p["fileName"] == trace.name and trace.name in p["title"] and "ProfilerStep#" in p["title"]
    # No more pings after the answer.
    count = len(b.driver.execute_script("return window.__klPosted"))
    time.sleep(0.5)
    assert len(b.driver.execute_script("return window.__klPosted")) == count
    assert not b.problems()


def test_without_the_trace_the_button_says_what_to_do(browser, workdir):
    trace = step_trace(workdir / "big.pt.trace.json.gz")
    b = opened(browser, report(workdir, "never", trace, "--embed-trace", "never"))
    assert not b.css("script[type='application/octet-stream']")
    status = b.css(".kl-perfetto-status")[0].text
    assert "ui.perfetto.dev" in status and "Open trace file" in status and trace.name in status
    b.driver.execute_script(_INTERCEPT)
    b.css("button.kl-perfetto")[0].click()
    assert b.driver.execute_script("return window.__klOpened[0][0]") == "https://ui.perfetto.dev/"
    assert trace.name in b.css(".kl-perfetto-status")[0].text


def test_a_blocked_popup_or_a_silent_ui_says_what_to_do(browser, clean):
    b = opened(browser, clean[1])
    b.driver.execute_script("window.open = function () { return null; }")
    b.css("button.kl-perfetto")[0].click()
    status = b.css(".kl-perfetto-status")[0].text
    assert "blocked" in status and clean[0].name in status


def test_embedding_is_automatic_under_the_limit_only(tmp_path):
    from kernlint.report.perfetto import embed_traces

    small = step_trace(tmp_path / "small.pt.trace.json.gz", steps=1)
    plain = tmp_path / "plain.json"
    plain.write_bytes(gzip.decompress(small.read_bytes()))
    got = embed_traces([str(small), str(plain), str(tmp_path / "missing.json")], "auto")
    assert base64.b64decode(got[str(small)].data) == small.read_bytes()
    assert gzip.decompress(base64.b64decode(got[str(plain)].data)) == plain.read_bytes()   # gzipped for it
    assert not got[str(tmp_path / "missing.json")].data
    tight = embed_traces([str(small)], "auto", limit=100)[str(small)]
    assert not tight.data and "--embed-trace always" in tight.why_not
    assert embed_traces([str(small)], "always", limit=100)[str(small)].data
    assert not embed_traces([str(small)], "never")[str(small)].data


def test_a_trace_perfetto_cannot_open_gets_no_button_and_says_so(tmp_path):
    """An Nsight Systems SQLite export (kernlint.trace.sources' nsys): never embedded, no "pick the file" advice
    (Perfetto does not open it), for the file and for one process's part of it alike."""
    from kernlint.report.perfetto import embed_traces

    export = str(REPO / "fixtures" / "nsys" / "mfu_2gpu_before.sqlite.gz")
    for path in (export, export + "#pid-144"):
        item = embed_traces([path], "always")[path]
        assert not item.data and not item.opens_in_perfetto and "Perfetto does not open this nsys trace" in \
            item.why_not, item
    out = tmp_path / "nsys.html"
    proc = run_fresh(["check", export, "--select", "KL401", "--format", "html", "-o", str(out)], cwd=tmp_path)
    assert proc.returncode in (0, 1) and out.is_file(), proc.stderr[-2000:]
    page = out.read_text()
    assert "Perfetto does not open this nsys trace" in page and "kl-perfetto-manual" not in page
