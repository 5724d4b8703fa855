"""Screenshots of the HTML report for the README (docs/images/): a finding, a clean step, a baseline comparison.

    .venv/bin/python scripts/report_screenshots.py [--out docs/images] [--height 2000]

Renders three reports from the recorded fixtures with every shipped rule (as `kernlint check --isolated`):
- report-finding.png: the regressed placeholder (`new_ones` before the FP8 quantization: KL001),
  fixtures/traces/gpu/placeholder_new_ones.pt.trace.json.gz;
- report-clean-step.png: a clean decode step, fixtures/traces/gpu-decode/decode-clean-steps.pt.trace.json.gz;
- report-baseline.png: fixtures/cases/KL804.toml's "gpu-one-23us-gemm-5pct-slower" case (one 23 µs GEMM 5%
  slower than fixtures/baselines/h200-fp8-block-linear.json), scrolled to "Against the baseline";
and photographs each in the test harness's headless Chromium (tests/browser.py: /usr/bin/chromium and
chromedriver, no network) at 1,400 px wide, the top `--height` px of the page (of the baseline section for the
baseline report), saved as PNG: a palette of 256 colours where the file would pass MAX_BYTES otherwise.
"""
from __future__ import annotations

import argparse
import base64
import io
import os
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FIXTURES = Path("fixtures")     # relative to REPO, the working directory: the reports show checkout paths
WIDTH = 1400
MAX_BYTES = 400 * 1024

sys.path.insert(0, str(REPO / "tests"))   # the Chromium harness the report tests use


def _render(out: Path, *, paths=(), tables=(), baseline=None) -> Path:
    from kernlint.pipeline import BaselineInput, CheckRequest, Execution, Inputs, run_check
    from kernlint.report.html_format import render
    from kernlint.rules.loader import load_rules

    inputs = Inputs(paths=list(paths), tables=list(tables))
    result = run_check(CheckRequest(rules=load_rules(), inputs=inputs, baseline=BaselineInput(baseline, hint=None),
                                    execution=Execution(keep_tables=True)))
    out.write_text(render(result), encoding="utf-8")
    return out


def reports(folder: Path) -> dict[str, tuple[Path, str | None]]:
    """name -> (the report, the CSS selector to scroll to first, or None for the top of the page)."""
    from kernlint.baseline import read_baseline
    from kernlint.cases import _slowed, load_cases
    from kernlint.trace.load import load_trace

    (case,) = [c for c in load_cases(FIXTURES / "cases") if c.rule == "KL804"
               and c.spec.name == "gpu-one-23us-gemm-5pct-slower"]
    slowed = _slowed(load_trace(FIXTURES / case.spec.trace), case.spec.slowdown, case.spec.slowdown_kernel)
    return {
        "report-finding": (_render(folder / "finding.html",
                                   paths=[FIXTURES / "traces" / "gpu" / "placeholder_new_ones.pt.trace.json.gz"]),
                           None),
        "report-clean-step": (_render(folder / "clean.html", paths=[
            FIXTURES / "traces" / "gpu-decode" / "decode-clean-steps.pt.trace.json.gz"]), None),
        "report-baseline": (_render(folder / "baseline.html", tables=[slowed],
                                    baseline=read_baseline(FIXTURES / case.spec.baseline)), "section#baseline"),
    }


def shrink(png: bytes, limit: int = MAX_BYTES) -> bytes:
    """The PNG as it is when small enough; else quantized to 256 colours (a report is flat colours and text,
    so this loses nothing a reader sees), then scaled down until it fits."""
    from PIL import Image

    if len(png) <= limit:
        return png
    image = Image.open(io.BytesIO(png)).convert("RGB")
    scale = 1.0
    while True:
        shown = image if scale == 1.0 else image.resize((int(image.width * scale), int(image.height * scale)),
                                                        Image.LANCZOS)
        buf = io.BytesIO()
        shown.quantize(colors=256, method=Image.Quantize.MEDIANCUT).save(buf, "PNG", optimize=True)
        if buf.tell() <= limit or scale < 0.3:
            return buf.getvalue()
        scale *= 0.85


def screenshot(browser, selector: str | None, height: int) -> bytes:
    """The page opened last, at WIDTH px, from the top (or from `selector`'s top), `height` px tall at most."""
    driver = browser.driver
    top = 0
    if selector:
        top = int(driver.execute_script(
            "var e = document.querySelector(arguments[0]); return e ? e.getBoundingClientRect().top + "
            "window.scrollY - 8 : 0", selector))
    full = int(driver.execute_script("return document.documentElement.scrollHeight"))
    tall = max(1, min(height, full - top))
    # captureBeyondViewport: CDP draws exactly that region of the page, whatever the window's height.
    png = driver.execute_cdp_cmd("Page.captureScreenshot", {
        "format": "png", "captureBeyondViewport": True,
        "clip": {"x": 0, "y": top, "width": WIDTH, "height": tall, "scale": 1}})["data"]
    return base64.b64decode(png)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "images")
    parser.add_argument("--height", type=int, default=2000, help="px of the page from its top (default 2000)")
    args = parser.parse_args(argv)
    from browser import WINDOW, Browser

    assert WINDOW[0] == WIDTH, WINDOW
    args.out = args.out.resolve()
    args.out.mkdir(parents=True, exist_ok=True)
    os.chdir(REPO)
    browser = Browser()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for name, (path, selector) in reports(Path(tmp)).items():
                problems = browser.open(path)
                if problems:
                    raise SystemExit(f"{name}: the page reports problems: {problems}")
                png = shrink(screenshot(browser, selector, args.height))
                target = args.out / f"{name}.png"
                target.write_bytes(png)
                print(f"{target.relative_to(REPO) if target.is_relative_to(REPO) else target}: {len(png) // 1024} KB")
    finally:
        browser.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
