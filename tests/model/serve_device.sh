#!/usr/bin/env bash
# tests/model/serve_device.sh — the slot table on the GPU machine in one call
# (over a carried build/ with its kernel cache build/kcache): the whole-model
# tests (gpu_models.sh without the load benchmark: test_model_gpu's slot
# sections included), compute-sanitizer memcheck of the slot-table section
# (server joins/leaves, decode with a table, padding rows), and the attention
# and decode GPU tests. Results under $OUT.
set -u
out=${OUT:-/tmp/out}
mkdir -p "$out"
export KILN_CACHE_DIR=$PWD/build/kcache
t0=$(date +%s)
GPU_MODELS_LOAD=0 timeout 100 bash tests/model/gpu_models.sh > "$out/gpu_models.txt" 2>&1
echo "gpu_models rc=$? ($(( $(date +%s) - t0 )) s)" | tee "$out/summary.txt"
grep -E "passed|failed|CHECK|tokens equal|slots|server|padding" "$out/llama.txt" "$out/qwen2.txt" 2>/dev/null | tail -40 >> "$out/summary.txt"
t1=$(date +%s)
KILN_MODEL_SLOTS_ONLY=1 timeout 45 compute-sanitizer --tool memcheck --leak-check full --error-exitcode 9 \
  build/tests/model/test_model_gpu samples/models/llama3_2_1b.kiln build/hf/llama build/hf/llama.json \
  NL=2 V=512 D=256 H=4 KV=2 F=512 > "$out/memcheck.txt" 2>&1
echo "memcheck (slot table section) rc=$? ($(( $(date +%s) - t1 )) s)" | tee -a "$out/summary.txt"
tail -6 "$out/memcheck.txt" >> "$out/summary.txt"
t2=$(date +%s)
timeout 40 ctest --test-dir build -R "^(test_gpu_attention|test_gpu_attention_wgmma|test_decode_gpu)$" -j3 \
  --output-on-failure > "$out/ctest.txt" 2>&1
echo "ctest attention/decode rc=$? ($(( $(date +%s) - t2 )) s)" | tee -a "$out/summary.txt"
grep -E "Passed|Failed|tests passed|Timeout|\*\*\*" "$out/ctest.txt" >> "$out/summary.txt"
cat "$out/summary.txt"
