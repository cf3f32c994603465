#!/usr/bin/env bash
# bench/persist/sweep2.sh — one device call: each projection of the 1B and 8B layers alone as a
# bulk-copy ring GEMV (decode_layer.cu's gemv_alone, copies in flight 2, 4 or 11), against Kiln's
# per-kernel GEMVs in the same call (their CUPTI times in the layer profile; carry build-gpu).
# Results in $OUT/sweep2.txt.
DEFAULT_LIMIT=120
. "$(dirname "$0")/../device/common.sh"
R=$OUT/sweep2.txt
NV="nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -DPERSIST_TIMING"
B8="-DD=4096 -DHD=128 -DFF=14336"
{
  $NV -DINFLIGHT=2 -o /tmp/g1_i2 bench/persist/decode_layer.cu & $NV -DINFLIGHT=4 -o /tmp/g1_i4 bench/persist/decode_layer.cu &
  $NV -o /tmp/g1_i11 bench/persist/decode_layer.cu & $NV $B8 -DINFLIGHT=4 -o /tmp/g8_i4 bench/persist/decode_layer.cu &
  $NV $B8 -o /tmp/g8_i9 bench/persist/decode_layer.cu &
  wait
  echo "build ($(el) s)"
  for b in g1_i2 g1_i4 g1_i11 g8_i4 g8_i9; do
    left || break
    echo "== $b ($(el) s)"
    timeout 40 /tmp/$b 1023 100 | grep -E "check|^alone|persistent layer: median|^  end"
  done
  for m in 1b 8b; do
    left && { timeout 60 build/kiln run samples/llama3_${m}_layer.kiln --dims B=1,S=1,T=1024 --random --pos=1023 --profile --profile-runs=40 2>&1 | grep -E "^kiln_|^layer|without the profiler" | cut -c1-150; echo "kiln $m rc=$? ($(el) s)"; }
  done
} > "$R" 2>&1
cat "$R"
