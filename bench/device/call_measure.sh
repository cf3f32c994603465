#!/usr/bin/env bash
# bench/device/call_measure.sh — the targets of issues 9-11 on the defaults, one call over the slim
# build (carry build-gpu), each step only while under LIMIT (540):
#   1. bench/run.sh's five rows with VARIANTS (kiln,graph,compile-graph);
#   2. Kiln's profiles of the 1B and 8B layers at decode (B = 1 and 32; decode attention's time
#      inside the graph, the bubbles);
#   3. kiln_sweep at M = 2048 (every 8B GEMM with and without its epilogue; cuBLAS in the same
#      process), then at M = 16384 if time is left;
#   4. `ctest -L gpu -E test_gpu_matmul` (six at a time) in the time left.
# Results in $OUT.
DEFAULT_LIMIT=540
. "$(dirname "$0")/common.sh"
bench_rows "${CASES:-1b-decode,8b-decode,8b-decode-b32,8b-prefill-2k,8b-prefill-b4-4k}" "${VARIANTS:-kiln,graph,compile-graph}"
prof build/kiln 1b-dec samples/llama3_1b_layer.kiln B=1,S=1,T=1024 1
prof build/kiln 8b-dec samples/llama3_8b_layer.kiln B=1,S=1,T=1024 1
prof build/kiln 8b-b32 samples/llama3_8b_layer.kiln B=32,S=1,T=1024 1
grep -E "^== |attention|^layer|^bubbles" "$OUT/profiles.txt" | cut -c1-160
for m in 2048 16384; do
  left || break
  KILN_SWEEP_M=$m timeout 120 build/bench/kiln_sweep > "$OUT/sweep_$m.txt" 2>&1
  echo "kiln_sweep M=$m rc=$? $(el) s" | tee -a "$OUT/times.txt"
  grep -E "SUMMARY" "$OUT/sweep_$m.txt"
done
gpu_ctest
cat "$OUT/times.txt"
