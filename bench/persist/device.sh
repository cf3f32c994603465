#!/usr/bin/env bash
# bench/persist/device.sh — one device call: build decode_layer.cu for the Llama-3.2-1B and
# Llama-3-8B layers (plain, and with PERSIST_TIMING's per-CTA milestones), check each against its
# reference, time it and the ring alone against the read floor, and Kiln's own 1B and 8B layer
# profiles in the same call for comparison (carry build-gpu); compute-sanitizer memcheck and
# synccheck of the 1B while under LIMIT. Results in $OUT/persist.txt.
DEFAULT_LIMIT=150
. "$(dirname "$0")/../device/common.sh"
R=$OUT/persist.txt
NV="nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a"
B8="-DD=4096 -DHD=128 -DFF=14336"
{
  $NV -o /tmp/dl1 bench/persist/decode_layer.cu & $NV -DPERSIST_TIMING -o /tmp/dl1t bench/persist/decode_layer.cu &
  $NV $B8 -o /tmp/dl8 bench/persist/decode_layer.cu & $NV $B8 -DPERSIST_TIMING -o /tmp/dl8t bench/persist/decode_layer.cu &
  wait
  echo "build ($(el) s)"
  for b in dl1 dl1t dl8 dl8t; do
    left && { timeout 60 /tmp/$b 1023 300; echo "$b rc=$? ($(el) s)"; }
  done
  left && { timeout 60 /tmp/dl8t 200 200; echo "dl8t pos 200 rc=$? ($(el) s)"; }
  left && { timeout 60 build/kiln run samples/llama3_1b_layer.kiln --dims B=1,S=1,T=1024 --random --pos=1023 --profile --profile-runs=40 2>&1 | grep -E "^kiln_|^layer|without the profiler|benchmark floor"; echo "kiln 1b rc=$? ($(el) s)"; }
  left && { timeout 60 build/kiln run samples/llama3_8b_layer.kiln --dims B=1,S=1,T=1024 --random --pos=1023 --profile --profile-runs=40 2>&1 | grep -E "^layer|without the profiler|benchmark floor"; echo "kiln 8b rc=$? ($(el) s)"; }
  left && { timeout 100 $san --tool memcheck /tmp/dl1 1023 3 check 2>&1 | tail -3; echo "memcheck rc=$?"; }
  left && { timeout 100 $san --tool synccheck /tmp/dl1 1023 3 check 2>&1 | tail -3; echo "synccheck rc=$?"; }
} > "$R" 2>&1
cat "$R"
