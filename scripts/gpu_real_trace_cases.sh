#!/usr/bin/env bash
# One call on a 2-GPU H200 machine (device tool, kind nvidia-h200-x2): records the edge-case traces of
# fixtures/gpu_programs (real torch.profiler traces of situations seen in traces other tools recorded) and
# packs them into $OUT/gpu_edges.tar, laid out as fixtures/traces/gpu-edges/. Needs torch + triton only
# (no kernlint, no wheels). Single-GPU cases run two at a time, one per GPU.
#
#   bash scripts/gpu_real_trace_cases.sh          # there; then, here:
#   tar xf .../gpu_edges.tar -C fixtures/traces/gpu-edges
set -uo pipefail
export PYTHONUNBUFFERED=1
# NVLink multicast off for every process (mandatory on these machines).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
OUT=${OUT:-/tmp/gpu_edges_out}
mkdir -p "$OUT"
W=$(mktemp -d)/gpu-edges
mkdir -p "$W"
P=fixtures/gpu_programs
LOG="$OUT/log.txt"

{
  nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv
  python3 -c 'import torch, triton; print("torch", torch.__version__, "cuda", torch.version.cuda, "triton", triton.__version__, "nccl", torch.cuda.nccl.version(), "gpus", torch.cuda.device_count())'
} 2>&1 | tee "$OUT/env.txt"

run2() {  # CASE ARGS...: 2 ranks, NCCL, one process per GPU
  local name=$1; shift
  local t0=$SECONDS
  timeout 120 python3 -m torch.distributed.run --standalone --nproc-per-node 2 "$@" --out "$W/$name" 2>&1 \
    | grep -v -e '^USDT' -e 'Setting OMP_NUM_THREADS' -e '^\*\*\*\*'
  local rc=${PIPESTATUS[0]}
  echo "== $name: exit $rc, $((SECONDS - t0)) s"
}

run1() {  # GPU CASE-DIR ARGS...: one process on one GPU
  local gpu=$1 dir=$2; shift 2
  CUDA_VISIBLE_DEVICES=$gpu timeout 150 python3 "$@" --out "$W/$dir" 2>&1 | grep -v '^USDT'
  local rc=${PIPESTATUS[0]}
  echo "== $* (GPU $gpu): exit $rc"
  return "$rc"
}

{
  run2 window-edges $P/window_edges.py --mode schedule
  run2 window-edges-plain $P/window_edges.py --mode plain
  run2 data-dependent-dispatch $P/data_dependent_dispatch.py
  run2 syncs-unbalanced $P/d2h_syncs.py --variant unbalanced
  run2 syncs-balanced $P/d2h_syncs.py --variant balanced

  run1 0 coarse-ranges $P/coarse_clean.py & run1 1 coarse-ranges $P/coarse_new_ones.py & wait
  run1 0 coarse-ranges $P/coarse_clean.py --no-stack & run1 1 coarse-ranges $P/coarse_new_ones.py --no-stack & wait
  run1 0 . $P/vllm_like_graph.py > "$OUT/vllm.txt" 2>&1 & vpid=$!
  run1 1 . $P/d2h_syncs.py --cuda-only & wait $!
  if wait $vpid; then
    cat "$OUT/vllm.txt"
  else
    tail -30 "$OUT/vllm.txt"
    echo "== vllm-like-graph: capture inside the window failed; capturing before the window instead"
    run1 0 . $P/vllm_like_graph.py --capture-before-window
  fi

  # The same unbalanced / balanced pairs with every cpu_op dropped: a sync is then only a
  # cudaMemcpyAsync + Memcpy DtoH (+ cudaStreamSynchronize), as in traces recorded without ops.
  python3 scripts/record_edge_cases.py strip-ops "$W/syncs-unbalanced" "$W/syncs-unbalanced-noops"
  python3 scripts/record_edge_cases.py strip-ops "$W/syncs-balanced" "$W/syncs-balanced-noops"
} 2>&1 | tee "$LOG"

python3 scripts/record_edge_cases.py analyze "$W" --json "$OUT/analysis.json" --brief 2>&1 | tee "$OUT/brief.txt"
(cd "$W" && find . -type f | sort && du -ab . | tail -1) | tee -a "$OUT/brief.txt"
tar -cf "$OUT/gpu_edges.tar" -C "$W" .
# Every case prints "== ...: exit N"; the call fails when one of them failed.
status=0
grep -q -E '^== .*exit [1-9]' "$LOG" && status=1
echo "gpu_real_trace_cases status=$status"
exit $status
