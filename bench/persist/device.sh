#!/usr/bin/env bash
# bench/persist/device.sh — one device call: build decode_layer.cu for the Llama-3.2-1B and
# Llama-3-8B layers (and ring sizes for the 1B), check each against its reference at two
# positions, time them against the read floor, compute-sanitizer memcheck and synccheck on the
# 1B, and Kiln's own layer profiles of the same shapes in the same call for comparison
# (carry build-gpu). Results under $OUT/persist.txt.
DEFAULT_LIMIT=400
. "$(dirname "$0")/../device/common.sh"
R=$OUT/persist.txt
NV="nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a"
B8="-DD=4096 -DHD=128 -DFF=14336"
{
  $NV -o /tmp/dl1 bench/persist/decode_layer.cu && $NV $B8 -o /tmp/dl8 bench/persist/decode_layer.cu &&
    $NV -DNSLOT=6 -o /tmp/dl1_s6 bench/persist/decode_layer.cu && $NV -DNSLOT=8 -o /tmp/dl1_s8 bench/persist/decode_layer.cu
  echo "build rc=$? ($(el) s)"
  for b in dl1 dl8; do
    timeout 60 /tmp/$b 200 50; echo "rc=$?"
  done
  for r in 1 2; do
    for b in dl1 dl1_s6 dl1_s8 dl8; do
      left && { timeout 60 /tmp/$b 1023 400; echo "rc=$? ($(el) s)"; }
    done
    left && { timeout 60 build/kiln run samples/llama3_1b_layer.kiln --dims B=1,S=1,T=1024 --random --pos=1023 --profile --profile-runs=40 2>&1 | grep -E "^kiln_|^layer|^bubbles|without the profiler|^graph|benchmark floor"; echo "kiln 1b rc=$? ($(el) s)"; }
    left && { timeout 60 build/kiln run samples/llama3_8b_layer.kiln --dims B=1,S=1,T=1024 --random --pos=1023 --profile --profile-runs=40 2>&1 | grep -E "^layer|^bubbles|without the profiler|^graph|benchmark floor"; echo "kiln 8b rc=$? ($(el) s)"; }
  done
  left && { timeout 120 $san --tool memcheck /tmp/dl1 1023 3 check 2>&1 | tail -4; echo "memcheck rc=$?"; }
  left && { timeout 120 $san --tool synccheck /tmp/dl1 1023 3 check 2>&1 | tail -4; echo "synccheck rc=$?"; }
} > "$R" 2>&1
cat "$R"
