#!/usr/bin/env bash
# bench/attn/dattn2_sweep.sh — the second GPU call of issue 10's decode clusters, results to $OUT:
# the cluster cases against the f64 reference with the decode table's rows, the sweep of kernel
# shapes and the milestone timings (KILN_DEC_SWEEP=1), the 8B, 1B and Gemma-2B layers' profiles
# at B=1 over 1024 cached keys, `kiln run --check` of two decode runs (clusters of 16 through the
# runtime), memcheck on four cluster cases.
set -u; OUT=${OUT:-/tmp/o}; R=$OUT/r; mkdir -p "$R"; t0=$(date +%s)
export KILN_CACHE_DIR=$PWD/build/kcache
stamp() { echo "$1 $(( $(date +%s) - t0 )) s" >> "$OUT/times.txt"; }
summary() {
  { cat "$OUT/times.txt"; grep -E "FAIL|passed|rc=|failed" "$OUT/sweep.log" | head; for f in "$R"/profile_*.txt; do echo "== $f"
    grep -E "attention|of floor|rc=" "$f" | head -4; done
    echo "== check"; grep -E "check step|rc=|rror" "$R/check.log" | tail -6; echo "== memcheck"; tail -3 "$R/memcheck.log"
  } > "$OUT/summary.txt" 2>&1; tar czf "$OUT/r.tgz" -C "$OUT" r; }
KILN_CASES=${CL_CASES:-46-61} KILN_BENCH=1 KILN_DEC_SWEEP=1 timeout ${TEST_S:-20} build/tests/gpu/test_gpu_attention \
  > "$OUT/sweep.log" 2>&1; echo "rc=$?" >> "$OUT/sweep.log"; stamp test; summary
layer() { [ -f samples/$1.kiln ] && echo samples/$1.kiln || echo bench/attn/$1.kiln; }
prof() { timeout 9 build/kiln run $(layer $1) --random --dims B=1,S=1,T=1024 --pos=1023 --profile > "$R/profile_$1.txt" 2>&1
  echo "rc=$?" >> "$R/profile_$1.txt"; stamp "profile $1"; summary; }
prof llama3_8b_layer
timeout 4 build/kiln run samples/llama3_1b_layer.kiln -D D=256 -D F=512 --dims B=2,S=1,T=8 --random --steps 6 --check \
  > "$R/check.log" 2>&1; echo "rc=$?" >> "$R/check.log"
timeout 5 build/kiln run bench/attn/gemma_2b_layer.kiln -D D=256 -D F=512 --dims B=2,S=1,T=1100 --random --pos=1040 \
  --steps 3 --check >> "$R/check.log" 2>&1; echo "rc=$?" >> "$R/check.log"; stamp check; summary
prof llama3_1b_layer
KILN_CASES=${SAN_CASES:-46-49} timeout ${SAN_S:-8} compute-sanitizer --tool memcheck build/tests/gpu/test_gpu_attention \
  > "$R/memcheck.log" 2>&1; echo "rc=$?" >> "$R/memcheck.log"; stamp memcheck; summary
prof gemma_2b_layer
