"""The timing gate on real noise (issue 20): A/A false alarms and detection, ours against an anchor.

Input: folders of traces recorded by scripts/gpu_timing_gate.sh, one fresh process each (10 profiled runs a
process). For each model folder, the first BASE processes make the baseline (one program, BASE processes);
every other process is a candidate:
- A/A: the candidate as recorded (unchanged code): any KL804 finding is a false alarm;
- 2% total: every kernel of the candidate 1.02 x as long: caught when KL804 finds anything;
- 5% one kernel: one kernel function of 10 µs or more (its every launch) 1.05 x as long;
- real change (`--changed DIR`): processes of a variant whose one kernel does more work.
The anchor is another kernlint source tree (`--anchor-src DIR`, e.g. the commit before the change) run on
the same traces in a child process, so both columns come from one run of this script.

    python bench/timing_gate.py MODEL_DIR [MODEL_DIR ...] [--changed NAME=DIR] [--base 5] \
        [--anchor-src /tmp/kernlint-before]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path


def _process_traces(folder: Path) -> list[Path]:
    """One trace per process folder (p01, p02, ...), in process order."""
    found = []
    for proc in sorted(p for p in folder.iterdir() if p.is_dir()):
        traces = sorted(proc.rglob("*.pt.trace.json.gz"))
        if traces:
            found.append(traces[0])
    return found


def measure(folders: list[Path], changed: dict[str, Path], base_n: int) -> dict:
    """Every check, in this process, with whatever kernlint is importable."""
    import numpy as np

    from kernlint.baseline import build_baseline, profile_traces
    from kernlint.cases import _slowed
    from kernlint.pipeline import check_tables
    from kernlint.rules.loader import load_rules
    from kernlint.trace.load import load_trace

    rules = [r for r in load_rules() if r.id in ("KL804", "KL806")]
    out: dict = {}
    for folder in folders:
        traces = _process_traces(folder)
        tables = [load_trace(p) for p in traces]
        baseline = build_baseline(profile_traces(tables[:base_n]))
        one_process = build_baseline(profile_traces(tables[:1]))
        candidates = tables[base_n:]
        program = next(iter(baseline.programs.values()))
        medians = {launch.name: float(np.median(launch.us)) for _, launch in program.sequence() if launch.us}
        big = sorted((m, n) for n, m in medians.items() if m >= 10.0)
        kernel = big[0][1] if big else None

        def findings(table, against) -> tuple[int, int]:
            report = check_tables([table], rules, baseline=against)[-1]
            by_rule = {o.rule: o for o in report.outcomes}
            return len(by_rule["KL804"].findings), len(by_rule["KL806"].findings)

        rows = {}
        aa = [findings(t, baseline) for t in candidates]
        rows["A/A: KL804 false alarms"] = (sum(1 for s, _ in aa if s), len(aa))
        rows["A/A: KL806 false alarms"] = (sum(1 for _, f in aa if f), len(aa))
        aa1 = [findings(t, one_process) for t in candidates]
        rows["A/A, 1-process baseline: KL804"] = (sum(1 for s, _ in aa1 if s), len(aa1))
        slow2 = [findings(_slowed(t, 1.02, None), baseline)[0] for t in candidates]
        rows["2% total: caught"] = (sum(1 for s in slow2 if s), len(slow2))
        if kernel:
            pattern = "^" + "".join("\\" + c if c in r"\.^$*+?{}[]|()" else c for c in kernel) + "$"
            slow5 = [findings(_slowed(t, 1.05, pattern), baseline)[0] for t in candidates]
            rows[f"5% of {kernel[:28]} ({medians[kernel]:.0f} µs): caught"] = (sum(1 for s in slow5 if s),
                                                                                len(slow5))
        for name, other in changed.items():
            if name != folder.name:
                continue
            variant = [load_trace(p) for p in _process_traces(other)]
            real = [findings(t, baseline)[0] for t in variant]
            rows[f"real change ({other.name}): caught"] = (sum(1 for s in real if s), len(real))
        out[folder.name] = {"rows": rows, "processes": len(tables), "base": base_n,
                            "quantum_us": getattr(program, "quantum_us", 0.0), "kernels_per_run": len(medians)}
    return out


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("folders", nargs="+", type=Path)
    parser.add_argument("--changed", action="append", default=[], metavar="MODEL=DIR",
                        help="processes of a variant of MODEL (the folder name) with a real code change")
    parser.add_argument("--base", type=int, default=5, help="processes that make the baseline")
    parser.add_argument("--anchor-src", type=Path, default=None, help="the anchor's kernlint source tree")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    changed = {c.split("=", 1)[0]: Path(c.split("=", 1)[1]) for c in args.changed}
    if args.worker:
        print(json.dumps(measure(args.folders, changed, args.base)))
        return 0
    ours = measure(args.folders, changed, args.base)
    anchor = None
    if args.anchor_src:
        env = {**os.environ, "PYTHONPATH": str(args.anchor_src.resolve())}
        cmd = [sys.executable, __file__, *map(str, args.folders), "--base", str(args.base), "--worker",
               *[a for c in args.changed for a in ("--changed", c)]]
        anchor = json.loads(subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stdout)
    print(f"{'model':<8} {'check':<46} {'ours':>8} {'anchor':>8} {'ours/anchor':>11}")
    for model, data in ours.items():
        print(f"{model:<8} (processes {data['processes']}, baseline {data['base']} x 10 runs, tick "
              f"{data['quantum_us'] * 1000:.0f} ns, {data['kernels_per_run']} distinct kernels)")
        for check, (hit, n) in data["rows"].items():
            theirs = anchor[model]["rows"].get(check) if anchor else None
            mine = f"{hit}/{n}"
            other = f"{theirs[0]}/{theirs[1]}" if theirs else "-"
            ratio = f"{(hit / n) / (theirs[0] / theirs[1]):.2f}" if theirs and theirs[0] else "-"
            print(f"{'':<8} {check:<46} {mine:>8} {other:>8} {ratio:>11}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
