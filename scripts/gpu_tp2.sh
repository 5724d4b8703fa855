#!/usr/bin/env bash
# One call on a 2-GPU H200 machine (nvidia-h200-x2): the tensor-parallel workloads on 2 ranks with NCCL,
# per-rank traces kept, and the distributed tests. Needs .whl/ (msgspec, torch-tb-profiler) carried along.
set -uo pipefail
source "$(dirname "$0")/device_env.sh"
for t in fp8-tp-mlp fp8-tp-mlp-rank1-sync fp8-tp-mlp-new-ones fp8-tp-mlp-every-rank-syncs; do
  start=$(date +%s.%N)
  python3 -m kernlint.cli run "$t" --nproc 2 --device cuda --out "$OUT/tp2"
  echo "== $t: exit $?, wall $(python3 -c "print(round($(date +%s.%N) - $start, 1))") s"
done 2>&1 | grep -v '^USDT' | tee "$OUT/tp2.txt"
python3 -m kernlint.cli check "$OUT/tp2/fp8-tp-mlp-rank1-sync" --format json -o "$OUT/tp2_rank1_sync.json"
(cd "$OUT" && tar cf tp2_traces.tar tp2 && rm -rf tp2)
python3 -m pytest -q -p no:cacheprovider tests/test_distributed.py 2>&1 | tail -5 | tee "$OUT/pytest.txt"
