#!/usr/bin/env bash
# One GPU session on the H200 (device tool): environment, reference tests (GPU included), GPU fixture
# traces, benchmarks. Everything that must come back is written under $OUT (at most 8 files).
# Usage there:  bash scripts/gpu_session.sh      (python3 is the image's; kernlint is not installed)
set -o pipefail
export PYTHONUNBUFFERED=1
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
OUT="${OUT:-/tmp/kernlint_gpu_out}"
mkdir -p "$OUT"
status=0

{
  nvidia-smi -L
  python3 -c 'import torch, triton; print("torch", torch.__version__, "cuda", torch.version.cuda, "triton", triton.__version__, "|", torch.cuda.get_device_name(), torch.cuda.get_device_properties(0).multi_processor_count, "SMs")'
} 2>&1 | tee "$OUT/env.txt" || status=1

echo "=== pytest tests/test_reference*.py"
python3 -m pytest -q -p no:cacheprovider tests/test_reference*.py 2>&1 | tee "$OUT/pytest.txt" || status=1

echo "=== record GPU fixture traces"
rm -f fixtures/traces/gpu/*.pt.trace.json.gz
python3 scripts/record_fixtures.py --device cuda --out fixtures/traces/gpu 2>&1 | tee "$OUT/record.txt" || status=1
tar -cf "$OUT/gpu_traces.tar" -C fixtures/traces/gpu . || status=1

echo "=== benchmarks"
for bench in bench/bench_dummy_init.py bench/bench_quant.py bench/bench_linear.py; do
  echo "=== $bench"
  python3 "$bench" || status=1
  echo
done 2>&1 | tee "$OUT/bench.txt" || status=1

echo "gpu_session status=$status"
exit $status
