"""The fixed cost of a trace: `kernlint check` over N tiny rank traces of one run (issue 22, item 14).

Writes N traces of one N-rank run (a few ops and a kernel each) into a temporary folder, checks the folder in
a fresh process and prints a table: wall time, the cost per trace against the 5 ms anchor (the budget the
issue sets: 10,000 tiny ranks in under a minute on 2 cores), and the peak memory of the check.

    python bench/many_ranks.py              # 2,000 ranks
    python bench/many_ranks.py --ranks 10000
"""
from __future__ import annotations

import argparse
import gzip
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ANCHOR_MS = 5.0   # the budget of fixed cost per trace


def tiny_rank(rank: int, world: int) -> dict:
    base = 1_700_000_000_000_000_000
    pid = 1000 + rank
    ops = [
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": pid, "tid": 1, "ts": 10.0, "dur": 5.0,
         "args": {"External id": 1}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": pid, "tid": 1, "ts": 11.0, "dur": 2.0,
         "args": {"correlation": 7, "External id": 1}},
        {"ph": "X", "cat": "kernel", "name": "ampere_sgemm_128x64_tn", "pid": 0, "tid": 7, "ts": 14.0, "dur": 3.0,
         "args": {"correlation": 7, "device": 0, "stream": 7}},
        {"ph": "X", "cat": "cpu_op", "name": "c10d::allreduce_", "pid": pid, "tid": 1, "ts": 20.0, "dur": 4.0,
         "args": {"External id": 2}},
    ]
    return {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA H200"}],
            "distributedInfo": {"backend": "nccl", "rank": rank, "world_size": world, "pg_count": 1},
            "baseTimeNanoseconds": base, "traceEvents": ops}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=2000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="kernlint-many-ranks-") as tmp:
        folder = Path(tmp) / "run"
        folder.mkdir()
        for rank in range(args.ranks):
            data = gzip.compress(json.dumps(tiny_rank(rank, args.ranks)).encode(), compresslevel=1)
            (folder / f"host_{1000 + rank}.{rank}.pt.trace.json.gz").write_bytes(data)
        start = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "kernlint", "check", str(folder), "--isolated", "--format",
                               "json", "-o", str(Path(tmp) / "report.json")], capture_output=True, text=True)
        wall = time.perf_counter() - start
        peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        if done.returncode not in (0, 1, 4):
            print(done.stderr, file=sys.stderr)
            return 1
        report = json.loads((Path(tmp) / "report.json").read_text())
    per_trace = wall / args.ranks * 1000
    groups = [t for t in report["traces"] if t.get("ranks")]
    header = ("ranks", "wall s", "ms/trace", "anchor ms", "ratio", "peak MB", "run groups")
    print(" ".join(f"{h:>{w}}" for h, w in zip(header, (7, 8, 9, 10, 6, 8, 10), strict=True)))
    print(f"{args.ranks:>7} {wall:>8.1f} {per_trace:>9.2f} {ANCHOR_MS:>10.1f} {per_trace / ANCHOR_MS:>6.2f} "
          f"{peak_mb:>8.0f} {len(groups):>10}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
