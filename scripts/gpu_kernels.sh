#!/usr/bin/env bash
# One device call on the H200 for kernlint/reference: its GPU tests, then the kernel benchmarks, into $OUT
# (tests.txt, bench.txt). Each step has its own time limit, so a slow one cannot eat the others' time.
# Usage: scripts/gpu_kernels.sh [tests] [eager] [fused] [grouped] [linear] [quant] [dummy] [smallm] [sweep]
# (default: all but the sweep)
# Needs .whl/ carried along (see scripts/device_env.sh).
set -uo pipefail
source "$(dirname "$0")/device_env.sh"
steps=${*:-tests eager fused grouped linear quant smallm}
step() {  # step NAME SECONDS CMD...: runs CMD under a time limit, appending its output to bench.txt
  local name=$1 limit=$2; shift 2
  echo "=== $name ($(date +%T))" | tee -a "$OUT/bench.txt"
  timeout "$limit" "$@" 2>&1 | grep -v '^USDT' | tee -a "$OUT/bench.txt"
  echo "=== $name: exit ${PIPESTATUS[0]}" | tee -a "$OUT/bench.txt"
}
for s in $steps; do
  case $s in
    tests)
      # Only this package's tests; no conftest or kernlint pytest plugin (other packages' code stays out).
      timeout "${TESTS_LIMIT:-190}" python3 -m pytest -v -p no:cacheprovider -p no:kernlint --noconftest -m gpu \
        tests/test_reference_quant.py tests/test_reference_linear.py tests/test_reference_dummy_init.py \
        > "$OUT/tests.txt" 2>&1
      echo "=== tests: exit $?"; grep -E "PASSED|FAILED|ERROR" "$OUT/tests.txt" | cut -c1-150 | grep -v PASSED | head -40
      tail -3 "$OUT/tests.txt" ;;
    eager) step bench_eager "${EAGER_LIMIT:-100}" python3 bench/bench_eager.py ;;
    fused) step bench_fused_gemm "${FUSED_LIMIT:-75}" python3 bench/bench_fused_gemm.py ;;
    grouped) step bench_grouped_init "${GROUPED_LIMIT:-60}" python3 bench/bench_grouped_init.py ;;
    linear) step bench_linear "${LINEAR_LIMIT:-60}" python3 bench/bench_linear.py ;;
    quant) step bench_quant "${QUANT_LIMIT:-40}" python3 bench/bench_quant.py ;;
    dummy) step bench_dummy_init "${DUMMY_LIMIT:-90}" python3 bench/bench_dummy_init.py ;;
    smallm) step bench_small_m_gemm "${SMALLM_LIMIT:-240}" python3 bench/bench_small_m_gemm.py ;;
    sweep) step small_m_sweep "${SWEEP_LIMIT:-280}" python3 bench/bench_small_m_gemm.py --sweep ;;
  esac
done
