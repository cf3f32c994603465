#!/usr/bin/env bash
# bench/device/call_last.sh — a short closing call over the slim build (carry build-gpu): on an
# H200, bench/run.sh's rows first (CASES, default the two 8B prefill rows, 1B and 8B decode, with
# VARIANTS kiln,compile-graph), then test_gpu_matmul in the time left; on another card the test
# first. Each step only while under LIMIT (380). Results in $OUT.
DEFAULT_LIMIT=380
. "$(dirname "$0")/common.sh"
rows() { bench_rows "${CASES:-8b-prefill-b4-4k,8b-prefill-2k,1b-decode,8b-decode}" "${VARIANTS:-kiln,compile-graph}"; }
mm() {
  left || return
  timeout $((LIMIT - $(el))) build/tests/gpu/test_gpu_matmul > "$OUT/mm.log" 2>&1
  echo "test_gpu_matmul rc=$? $(el) s: $(grep -E 'passed|failed' "$OUT/mm.log" | tail -1)" | tee -a "$OUT/times.txt"
}
if grep -q H200 "$OUT/gpu.txt"; then rows; mm; else mm; rows; fi
cat "$OUT/times.txt"
