#!/usr/bin/env bash
# One device call: the timing gate on an H200 (issue 9's measurements).
#  1. a baseline of fp8-block-linear: 20 profiled runs in one process;
#  2. 20 separate processes of the unchanged workload, 10 runs each, checked against it (false alarms);
#  3. all built-in workloads recorded, then `kernlint audit --baseline` against them;
#  4. scripts/baseline_study.py on the kept traces: injected slowdowns and the smallest effect caught.
# Keeps the baseline, the traces and the reports under $OUT.
set -uo pipefail
source "$(dirname "$0")/device_env.sh"
python3 -c "import scipy; print('scipy', scipy.__version__)"
K="python3 -m kernlint"
mkdir -p "$OUT/base" "$OUT/cand" "$OUT/reports"
t0=$(date +%s.%N)
$K baseline record --workload fp8-block-linear --repeat 20 --out "$OUT/base" -o "$OUT/base.json" --isolated
echo "baseline record: exit $?, $(python3 -c "print(round($(date +%s.%N) - $t0, 1))") s"
for i in $(seq 1 20); do
  t0=$(date +%s.%N)
  $K run fp8-block-linear --repeat 10 --out "$OUT/cand" --baseline "$OUT/base.json" --format json \
     -o "$OUT/reports/cand_$i.json" --isolated
  code=$?
  python3 - "$OUT/reports/cand_$i.json" "$i" "$code" "$(python3 -c "print(round($(date +%s.%N) - $t0, 1))")" <<'PY'
import json, sys
data = json.load(open(sys.argv[1]))
timing = [f for f in data["findings"] if f["rule"] in ("KL804", "KL806")]
print(f"run {sys.argv[2]}: exit {sys.argv[3]}, {sys.argv[4]} s, findings "
      f"{sorted({f['rule'] for f in data['findings']})}, timing {[(f['rule'], f['event'][:40], f['details']['relative']) for f in timing]}")
PY
done
t0=$(date +%s.%N)
$K baseline record --workload all --repeat 10 -o "$OUT/all.json" --isolated
$K audit --baseline "$OUT/all.json" --repeat 10 --isolated 2>&1 | grep -v '^USDT' | tee "$OUT/audit_baseline.txt"
echo "audit --baseline: exit ${PIPESTATUS[0]}, $(python3 -c "print(round($(date +%s.%N) - $t0, 1))") s (incl. record)"
python3 scripts/baseline_study.py "$OUT"/base/*/*/*.pt.trace.json.gz --candidates "$OUT"/cand/*/*/*.pt.trace.json.gz \
  | tee "$OUT/study.txt"
du -sh "$OUT"/base "$OUT"/cand
