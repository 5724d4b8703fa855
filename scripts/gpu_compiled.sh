#!/usr/bin/env bash
# One device call for issue 36: the compiled-decoder workloads (torch.compile default and reduce-overhead,
# fixed and new_ones) in `kernlint audit --include-regressed` (traces kept), their verdicts, kernel counts per
# trace, and the GPU tests of the compiled paths. Needs .whl/ carried along (README, "GPU fixtures").
set -uo pipefail
source "$(dirname "$0")/device_env.sh"
start=$(date +%s.%N)
python3 -m kernlint.cli audit --include-regressed --out "$OUT/audit" 2>&1 | grep -v '^USDT' | tee "$OUT/audit_regressed.txt"
echo "kernlint audit --include-regressed: exit ${PIPESTATUS[0]}, wall $(python3 -c "print(round($(date +%s.%N) - $start, 2))") s" | tee -a "$OUT/audit_regressed.txt"
mkdir -p "$OUT/compiled"
for w in fp8-decoder-compiled fp8-decoder-compiled-new-ones fp8-decoder-compiled-graphs fp8-decoder-compiled-graphs-new-ones fp8-decoder-graph fp8-decoder-graph-new-ones; do
  t=$(find "$OUT/audit/$w" -name '*.pt.trace.json.gz' | head -1); [ -n "$t" ] || { echo "$w: no trace"; continue; }
  cp "$t" "$OUT/compiled/$w.pt.trace.json.gz"; cp "${t%.pt.trace.json.gz}.run.json" "$OUT/compiled/$w.run.json" 2>/dev/null
  python3 - "$t" "$w" <<'PY' | tee -a "$OUT/kernels.txt"
import gzip, json, sys, collections
d = json.load(gzip.open(sys.argv[1]))
ev = d["traceEvents"]
k = [e["name"] for e in ev if e.get("cat") == "kernel"]
g = sum(1 for e in ev if e.get("cat") in ("cuda_runtime", "cuda_driver") and "GraphLaunch" in e.get("name", ""))
c = collections.Counter(n.split("<")[0][:70] for n in k)
print(sys.argv[2], "kernels", len(k), "graph launches", g, dict(c.most_common(12)))
PY
  python3 -m kernlint.cli check "$t" --select KL001,KL401,KL491,KL302 --format concise 2>&1 | tail -4 | sed "s|^|$w: |" | tee -a "$OUT/kernels.txt"
done
(cd "$OUT" && tar czf compiled.tar.gz compiled && rm -rf compiled audit)
python3 -m kernlint.cli run fp8-decoder-compiled-graphs-new-ones --repeat 3 --out "$OUT/r3" 2>&1 | tail -3 | tee "$OUT/repeat3.txt"; t=$(find "$OUT/r3" -name "*.pt.trace.json.gz" | head -1); cp "$t" "$OUT/compiled-graphs-new-ones-3steps.pt.trace.json.gz"; rm -rf "$OUT/r3"
