#!/usr/bin/env bash
# bench/device/call_next.sh — the first call of a session that gets an H200 after a round measured
# on an H100: everything the round owes in one call, over the slim build (carry build-gpu; no
# variants needed), each step started only while under LIMIT (560):
#   1. the layer table (bench/run.sh: Kiln, PyTorch eager + graph and torch.compile + graph, the
#      five Llama cases) with Kiln's profiles of the 1B, 8B (B = 1 and 32), Gemma-2B (the clusters
#      of 16 now on by default) and Phi-3-mini layers at decode (final_bench.sh's steps);
#   2. test_gpu_matmul's ring configurations (the f32 one fixed since the last run), then under
#      compute-sanitizer memcheck and racecheck (KILN_MM_SMALL);
#   3. `kiln run --check` of Gemma-2B at B = 1 and 2 (the clusters of 16), and the whole-model tests
#      (tests/model/gpu_models.sh without the 2.5 GB checkpoint), if time is left.
# Results under $OUT (packed into all.tgz by common.sh when more than 8 files).
DEFAULT_LIMIT=560
. "$(dirname "$0")/common.sh"
G2B=bench/attn/gemma_2b_layer.kiln
for c in "1 1000" "2 700"; do
  set -- $c
  timeout 60 build/kiln run $G2B --dims B=$1,S=1,T=1024 --pos=$2 --random --check > "$OUT/chk_g2b_b$1.txt" 2>&1
  echo "check g2b B=$1 rc=$? $(grep -E 'check step' "$OUT/chk_g2b_b$1.txt" | tail -1)" | tee -a "$OUT/times.txt"
done
KILN_MM_FILTER=ring timeout 120 build/tests/gpu/test_gpu_matmul > "$OUT/mm_ring.log" 2>&1
echo "test_gpu_matmul ring rc=$? $(el) s: $(grep -E 'passed|failed' "$OUT/mm_ring.log" | tail -1)" | tee -a "$OUT/times.txt"
san=compute-sanitizer; command -v $san >/dev/null || san=/usr/local/cuda/bin/compute-sanitizer
for tool in memcheck racecheck; do
  ( KILN_MM_SMALL=1 KILN_MM_FILTER=ring timeout 150 $san --tool $tool --error-exitcode 9 build/tests/gpu/test_gpu_matmul \
      > "$OUT/san_$tool.txt" 2>&1
    echo "$tool mm-ring rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/san_$tool.txt" | tail -1)" ) \
    >> "$OUT/times.txt" &
done
wait
echo "sanitizers done $(el) s" | tee -a "$OUT/times.txt"
# the table and the profiles: final_bench.sh with what is left (its own clock)
LIMIT=$((LIMIT - $(el) - 60)) OUT="$OUT" bash "$(dirname "$0")/final_bench.sh" > "$OUT/final_bench.log" 2>&1
echo "final_bench rc=$? $(el) s" | tee -a "$OUT/times.txt"
if left; then
  GPU_MODELS_LOAD=0 OUT="$OUT/models" timeout $((LIMIT - $(el))) bash tests/model/gpu_models.sh > "$OUT/models.log" 2>&1
  echo "gpu_models rc=$? $(el) s" | tee -a "$OUT/times.txt"
fi
cat "$OUT/times.txt"
