#!/usr/bin/env bash
# One device call: every regression-zoo workload (fixtures/zoo/*.py) recorded on the H200 into $OUT/gpu-zoo/,
# then checked there with the shipped rules (a verdict line per trace) for the rule cases to replay.
set -uo pipefail
source "$(dirname "$0")/device_env.sh"
mkdir -p "$OUT/gpu-zoo"
python3 scripts/record_fixtures.py --device cuda --programs fixtures/zoo --out "$OUT/gpu-zoo" 2>&1 | grep -v '^USDT' | tail -60
for t in "$OUT"/gpu-zoo/*.pt.trace.json.gz; do
  printf '%s: ' "$(basename "$t")"
  python3 -m kernlint check "$t" --isolated --statistics -q 2>&1 | tr '\n' ' '
  echo
done | tee "$OUT/gpu-zoo-verdicts.txt"
