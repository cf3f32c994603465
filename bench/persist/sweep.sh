#!/usr/bin/env bash
# bench/persist/sweep.sh — one device call after device.sh: the persistent decode-layer
# prototype's fences and copies in flight (PERSIST_FENCE, INFLIGHT), each build with
# PERSIST_TIMING's milestones, two interleaved rounds, and Kiln's 1B layer profile in the same
# call (carry build-gpu). Results in $OUT/sweep.txt.
DEFAULT_LIMIT=150
. "$(dirname "$0")/../device/common.sh"
R=$OUT/sweep.txt
NV="nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -DPERSIST_TIMING"
B8="-DD=4096 -DHD=128 -DFF=14336"
V1="f0: f1:-DPERSIST_FENCE=1 i2:-DINFLIGHT=2 i3:-DINFLIGHT=3 i4:-DINFLIGHT=4 i6:-DINFLIGHT=6"
{
  for v in $V1; do $NV ${v#*:} -o /tmp/p1_${v%%:*} bench/persist/decode_layer.cu & done
  $NV $B8 -o /tmp/p8_f0 bench/persist/decode_layer.cu & $NV $B8 -DINFLIGHT=4 -o /tmp/p8_i4 bench/persist/decode_layer.cu &
  wait
  echo "build ($(el) s)"
  for r in 1 2; do
    for b in p1_f0 p1_f1 p1_i2 p1_i3 p1_i4 p1_i6 p8_f0 p8_i4; do
      left || break
      echo "== $b round $r ($(el) s)"
      timeout 40 /tmp/$b 1023 200 | grep -vE "^decode_layer|^read bandwidth"
    done
  done
  left && { timeout 60 build/kiln run samples/llama3_1b_layer.kiln --dims B=1,S=1,T=1024 --random --pos=1023 --profile --profile-runs=40 2>&1 | grep -E "^layer|without the profiler|benchmark floor"; echo "kiln 1b rc=$? ($(el) s)"; }
} > "$R" 2>&1
grep -E "^==|persistent layer: median|ring alone|attention done|O input|^  end|^layer|without|check:.*FAILED" "$R"
