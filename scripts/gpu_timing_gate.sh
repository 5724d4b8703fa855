#!/usr/bin/env bash
# The timing gate's A/A study on the H200 (issue 20): each TARGET recorded in N fresh processes, one after
# another (10 profiled runs each), the traces tarred into $OUT/NAME.tar.gz. The checks run on any machine
# afterwards (bench/timing_gate.py), since checking needs no GPU.
#   bash scripts/gpu_timing_gate.sh NAME=TARGET:N[@STEPS] [NAME=TARGET:N[@STEPS] ...]   (STEPS: 10 by default)
set -uo pipefail
source "$(dirname "$0")/device_env.sh"
budget=${GATE_BUDGET_S:-540}; began=$(date +%s)   # stop recording (and still tar) before the call's limit
for spec in "$@"; do
  name=${spec%%=*}; rest=${spec#*=}; steps=10
  [[ $rest == *@* ]] && { steps=${rest##*@}; rest=${rest%@*}; }
  target=${rest%:*}; n=${rest##*:}
  dir=/tmp/gate/$name; mkdir -p "$dir"
  start=$(date +%s)
  for i in $(seq 1 "$n"); do
    (( $(date +%s) - began > budget )) && { echo "$name: stopped after $((i - 1)) processes (budget)"; break; }
    python3 scripts/record_workload.py "$target" "$dir/p$(printf %02d "$i")" "$steps" cuda >/dev/null 2>"$dir/err.txt" \
      || { echo "$name process $i failed:"; tail -3 "$dir/err.txt"; }
  done
  echo "$name: $n processes in $(( $(date +%s) - start )) s" | tee -a "$OUT/timing.txt"
  tar czf "$OUT/$name.tar.gz" -C /tmp/gate "$name"
done
