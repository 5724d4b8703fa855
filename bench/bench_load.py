"""Trace loading speed: kernlint against the anchors, side by side in one run.

Builds a large synthetic trace by replicating a recorded one (an H200 fixture when present) with shifted
times and ids, then times each reader in a fresh process (wall seconds and peak RSS):
  - stdlib json.load (the anchor: facts-h200.md measured 4.7 s / 646 MB for 145 MB, 462,797 events)
  - kernlint load_trace: decode + event table + links + scopes
  - kernlint check: the above plus every shipped rule
  - torch-tb-profiler 0.4.3 RunProfileData.parse + analyze (only with --tb; it takes minutes)

Usage: python bench/bench_load.py [--events 460000] [--repeat 3] [--tb]
"""
from __future__ import annotations

import argparse
import copy
import gzip
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ID_KEYS = ("External id", "correlation", "Python id", "Python parent id", "Ev Idx")

READERS = {
    "stdlib json.load (anchor)": "import json,sys; json.load(open(sys.argv[1]))",
    "kernlint load_trace": "import sys; from kernlint.trace.load import load_trace; load_trace(sys.argv[1])",
    "kernlint check (all rules)": (
        "import sys; from kernlint.trace.load import load_trace; from kernlint.rules.loader import load_rules;"
        "from kernlint.rules.engine import check_trace; check_trace(load_trace(sys.argv[1]), load_rules())"),
    "torch-tb-profiler parse+analyze": (
        "import sys; from torch_tb_profiler.profiler.data import RunProfileData;"
        "p = RunProfileData.parse('w', 's', sys.argv[1], '/tmp'); p.analyze()"),
}


def base_trace() -> dict:
    gpu = sorted((REPO / "fixtures" / "traces" / "gpu").glob("block_regressed*.pt.trace.json.gz"))
    if gpu:
        return json.loads(gzip.decompress(gpu[0].read_bytes()))
    sys.path.insert(0, str(REPO / "tests"))
    from conftest import load_program  # noqa: E402
    from kernlint.capture.profiler import record_trace
    with tempfile.TemporaryDirectory() as tmp:
        path = record_trace(load_program("block_regressed").build("cpu"), Path(tmp) / "t.pt.trace.json.gz",
                            device="cpu")
        return json.loads(gzip.decompress(path.read_bytes()))


def replicate(trace: dict, target_events: int) -> dict:
    events = trace["traceEvents"]
    body = [e for e in events if e.get("ph") != "M"]
    span = max(e.get("ts", 0) + e.get("dur", 0) for e in body) - min(e.get("ts", 0) for e in body) + 10.0
    id_span = 1 + max((e.get("args", {}).get(k) or 0) for e in body for k in ID_KEYS
                      if isinstance(e.get("args", {}).get(k), int))
    out = [e for e in events if e.get("ph") == "M"]
    copies = max(1, target_events // len(body))
    for i in range(copies):
        for e in body:
            c = copy.copy(e)
            if "ts" in c:
                c["ts"] = e["ts"] + i * span
            args = e.get("args")
            if args:
                c["args"] = dict(args)
                for k in ID_KEYS:
                    if isinstance(args.get(k), int) and args[k] > 0:
                        c["args"][k] = args[k] + i * id_span
            out.append(c)
    big = dict(trace)
    big["traceEvents"] = out
    return big


def measure(code: str, path: Path) -> tuple[float, float]:
    """Wall seconds of a fresh process (start-up included) and that process's own peak RSS in MB."""
    code += "; import resource; print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)"
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, cwd="/tmp")
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr.strip().splitlines()[-1] if proc.stderr else "failed")
    return wall, int(proc.stdout.strip().splitlines()[-1]) / 1024.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=460_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--tb", action="store_true", help="also time torch-tb-profiler (slow)")
    args = parser.parse_args()
    big = replicate(base_trace(), args.events)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "big.pt.trace.json"
        path.write_text(json.dumps(big))
        size_mb = path.stat().st_size / 1e6
        print(f"trace: {len(big['traceEvents']):,} events, {size_mb:.0f} MB, python {sys.version.split()[0]}")
        rows = []
        for name, code in READERS.items():
            if name.startswith("torch-tb") and not args.tb:
                continue
            runs = [measure(code, path) for _ in range(1 if name.startswith("torch-tb") else args.repeat)]
            rows.append((name, statistics.median(r[0] for r in runs), max(r[1] for r in runs)))
    anchor = rows[0][1]
    print(f"{'reader':34} {'median s':>9} {'peak RSS MB':>12} {'time vs json.load':>18}")
    for name, wall, rss in rows:
        print(f"{name:34} {wall:9.2f} {rss:12.0f} {wall / anchor:17.2f}x")


if __name__ == "__main__":
    main()
