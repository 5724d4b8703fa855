"""The HTML report at scale: a 145 MB-class trace (460K events, the regressed FP8 block linear replicated)
through `kernlint report`, the report's size, and how long headless Chromium takes to open it.

Anchors, side by side: stdlib `json.load` of the same trace (what any tool pays to read it), and the issue's
targets for the report (opens in under 2 s, under 5 MB).

Usage: python bench/bench_report.py [--events 460000] [--fixture PATH ...]
"""
from __future__ import annotations

import argparse
import gzip
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "trace_speed"))
from generate import grow  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
OPEN_TARGET_S, SIZE_TARGET_MB = 2.0, 5.0


def open_seconds(html: Path) -> tuple[float, float]:
    """(wall seconds of driver.get until the load event, the page's own navigation-to-load time)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1400,1000"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(executable_path="/usr/bin/chromedriver"), options=options)
    try:
        driver.get("about:blank")
        start = time.perf_counter()
        driver.get(html.as_uri())
        wall = time.perf_counter() - start
        page = driver.execute_script(
            "const t = performance.getEntriesByType('navigation')[0]; return t.loadEventEnd - t.startTime;") / 1e3
        return wall, page
    finally:
        driver.quit()


def measure(trace: Path, label: str, folder: Path) -> None:
    html = folder / f"{trace.name}.html"
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "kernlint", "report", str(trace), "-o", str(html), "--isolated"],
                          capture_output=True, text=True)
    report_s = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"kernlint report failed: {done.stderr.strip()}")
    start = time.perf_counter()
    with gzip.open(trace, "rt") if trace.suffix == ".gz" else open(trace) as fh:
        json.load(fh)
    anchor_s = time.perf_counter() - start
    size_mb = html.stat().st_size / 1e6
    wall, page = open_seconds(html)
    print(f"| {label:<34} | {report_s:7.2f} s | {anchor_s:7.2f} s | {report_s / anchor_s:5.1f}x | {size_mb:6.2f} MB "
          f"({size_mb / SIZE_TARGET_MB:4.2f}x target) | {wall:5.2f} s ({wall / OPEN_TARGET_S:4.2f}x target) | "
          f"{page:5.2f} s |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=460_000)
    parser.add_argument("--fixture", action="append", type=Path, default=[],
                        help="also measure this trace (default: the largest GPU fixture)")
    args = parser.parse_args()
    fixtures = args.fixture or [max((REPO / "fixtures" / "traces").rglob("*.pt.trace.json.gz"),
                                    key=lambda p: p.stat().st_size)]
    print("| trace | kernlint report | json.load (anchor) | ratio | report size (target 5 MB) "
          "| open in Chromium (target 2 s) | page load |")
    print("|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for fixture in fixtures:
            measure(fixture, f"{fixture.name[:30]} ({fixture.stat().st_size / 1e6:.1f} MB gz)", folder)
        # The regressed FP8 block linear recorded on the H200, repeated step by step (times and ids shifted).
        src = sorted((REPO / "fixtures" / "traces" / "gpu").glob("block_regressed*.pt.trace.json.gz"))[0]
        body = sum(e.get("ph") != "M" for e in json.loads(gzip.decompress(src.read_bytes()))["traceEvents"])
        copies = max(1, args.events // body)
        path = grow(src, 0, folder / "big.pt.trace.json", copies=copies)
        measure(path, f"{copies * body:,} events ({path.stat().st_size / 1e6:.0f} MB)", folder)


if __name__ == "__main__":
    main()
