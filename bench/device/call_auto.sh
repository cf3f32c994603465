#!/usr/bin/env bash
# bench/device/call_auto.sh — one call whose kind may bring an H100 or an H200 (carry build-gpu: the
# full pack of scripts/gpu_pack.sh, plus in build-gpu/variants/ kiln_base, kiln_sweep_base
# (bench/wgmma/qkv_epi_device.sh)):
#   1. bench/wgmma/qkv_epi_device.sh (the QKV epilogue against the build before it; 330 s);
#   2. on an H200, call_next.sh (the owed H200 numbers and checks) with what is left of LIMIT
#      (590); on an H100, `ctest -L gpu` with what is left.
set -u
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1
export OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
LIMIT=${LIMIT:-590}
t0=$(date +%s)
el0() { echo $(($(date +%s) - t0)); }
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
echo "card: $name"
OUT="$OUT/qkv" LIMIT=330 bash bench/wgmma/qkv_epi_device.sh
echo "qkv_epi done $(el0) s"
if echo "$name" | grep -q H200; then
  OUT="$OUT/next" LIMIT=$((LIMIT - $(el0) - 20)) bash bench/device/call_next.sh
else
  rest=$((LIMIT - $(el0) - 15))
  if [ "$rest" -gt 60 ]; then
    (cd build && timeout "$rest" ctest -L gpu --output-on-failure -j1 > "$OUT/ctest_gpu.log" 2>&1; echo "ctest rc=$?" >> "$OUT/ctest_gpu.log")
    tail -25 "$OUT/ctest_gpu.log"
  fi
fi
