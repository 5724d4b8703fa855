"""How often the timing gate cries wolf, and what it catches, on real recorded runs.

    python scripts/baseline_study.py BASELINE_TRACE... --candidates CANDIDATE_TRACE...

The baseline is built from the first traces; each candidate trace (one process, several profiler steps) is
checked against it as it was recorded (false alarms), then with injected slowdowns: every kernel 2% slower
(total device time), and each kernel of 20 µs or more 5% slower on its own. A sweep finds the smallest
injected effect caught in every candidate. Injection scales the recorded durations in memory, so the noise
is the real run-to-run noise of the GPU the traces came from.
"""
from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import numpy as np

from kernlint.baseline import build_baseline, profile_traces
from kernlint.baseline.stats import robust_cv
from kernlint.pipeline import check_tables
from kernlint.rules.loader import load_rules
from kernlint.trace.load import load_trace

TIMING = "KL804"


def _slowed(table, factor: float, kernel: str | None = None):
    """A copy of the table whose kernels (or only `kernel`) ran `factor` times as long."""
    import copy

    out = copy.copy(table)   # the same meta and derived facts (graph attribution), caches of its own
    out.frame = table.frame.copy()
    f = out.frame
    rows = (f["kind"] == "kernel") if kernel is None else ((f["kind"] == "kernel") & (f["short_name"] == kernel))
    f.loc[rows, "dur"] = f.loc[rows, "dur"] * factor
    f.loc[rows, "end"] = f.loc[rows, "ts"] + f.loc[rows, "dur"]
    return out


def _flagged(baseline, rules, table) -> tuple[set[str], int]:
    report = check_tables([table], rules, baseline=baseline)[-1]
    outcome = next(o for o in report.outcomes if o.rule == TIMING)
    sequence = sum(len(o.findings) for o in report.outcomes if o.rule in ("KL801", "KL802"))
    return {f.event for f in outcome.findings}, sequence


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("baseline", nargs="+", type=Path)
    parser.add_argument("--candidates", nargs="+", type=Path, required=True)
    args = parser.parse_args()
    rules = [r for r in load_rules() if r.needs_baseline]
    baseline = build_baseline(profile_traces([load_trace(p) for p in args.baseline]))
    (program,) = baseline.programs.values()
    candidates = [load_trace(p) for p in args.candidates]
    medians = {}
    for scope in program.scopes.values():
        for launch in scope.launches:
            if launch.us and launch.kind == "kernel":
                medians[launch.name] = max(medians.get(launch.name, 0.0), statistics.median(launch.us))
    big = sorted((name for name, us in medians.items() if us >= 20.0), key=medians.get)
    totals = np.array(program.total_us)
    print(f"baseline: {program.runs} runs, {sum(len(s.launches) for s in program.scopes.values())} launches, "
          f"total device time median {statistics.median(program.total_us):.1f} µs "
          f"(robust CV {robust_cv(totals):.3%})")
    print(f"candidates: {len(candidates)} traces; kernels of 20 µs or more: {len(big)}")

    rows = []
    false_alarms = [(_flagged(baseline, rules, t)) for t in candidates]
    rows.append(("unchanged", f"{sum(bool(f) for f, _ in false_alarms)}/{len(candidates)} runs flagged",
                 f"{sum(len(f) for f, _ in false_alarms)} timing findings, {sum(s for _, s in false_alarms)} sequence"))
    hits = [_flagged(baseline, rules, _slowed(t, 1.02))[0] for t in candidates]
    rows.append(("every kernel +2% (total)", f"{sum('total device time' in h for h in hits)}/{len(candidates)} "
                 "runs flag the total", ""))
    for name in big:
        hits = [_flagged(baseline, rules, _slowed(t, 1.05, name))[0] for t in candidates]
        caught = sum(name in h for h in hits)
        others = sum(len(h - {name, "total device time"}) for h in hits)
        rows.append((f"{name[:48]} ({medians[name]:.1f} µs) +5%", f"{caught}/{len(candidates)} runs flag it",
                     f"{others} other kernels flagged"))
    for label, result, extra in rows:
        print(f"| {label:<62} | {result:<28} | {extra} |")

    print("smallest injected effect caught in every candidate:")
    for label, kernel in [("total (every kernel)", None)] + [(n[:48], n) for n in big[:3]]:
        smallest = None
        for pct in (0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 5.0, 7.5, 10.0):
            want = "total device time" if kernel is None else kernel
            if all(want in _flagged(baseline, rules, _slowed(t, 1 + pct / 100, kernel))[0] for t in candidates):
                smallest = pct
                break
        print(f"  {label}: {smallest if smallest is not None else '> 10'}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
