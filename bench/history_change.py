"""`kernlint history` against the two-sample PR check it complements (issue 20), on real H200 noise.

Input: a folder of process traces from scripts/gpu_timing_gate.sh (30 or more processes of one workload).
Baseline i is recorded from process i (10 runs). Three histories of 30 baselines:
- unchanged: the processes as recorded;
- step: every kernel 1% slower from baseline 21 on;
- drift: baseline i's kernels (1 + 0.001 i) x as long (0.1% a commit, 3% in all).
Ours: the change points `kernlint history` finds. The anchor: the PR check, KL804 on each baseline i against
process i + 1 (29 checks a history). Printed side by side.

    python bench/history_change.py /tmp/gate/block
"""
from __future__ import annotations

import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from timing_gate import _process_traces  # noqa: E402

from kernlint.baseline import build_baseline, profile_traces  # noqa: E402
from kernlint.baseline.history import analyse  # noqa: E402
from kernlint.cases import _slowed  # noqa: E402
from kernlint.pipeline import check_tables  # noqa: E402
from kernlint.rules.loader import load_rules  # noqa: E402
from kernlint.trace.load import load_trace  # noqa: E402

N = 30


def main() -> int:
    folder = Path(sys.argv[1])
    tables = [load_trace(p) for p in _process_traces(folder)[:N + 1]]
    kl804 = [r for r in load_rules() if r.id == "KL804"]
    factors = {"unchanged": [1.0] * (N + 1), "step": [1.0 if i < 20 else 1.01 for i in range(N + 1)],
               "drift": [1 + 0.001 * i for i in range(N + 1)]}
    print(f"{'history':<10} {'history: change points (first baseline after)':<48} {'PR checks flagging':>19}")
    with tempfile.TemporaryDirectory():
        for name, scale in factors.items():
            runs = [t if f == 1.0 else _slowed(t, f, None) for t, f in zip(tables, scale, strict=True)]
            baselines = [build_baseline(profile_traces([t])) for t in runs[:N]]
            history, _ = analyse(baselines, [f"b{i + 1:02d}" for i in range(N)])
            at = sorted({c.baseline for c in history.change_points})
            totals = [c for c in history.change_points if "total device time" in c.series]
            flagged = 0
            for i in range(N - 1):
                report = check_tables([runs[i + 1]], kl804, baseline=baselines[i])[-1]
                flagged += any(o.findings for o in report.outcomes)
            found = (", ".join(at) or "none") + (f" (total at {totals[0].baseline}, {totals[0].relative:+.1%})"
                                                 if totals else "")
            print(f"{name:<10} {found:<48} {flagged:>12}/{N - 1}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
