#!/usr/bin/env bash
# One device call: every regression-zoo workload (fixtures/zoo/*.py) recorded on the H200 into $OUT/gpu-zoo/,
# then all of them checked at once with the shipped rules; a verdict line per trace for the case files.
set -uo pipefail
source "$(dirname "$0")/device_env.sh"
mkdir -p "$OUT/gpu-zoo"
python3 scripts/record_fixtures.py --device cuda --programs fixtures/zoo --out "$OUT/gpu-zoo" 2>&1 | grep -v '^USDT' | tail -60
python3 -m kernlint check "$OUT/gpu-zoo" --isolated --format json -o "$OUT/gpu-zoo-verdicts.json"
python3 - "$OUT/gpu-zoo-verdicts.json" <<'PY'
import json, sys
data = json.load(open(sys.argv[1]))
for trace in data["traces"]:
    failed = [r["rule"] for r in trace["rules"] if r["status"] == "failed"]
    print(f"{trace['path'].rsplit('/', 1)[-1]}: failed {failed or 'none'}")
PY
