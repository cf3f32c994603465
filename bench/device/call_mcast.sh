#!/usr/bin/env bash
# bench/device/call_mcast.sh — clusters of two CTAs along M with the W box multicast, under the
# TMA-store epilogue (test_gpu_matmul configurations 94-97 and the new bench configurations): ncu
# (call_resregs.sh, 2026-12-07) put the ping-pong 128x128 tile's L2 throughput at 82% of peak
# against 57-61% for the cooperative tiles; multicast halves the W bytes each CTA reads from L2.
# first the graph upload's checks (3. below), then
# 1. the configurations' test cases (against cuBLAS and f64), memcheck/racecheck on the small ones last;
# 2. KILN_BENCH=1: O (2048x4096x4096), QKV (2048 and 16384 x 6144 x 4096) against cuBLAS, each
#    tile alone and in clusters of two, two rounds;
# 3. the graph upload (runtime/rt_graph.c, cudaGraphUpload before a graph's first launch): the GPU
#    tests of the graph path (test_api_gpu, test_decode_gpu, test_fault_gpu, test_rt_*) and the 1B
#    and 8B decode profiles (their bubble rows), two rounds interleaved with build-gpu/variants/kiln_noupload
#    (runtime/rt_graph.c compiled with -DKILN_RT_GRAPH_UPLOAD=0, linked as bench/attn/push_variants.sh
#    links its variants). Results in $OUT. (The upload gained nothing and was taken out after this call;
#    results: bench/device/results/mcast_h100_2026-12-08.txt.)
DEFAULT_LIMIT=260
. "$(dirname "$0")/common.sh"
left && (cd build && timeout $((LIMIT - $(el) + 60)) ctest -R "test_api_gpu|test_decode_gpu|test_fault_gpu|test_rt_" \
  --output-on-failure -j4 > "$OUT/ctest_graph.log" 2>&1; echo "ctest rc=$?" >> "$OUT/ctest_graph.log")
echo "ctest $(el) s: $(grep -E 'tests passed|tests failed' "$OUT/ctest_graph.log" | tail -1)" | tee -a "$OUT/times.txt"
for r in 1 2; do
  for b in build/kiln build/variants/kiln_noupload; do
    prof $b 1b-dec samples/llama3_1b_layer.kiln B=1,S=1,T=1024 $r
    prof $b 8b-dec samples/llama3_8b_layer.kiln B=1,S=1,T=1024 $r
  done
done
grep -E "^== |^layer|^bubbles" "$OUT/profiles.txt" 2>/dev/null
F='_c2_tma|store_128x256_s4_c1_tma128_sk1|store_128x128_s5_pp_c1_tma128_sk1|store_256x128_s4_c1_tma64_sk1'
KILN_MM_FILTER=$F timeout 100 build/tests/gpu/test_gpu_matmul > "$OUT/mm_cases.log" 2>&1
echo "cases rc=$? $(el) s: $(grep -E 'passed|failed' "$OUT/mm_cases.log" | tail -1)" | tee -a "$OUT/times.txt"
grep -E "FAIL" "$OUT/mm_cases.log" | head -10
for r in 1 2; do
  left || break
  KILN_BENCH=1 KILN_BENCH_ONLY=1 timeout 120 build/tests/gpu/test_gpu_matmul > /tmp/b.txt 2>&1
  { echo "== bench round $r rc=$? ($(el) s)"; sed -n '/^bench M=2048/,$p' /tmp/b.txt | grep -vE "^(ok|FAIL|[0-9]+ passed)"; } | tee -a "$OUT/bench.txt"
done
for tool in memcheck racecheck; do
  left || break
  KILN_MM_SMALL=1 KILN_MM_FILTER=_c2_tma timeout 70 $san --tool $tool --error-exitcode 9 build/tests/gpu/test_gpu_matmul \
    > "$OUT/san_$tool.txt" 2>&1
  echo "$tool rc=$? $(el) s: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/san_$tool.txt" | tail -1)" | tee -a "$OUT/times.txt"
done
cat "$OUT/times.txt"
