#!/usr/bin/env bash
# One device call for issue 37: records fixtures/gpu_programs/costly_patterns.py on the H200 (the regressed
# and fixed traces of the new cost rules) into $OUT/gpu_costly.tar (laid out as fixtures/traces/gpu-costly/),
# prints what each trace ran (kernel names by device time), then runs the GPU tests of the compiled paths.
# Needs .whl/ carried along (README, "GPU fixtures").
#
#   bash scripts/gpu_costly.sh      # there; then, here:
#   tar xf .../gpu_costly.tar -C fixtures/traces/gpu-costly
set -uo pipefail
source "$(dirname "$0")/device_env.sh"
W=$(mktemp -d)
python3 fixtures/gpu_programs/costly_patterns.py --out "$W" 2>&1 | grep -v '^USDT' | tee "$OUT/costly.txt"
(cd "$W" && tar cf "$OUT/gpu_costly.tar" ./*.gz)
for t in "$W"/*.gz; do
  python3 - "$t" <<'PY' | tee -a "$OUT/costly.txt"
import collections, gzip, json, sys
ev = json.load(gzip.open(sys.argv[1]))["traceEvents"]
k = collections.Counter()
for e in ev:
    if e.get("cat") == "kernel":
        k[e["name"].split("(")[0][:90]] += e.get("dur", 0)
total = sum(k.values()) or 1
print(sys.argv[1].rsplit("/", 1)[-1], f"kernel time {total:.0f} us:",
      "; ".join(f"{n} {100 * d / total:.0f}%" for n, d in k.most_common(6)))
PY
done
python3 -m pytest -q -p no:cacheprovider tests/test_run_and_audit.py -k "compiled" -x 2>&1 | tail -15 | tee "$OUT/compiled_tests.txt"
