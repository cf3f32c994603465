#!/usr/bin/env bash
# bench/device/call_auto.sh — the first call of a session whose kind may bring an H100 or an H200
# (carry build-gpu: the full pack of scripts/gpu_pack.sh plus build-gpu/variants/kiln_nopfo, see
# call_nopfo.sh): on an H200, call_next.sh (the owed H200 numbers and checks); on an H100,
# bench/wgmma/qkv_epi_ncu.sh (ncu of the QKV epilogue), call_nopfo.sh (a comparison within one call,
# valid on either card) and then `ctest -L gpu` with
# what is left of LIMIT (590). Both start with bench/wgmma/kiln_sweep over the 8B GEMMs with and
# without the epilogues the layer fuses (issue 9's target is the fused one against cuBLAS's plain
# product), CSV and log in $OUT.
set -u
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1
export OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
LIMIT=${LIMIT:-590}
t0=$(date +%s)
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
echo "card: $name"
timeout 150 build-gpu/bench/kiln_sweep "$OUT/kiln_sweep_epi.csv" > "$OUT/kiln_sweep_epi.log" 2>&1
echo "kiln_sweep rc=$? $(($(date +%s) - t0)) s"; grep SUMMARY "$OUT/kiln_sweep_epi.log"
if echo "$name" | grep -q H200; then
  LIMIT=$((LIMIT - ($(date +%s) - t0) - 20)) bash bench/device/call_next.sh
else
  OUT="$OUT" bash bench/wgmma/qkv_epi_ncu.sh
  echo "ncu done $(($(date +%s) - t0)) s"
  LIMIT=150 bash bench/device/call_nopfo.sh
  rest=$((LIMIT - ($(date +%s) - t0) - 15))
  [ -e /work/main/CMakeLists.txt ] || ln -sfn "$PWD" /work/main
  [ -e build ] || ln -sfn build-gpu build
  if [ "$rest" -gt 60 ]; then
    (cd build && timeout "$rest" ctest -L gpu --output-on-failure -j1 > "$OUT/ctest_gpu.log" 2>&1; echo "ctest rc=$?" >> "$OUT/ctest_gpu.log")
    tail -25 "$OUT/ctest_gpu.log"
  fi
fi
