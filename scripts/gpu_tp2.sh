#!/usr/bin/env bash
# One call on a 2-GPU H200 machine (nvidia-h200-x2): the tensor-parallel workloads on 2 ranks with NCCL,
# per-rank traces kept, and the distributed tests. Needs .whl/ (msgspec, torch-tb-profiler) carried along.
set -uo pipefail
export PYTHONUNBUFFERED=1
# NVLink multicast off for every process (kernlint's launcher sets these for the ranks too).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
{ nvidia-smi -L; python3 -c "import torch; print('torch', torch.__version__, 'GPUs', torch.cuda.device_count())"; } 2>&1 | tee "$OUT/gpu.txt"
for t in fp8-tp-mlp fp8-tp-mlp-rank1-sync fp8-tp-mlp-new-ones fp8-tp-mlp-every-rank-syncs; do
  start=$(date +%s.%N)
  python3 -m kernlint.cli run "$t" --nproc 2 --device cuda --out "$OUT/tp2"
  echo "== $t: exit $?, wall $(python3 -c "print(round($(date +%s.%N) - $start, 1))") s"
done 2>&1 | grep -v '^USDT' | tee "$OUT/tp2.txt"
python3 -m kernlint.cli check "$OUT/tp2/fp8-tp-mlp-rank1-sync" --format json -o "$OUT/tp2_rank1_sync.json"
(cd "$OUT" && tar cf tp2_traces.tar tp2 && rm -rf tp2)
python3 -m pytest -q -p no:cacheprovider tests/test_distributed.py 2>&1 | tail -5 | tee "$OUT/pytest.txt"
