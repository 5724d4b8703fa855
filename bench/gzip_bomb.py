"""Bounded reading: a gzip bomb against the trace reader, and what the size cap's first pass costs.

1. Bombs: `--bomb-gib` GiB of zeros (and of spaces) behind a few MB of gzip, written as a stream. Each is
   read by `load_trace` in a fresh process at the default cap (DEFAULT_MAX_TRACE_BYTES); the table gives
   the outcome (one TraceError expected), the wall time and the process's peak RSS, next to the RSS of a
   process that only imported kernlint.
2. First pass: a realistic trace of about `--trace-mb` MB of JSON (an H200 fixture grown with shifted
   times and ids, bench/trace_speed/generate.py), gzipped. Times: inflating it once while only counting (what a
   second pass costs when a trace is larger than KEEP_WHILE_COUNTING), `read_trace_bytes` as it runs by
   default, `read_trace_bytes` forced to two passes, and the whole `load_trace`, each in a fresh process.

Usage: python bench/gzip_bomb.py [--bomb-gib 4] [--trace-mb 150] [--repeat 3]
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

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))

_CHILD = r"""
import json, resource, sys, time, zlib
sys.path.insert(0, {repo!r})
from kernlint.errors import TraceError
from kernlint.trace import load
mode, path = sys.argv[1], sys.argv[2]
baseline = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
start = time.perf_counter()
outcome = "ok"
try:
    if mode == "count":
        with open(path, "rb") as raw:
            total = load._inflate(raw, load.Path(path), 1 << 62, lambda chunk: None)
        outcome = f"{{total:,}} bytes"
    elif mode == "read":
        outcome = f"{{len(load.read_trace_bytes(load.Path(path))):,}} bytes"
    elif mode == "read-two-pass":
        load.KEEP_WHILE_COUNTING = 0
        outcome = f"{{len(load.read_trace_bytes(load.Path(path))):,}} bytes"
    else:
        outcome = f"{{len(load.load_trace(path)):,}} events"
except TraceError as exc:
    outcome = "TraceError: " + exc.problem
seconds = time.perf_counter() - start
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
hwm = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:"))
print(json.dumps({{"seconds": seconds, "peak_mb": peak / 1024, "baseline_mb": baseline / 1024,
                  "hwm_mb": hwm / 1024, "outcome": outcome}}))
"""


def _child(mode: str, path: Path) -> dict:
    code = _CHILD.format(repo=str(REPO))
    done = subprocess.run([sys.executable, "-c", code, mode, str(path)], capture_output=True, text=True,
                          check=False)
    if done.returncode != 0 or done.stderr.strip():
        raise SystemExit(f"child failed ({done.returncode}): {done.stderr.strip()[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def write_bomb(path: Path, gib: int, byte: bytes) -> float:
    chunk = byte * (1 << 20)
    start = time.perf_counter()
    with open(path, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=9) as gz:
        for _ in range(gib * 1024):
            gz.write(chunk)
    return time.perf_counter() - start


def write_trace(path: Path, target_mb: int) -> int:
    """Run in a child process (--write-trace), so that this process stays small: a child inherits its
    parent's peak RSS through fork and exec, and would report it as its own. The H200 decode fixture grown
    to the size (bench/trace_speed/generate.py grow)."""
    sys.path.insert(0, str(REPO / "bench" / "trace_speed"))
    from generate import grow, json_size

    grow(REPO / "fixtures/traces/gpu-decode/large-decode-clean-range.pt.trace.json.gz", target_mb * 10**6, path)
    return json_size(path)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bomb-gib", type=int, default=4)
    parser.add_argument("--trace-mb", type=int, default=150)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--write-trace", nargs=2, metavar=("PATH", "MB"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.write_trace:
        print(write_trace(Path(args.write_trace[0]), int(args.write_trace[1])))
        return 0
    from kernlint.trace.load import DEFAULT_MAX_TRACE_BYTES, KEEP_WHILE_COUNTING

    folder = Path(tempfile.mkdtemp(prefix="kl-bomb-"))
    print(f"DEFAULT_MAX_TRACE_BYTES = {DEFAULT_MAX_TRACE_BYTES:,}; KEEP_WHILE_COUNTING = {KEEP_WHILE_COUNTING:,}")
    print("peak RSS: getrusage ru_maxrss of a fresh process that runs one step (VmHWM agrees); import-only: the "
          "same process before the step")
    print(f"\n{'bomb':<28} {'gzip MB':>8} {'write s':>8} {'read s':>7} {'peak RSS MB':>12} "
          f"{'import-only MB':>15}  outcome")
    for label, byte in (("zeros", b"\0"), ("spaces", b" ")):
        path = folder / f"bomb-{label}.json.gz"
        wrote = write_bomb(path, args.bomb_gib, byte)
        best = min((_child("load", path) for _ in range(args.repeat)), key=lambda r: r["seconds"])
        print(f"{f'{args.bomb_gib} GiB of {label}':<28} {path.stat().st_size / 1e6:>8.2f} {wrote:>8.1f} "
              f"{best['seconds']:>7.2f} {best['peak_mb']:>12.0f} {best['baseline_mb']:>15.0f}  {best['outcome']}")
        path.unlink()

    trace = folder / "trace.json.gz"
    done = subprocess.run([sys.executable, __file__, "--write-trace", str(trace), str(args.trace_mb)],
                          capture_output=True, text=True, check=True)
    size = int(done.stdout.strip().splitlines()[-1])
    print(f"\nrealistic trace: {size / 1e6:.0f} MB of JSON, {trace.stat().st_size / 1e6:.1f} MB gzipped")
    print(f"{'step':<44} {'best s':>7} {'peak RSS MB':>12} {'VmHWM MB':>9}  outcome")
    for label, mode in (("inflate once, count only (the first pass)", "count"),
                        ("read_trace_bytes (default)", "read"),
                        ("read_trace_bytes, two passes forced", "read-two-pass"),
                        ("load_trace (read, decode, table, scopes)", "load")):
        runs = [_child(mode, trace) for _ in range(args.repeat)]
        best = min(runs, key=lambda r: r["seconds"])
        print(f"{label:<44} {best['seconds']:>7.2f} {best['peak_mb']:>12.0f} {best['hwm_mb']:>9.0f}  {best['outcome']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
