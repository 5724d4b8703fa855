#!/usr/bin/env bash
# One device call on the H200: the GPU tests (`-m gpu`; CI runs the others), a cold `kernlint audit` and the
# audit with the regressed variants, and `audit --replay`. Needs .whl/ (msgspec, torch-tb-profiler for the
# device's python) carried along: see README ("GPU fixtures").
set -uo pipefail
source "$(dirname "$0")/device_env.sh"
rm -rf ~/.triton/cache
start=$(date +%s.%N)
python3 -m kernlint.cli audit 2>&1 | grep -v '^USDT' | tee "$OUT/audit_cold.txt"
echo "cold kernlint audit: exit ${PIPESTATUS[0]}, wall $(python3 -c "print(round($(date +%s.%N) - $start, 2))") s" | tee -a "$OUT/audit_cold.txt"
start=$(date +%s.%N)
python3 -m kernlint.cli audit --include-regressed 2>&1 | grep -v '^USDT' | tee "$OUT/audit_regressed.txt"
echo "kernlint audit --include-regressed: exit ${PIPESTATUS[0]}, wall $(python3 -c "print(round($(date +%s.%N) - $start, 2))") s" | tee -a "$OUT/audit_regressed.txt"
python3 -m kernlint.cli audit --replay 2>&1 | tail -3 | tee "$OUT/replay.txt"
python3 -m pytest -q -p no:cacheprovider -m gpu tests 2>&1 | tail -25 | tee "$OUT/pytest.txt"   # the GPU tests; CI runs the rest
