#!/usr/bin/env python3
"""Checking several traces: pairing from the workers' graph roles against a light pass over every file first.

    python bench/pair_from_summaries.py TRACE [TRACE ...] [--repeat 3] [--jobs 1]

Issue 39, item 3. The anchor is what a check of two or more traces did before: `pair_captures` reads every
trace in the parent (gunzipped and held whole) to learn its CUDA-graph role, then the map reads each again.
Ours (`pipeline.check_and_pair`): the map reads each trace once and hands back its role; only the traces the
pairing concerns are read again. Both run in this process, interleaved, with the same rules (the shipped
ones); the table gives each one's median wall time and ours / anchor. On traces without graphs (most) ours
skips the parent's pass altogether; on a capture/replay pair both read the pair twice.
"""
from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("traces", nargs="+", type=Path)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=1)
    args = parser.parse_args()

    from kernlint.parallel import check_paths
    from kernlint.pipeline import Execution, check_and_pair
    from kernlint.rules.loader import load_rules
    from kernlint.trace.load import DEFAULT_MAX_TRACE_BYTES
    from kernlint.trace.pairing import pair_captures

    rules = load_rules()
    files = list(args.traces)
    limit = DEFAULT_MAX_TRACE_BYTES

    def anchor() -> None:
        pairing = pair_captures(files, limit)
        check_paths(pairing.checked, rules, max_bytes=limit, jobs=args.jobs, captures=pairing.captures,
                    outside_captures=pairing.outside_captures)

    def ours() -> None:
        check_and_pair(files, rules, limit, (), Execution(jobs=args.jobs), baseline_parts=False)

    def pairing_alone() -> None:
        pair_captures(files, limit)

    times: dict[str, list[float]] = {"anchor: pair_captures, then the map": [], "ours: the map, roles from it": [],
                                     "(the anchor's pairing pass alone)": []}
    for _ in range(args.repeat):
        for samples, run in zip(times.values(), (anchor, ours, pairing_alone)):
            t0 = time.perf_counter()
            run()
            samples.append(time.perf_counter() - t0)
    medians = {name: statistics.median(samples) for name, samples in times.items()}
    first = next(iter(medians.values()))
    print(f"{len(files)} trace(s), {args.repeat} run(s) each, jobs {args.jobs}")
    for name, median in medians.items():
        print(f"  {name:40s} {median:8.2f} s   {median / first:5.2f}x the anchor")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
