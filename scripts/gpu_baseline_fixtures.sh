#!/usr/bin/env bash
# One device call: the H200 traces that tests/test_baseline_h200.py replays. Three separate processes of
# the unchanged fp8-block-linear workload, 10 profiled runs each, copied flat into $OUT/traces/ (checked
# there against fixtures/baselines/h200-fp8-block-linear.json, recorded in an earlier device session).
set -uo pipefail
source "$(dirname "$0")/device_env.sh"
mkdir -p "$OUT/traces" /tmp/runs
for i in 1 2 3; do
  python3 -m kernlint run fp8-block-linear --repeat 10 --out /tmp/runs --isolated -q \
    --baseline fixtures/baselines/h200-fp8-block-linear.json; echo "run $i: exit $?"
done
n=0; for t in /tmp/runs/fp8-block-linear/*/*.pt.trace.json.gz; do n=$((n+1)); cp "$t" "$OUT/traces/fp8-block-linear-run$n.pt.trace.json.gz"; done
ls -la "$OUT/traces"
