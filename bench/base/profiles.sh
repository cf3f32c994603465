#!/usr/bin/env bash
# bench/base/profiles.sh — the decode and prefill layer profiles of the Llama samples in one
# call (`kiln run --profile`), for a baseline before a change: kiln ceilings, then
# 1B B=1, 8B B=1, 8B B=32 (1024 keys) and 8B prefill S=2048. Files under $OUT.
#   KILN_BIN (build/kiln), RUNS (40), CASES (all four: 1b,8b,b32,pf)
set -u
cd "$(dirname "$0")/../.." || exit 1
KILN=${KILN_BIN:-build/kiln}
OUT=${OUT:-$(mktemp -d)}
RUNS=${RUNS:-40}
CASES=${CASES:-1b,8b,b32,pf}
export KILN_CACHE_DIR=${KILN_CACHE_DIR:-$(mktemp -d)}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw --format=csv | tee "$OUT/gpu.txt"
timeout 120 "$KILN" ceilings | tee "$OUT/ceilings.txt"
prof() { # label model dims pos
  echo "== $1" | tee -a "$OUT/profiles.txt"
  timeout 90 "$KILN" run "$2" --dims "$3" --random --pos="$4" --profile --profile-runs="$RUNS" \
    --profile-json="$OUT/$1.json" >>"$OUT/profiles.txt" 2>&1
  echo "rc=$?" >>"$OUT/profiles.txt"
}
for c in ${CASES//,/ }; do
  case $c in
    1b) prof 1b-b1 samples/llama3_1b_layer.kiln B=1,S=1,T=1024 1023 ;;
    8b) prof 8b-b1 samples/llama3_8b_layer.kiln B=1,S=1,T=1024 1023 ;;
    b32) prof 8b-b32 samples/llama3_8b_layer.kiln B=32,S=1,T=1024 1023 ;;
    pf) prof 8b-s2048 samples/llama3_8b_layer.kiln B=1,S=2048,T=2048 0 ;;
  esac
done
cat "$OUT/profiles.txt"
