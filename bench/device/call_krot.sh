#!/usr/bin/env bash
# bench/device/call_krot.sh — the W stream's DRAM pattern at skinny M (issue 9's M = 32 target: the
# 8B projections read their weights at 41-83% of bandwidth at B = 32). Every CTA of a skinny
# product walks K from its slice's start, so at any moment the whole GPU reads the same 128-byte
# column of its W rows (rows 8 or 28 KB apart); two changes to the template test whether that
# pattern is what holds the stream back (matmul_wgmma.cuh):
#   KILN_WGMMA_KROT r: each tile's K walk starts at (tile * r) mod its steps, wrapping;
#   KILN_WGMMA_W_TILED: W read box-major (each BN x 64 box 16 KB contiguous), timed only.
# 1. test_gpu_matmul configurations 98-102 of that tree (the rotation on codegen's skinny tiles and splits, the
#    workspace split, a cooperative tile) against cuBLAS and f64; memcheck and racecheck of two;
# 2. KILN_BENCH=2 sweep at M = 32 and 64 on the 8B shapes: codegen's configurations for the batched
#    decode as they are, rotated by 1 and by 7, box-major, box-major rotated; two rounds;
# 3. on an H200 only, the five bench rows (call_next.sh's).
# Results in $OUT. (Neither change paid: both were taken out of the template and the test after this
# call, so the script no longer runs; results: bench/device/results/krot_h100_2026-12-08/.)
DEFAULT_LIMIT=480
. "$(dirname "$0")/common.sh"
clocks_bg
mm_cases '_ck2_o1843|_ck2_o291|sk1_o259|sk2_o1280|128x256_s4_c1_tma128_sk1_o768'
mm_sweep sweep 32,64 8b. '_o35|_o51|sk1_o3|_o291|_o1827|_o4131|_o4387|_o307|_o1843|_o4147|_o4403|_o259|_o1795|_o4099|_o4355'
mm_san '_ck2_o1843|sk1_o259'
CASES=${CASES:-8b-decode-b32,8b-prefill-b4-4k,8b-prefill-2k,1b-decode,8b-decode} \
  VARIANTS=${VARIANTS:-kiln,graph,compile-graph} rows_on_h200
python3 bench/device/clocks_summary.py "$OUT/clocks.csv" > "$OUT/clocks_summary.txt" 2>&1
python3 bench/device/sweep_table.py "$OUT"/sweep_r*.csv | tee "$OUT/sweep_summary.txt"
cat "$OUT/times.txt"
