#!/usr/bin/env bash
# One device call: cold `kernlint audit` on the GPU, the audit with the regressed variants (traces kept),
# tensor-parallel runs on one GPU, the GPU benchmarks, and the whole test suite with the GPU tests. Needs .whl/ (msgspec, torch-tb-profiler) carried along.
set -uo pipefail
source "$(dirname "$0")/device_env.sh"
rm -rf ~/.triton/cache
start=$(date +%s.%N)
python3 -m kernlint.cli audit 2>&1 | grep -v '^USDT' | tee "$OUT/audit_cold.txt"
rc=${PIPESTATUS[0]}
end=$(date +%s.%N)
echo "cold kernlint audit: exit $rc, wall $(python3 -c "print(round($end - $start, 2))") s" | tee -a "$OUT/audit_cold.txt"
start=$(date +%s.%N)
python3 -m kernlint.cli audit --include-regressed --out "$OUT/audit" 2>&1 | grep -v '^USDT' | tee "$OUT/audit_regressed.txt"
rc=${PIPESTATUS[0]}
end=$(date +%s.%N)
echo "warm kernlint audit --include-regressed: exit $rc, wall $(python3 -c "print(round($end - $start, 2))") s" | tee -a "$OUT/audit_regressed.txt"
(cd "$OUT" && tar cf audit_traces.tar audit && rm -rf audit)
# Tensor parallel on one GPU: NCCL at world size 1 (more GPUs are not lent here), then the clear error for 2.
{ python3 -m kernlint.cli run fp8-tp-mlp --nproc 1 --device cuda --out "$OUT/tp"; echo "exit $?";
  python3 -m kernlint.cli run fp8-tp-mlp-new-ones --nproc 1 --device cuda --out "$OUT/tp"; echo "exit $?";
  python3 -m kernlint.cli run fp8-tp-mlp --nproc 2 --device cuda --out "$OUT/tp"; echo "exit $?";
  python3 -m kernlint.cli run fp8-tp-mlp-rank1-sync --nproc 2 --device cpu --out "$OUT/tp"; echo "exit $?";
} 2>&1 | grep -v '^USDT' | tee "$OUT/tp.txt"
(cd "$OUT" && tar cf tp_traces.tar tp && rm -rf tp)
for b in bench_quant bench_linear bench_dummy_init; do python3 bench/$b.py; done 2>&1 | tee "$OUT/bench.txt"
# The cold audit phase by phase (a fresh Triton cache), then warm: against the 20 s target of issue 12.
python3 bench/bench_audit.py --warm 2>&1 | grep -v '^USDT' | tee "$OUT/bench_audit.txt"
python3 -m pytest -q -p no:cacheprovider tests 2>&1 | tail -15 | tee "$OUT/pytest.txt"
