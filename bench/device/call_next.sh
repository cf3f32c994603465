#!/usr/bin/env bash
# bench/device/call_next.sh — what is left to measure after the 2026-12-08 H100 calls, one call over the
# slim build (carry build-gpu, `GPU_PACK_MIN=0 bash scripts/gpu_pack.sh build build-gpu`):
#   1. on an H200, bench/run.sh's five rows (CASES, VARIANTS as in common.sh; the B=32 row against
#      PyTorch eager in a CUDA graph, the others against torch.compile + CUDA graphs): the B=32 target
#      was last measured on 2026-12-06 and misses by 1%;
#   2. ncu of the plain QKV product's cooperative 128x256 (kiln_sweep candidate 0) and ping-pong
#      128x128 s5 (1) at M = 2048: the tensor pipe's active cycles and the consumers' stall reasons
#      by source line, to say whether the ping-pong tile loses at its turn barrier (docs/MATMUL.md,
#      "What the QKV + RoPE gap is made of": neither shared memory nor the L2 explains it).
# Each step only while under LIMIT (560). Results in $OUT.
DEFAULT_LIMIT=560
. "$(dirname "$0")/common.sh"
clocks_bg
CASES=${CASES:-8b-decode-b32,8b-prefill-b4-4k,8b-prefill-2k,1b-decode,8b-decode} \
  VARIANTS=${VARIANTS:-kiln,graph,compile-graph} rows_on_h200
ncu_qkv "0 1" "Duration|gmma_cycles_active|stalled_barrier|Compute \(SM\) Throughput" \
  --section SpeedOfLight --section WarpStateStats --section SourceCounters --import-source yes \
  --metrics sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active,smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio
python3 bench/device/clocks_summary.py "$OUT/clocks.csv" "$OUT/profiles.txt" > "$OUT/clocks_summary.txt" 2>&1
cat "$OUT/times.txt"
