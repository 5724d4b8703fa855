#!/usr/bin/env bash
# One device call for the rule library: every regression-zoo workload (fixtures/zoo) and every decode-step
# variant x recording style (scripts/decode_traces.py) recorded on the H200, a large clean decode trace with
# the FP8 linear, all checked with the shipped rules (a verdict line per trace), then packed into one
# archive ($OUT/rule-library.tar: the device tool brings back few files).
set -uo pipefail
source "$(dirname "$0")/device_env.sh"
W=/tmp/rl; rm -rf $W; mkdir -p $W/gpu-zoo $W/gpu-decode $W/gpu-decode-large
python3 scripts/record_fixtures.py --device cuda --programs fixtures/zoo --out $W/gpu-zoo 2>&1 | grep -v '^USDT' | tail -2
python3 scripts/decode_traces.py --device cuda --out $W/gpu-decode 2>&1 | tail -1
python3 scripts/decode_traces.py --device cuda --out $W/gpu-decode-large --variants clean --styles steps range \
  --layers 32 --steps 8 --fp8 2>&1 | tail -2
for d in gpu-zoo gpu-decode gpu-decode-large; do
  python3 -m kernlint check $W/$d --isolated --format json -o $W/$d-verdicts.json >/dev/null 2>&1
  python3 scripts/verdict_lines.py $W/$d-verdicts.json
done
tar -C $W -cf "$OUT/rule-library.tar" .
