#!/usr/bin/env bash
# bench/device/tables.sh — the README's three tables from one device call (issues 9 and 10 ask for
# the matmul, attention and layer tables from one run), over the slim build (carry build-gpu) with
# the matmul harness built here into it (`NVCC_ONLY=1 SANITIZE=0 bench/wgmma/run.sh`, then
# `cp /tmp/wgmma_bench build-gpu/bench/`). Each step starts only while the elapsed time is under
# LIMIT and runs at most its own seconds:
#   1. the layer table: bench/run.sh (BENCH_VARIANTS=kiln,graph,compile-graph, BENCH_PROFILE=0),
#      LAYER_S (190) seconds of cases;
#   2. the attention tables: bench/attn/run.sh (prefill against SDPA's backends, then decode),
#      ATTN_S (170);
#   3. the matmul table: the harness in MODE=table (no sanitizers), MM_S (150), then cuBLAS
#      through torch.matmul (bench/wgmma/torch_mm.py, 60).
# Results under $OUT (packed into all.tgz by common.sh when more than 8 files).
#   LIMIT (570), CASES (bench/run.sh's five layer cases)
DEFAULT_LIMIT=570
. "$(dirname "$0")/common.sh"
git log --oneline -1 2>/dev/null | tee -a "$OUT/gpu.txt"
if left; then
  BENCH_CASES=${CASES:-1b-decode,8b-decode,8b-decode-b32,8b-prefill-2k,8b-prefill-b4-4k} \
    BENCH_VARIANTS=kiln,graph,compile-graph BENCH_PROFILE=0 BENCH_TOTAL=${LAYER_S:-190} \
    timeout $((${LAYER_S:-190} + 40)) bench/run.sh > "$OUT/layer_stdout.txt" 2>&1
  echo "layer table rc=$? $(el) s" | tee -a "$OUT/times.txt"
  sed -n '/---- all cases/,$p' "$OUT/bench.log" 2>/dev/null | head -12
fi
if left; then
  timeout "${ATTN_S:-170}" bash bench/attn/run.sh build "$OUT/attn" > "$OUT/attn_stdout.txt" 2>&1
  echo "attention tables rc=$? $(el) s" | tee -a "$OUT/times.txt"
  cat "$OUT/attn/attn_table.md" "$OUT/attn/decode_table.md" 2>/dev/null
fi
if left && [ -x build/bench/wgmma_bench ]; then
  BIN=build/bench/wgmma_bench MODE=table SANITIZE=0 TIMEOUT=${MM_S:-150} OUT="$OUT/mm" sh bench/wgmma/run.sh > "$OUT/mm_stdout.txt" 2>&1
  echo "matmul table rc=$? $(el) s" | tee -a "$OUT/times.txt"
  timeout 60 python3 bench/wgmma/torch_mm.py "$OUT/mm/torch_results.csv" > /dev/null 2>&1
  echo "torch_mm rc=$? $(el) s" | tee -a "$OUT/times.txt"
  tail -20 "$OUT/mm_stdout.txt"
fi
cat "$OUT/times.txt"
