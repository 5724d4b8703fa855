"""Reading a gzip trace past KEEP_WHILE_COUNTING (256 MB): one pass into the size the gzip trailer gives,
against the two passes it took before (count, then fill) and against the anchor, `gzip.decompress` of the
file's bytes (issue 26: traces over 256 MB were gunzipped twice).

    python bench/gunzip_once.py            # a ~350 MB trace (23 MB gzip), best of 3
"""
from __future__ import annotations

import argparse
import gzip
import json
import tempfile
import time
from pathlib import Path

import kernlint.trace.load as load


def best_of(runs: int, fn) -> float:
    best = float("inf")
    for _ in range(runs):
        start = time.perf_counter()
        data = fn()
        best = min(best, time.perf_counter() - start)
        del data
    return best


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--copies", type=int, default=13, help="copies of 200,000 events (13: ~350 MB of JSON)")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    events = [{"ph": "X", "cat": "cpu_op", "name": f"aten::op{i % 977}", "pid": 1, "tid": 2, "ts": 10.0 * i,
               "dur": 5.0, "args": {"External id": i}} for i in range(200_000)]
    chunk = json.dumps(events)[1:-1].encode()
    body = b'{"traceEvents":[' + b",".join([chunk] * args.copies) + b"]}"
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "big.pt.trace.json.gz"
        with gzip.open(path, "wb", compresslevel=1) as out:
            out.write(body)
        now = best_of(args.runs, lambda: load.read_trace_bytes(path))
        hint = load._size_hint
        load._size_hint = lambda *args: None   # the reader as it was: count, then fill
        try:
            before = best_of(args.runs, lambda: load.read_trace_bytes(path))
        finally:
            load._size_hint = hint
        anchor = best_of(args.runs, lambda: gzip.decompress(path.read_bytes()))
        print(f"{'JSON MB':>8} {'gzip MB':>8} {'ours s':>7} {'before s':>9} {'anchor s':>9} {'ours/before':>12} "
              f"{'ours/anchor':>12}")
        print(f"{len(body) / 1e6:8.0f} {path.stat().st_size / 1e6:8.0f} {now:7.2f} {before:9.2f} {anchor:9.2f} "
              f"{now / before:12.2f} {now / anchor:12.2f}")


if __name__ == "__main__":
    main()
