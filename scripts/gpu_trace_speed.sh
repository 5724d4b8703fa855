#!/usr/bin/env bash
# One device call for bench/trace_speed: a decode loop of 32 layers plus the FP8 linear recorded on the H200
# with stacks, shapes and memory to about 150 MB of JSON, grown to about 1 GB (its steps repeated with
# shifted times and ids), then `kernlint check` against json.loads on both. Brings back the 150 MB trace
# (gzipped) so that the same file can be measured on other machines.
set -uo pipefail
source "$(dirname "$0")/device_env.sh"
W=/tmp/trace-speed; rm -rf $W; mkdir -p $W
python3 bench/trace_speed/generate.py record --size 150MB --out $W/decode-150MB.pt.trace.json.gz
python3 bench/trace_speed/generate.py grow $W/decode-150MB.pt.trace.json.gz --size 1GB --out $W/decode-1GB.pt.trace.json
python3 bench/trace_speed/run.py $W/decode-150MB.pt.trace.json.gz $W/decode-1GB.pt.trace.json --repeat 2 \
  | tee "$OUT/trace-speed-h200-host.txt"
cp $W/decode-150MB.pt.trace.json.gz "$OUT/"
