#!/usr/bin/env bash
# bench/device/call_restma.sh — the first GPU run of the residual by TMA (matmul_wgmma.cuh
# KILN_WGMMA_RES_TMA; codegen knob KILN_CG_WG_RES_TMA, off on main then, on since 2026-12-07; its
# results: bench/device/results/restma_h200_2026-12-07.txt), one call over the slim build
# (carry build-gpu, with build-gpu/variants/kiln_restma and kiln_sweep_restma from
# `bash bench/attn/push_variants.sh build restma "-DKILN_CG_WG_RES_TMA=1"`, copied and stripped):
#   1. side by side (common.sh epi_checks): test_gpu_matmul's configurations with it
#      (KILN_MM_FILTER=_o64: the cooperative 128x256 tile, ping-pong 128x128, f16), the same under
#      compute-sanitizer memcheck and racecheck, and `kiln run --check` of the variant;
#   2. kiln_sweep O+res and down+res at M = 2048, main against kiln_sweep_restma, two rounds;
#   3. the 8B prefill profiles (S = 2048; B=4 S=4096), main against kiln_restma, two rounds.
# On an H200, bench/run.sh's rows come first (ROWS=0 skips them; CASES and VARIANTS as in
# call_last.sh). Each step only while under LIMIT (540). Results in $OUT.
DEFAULT_LIMIT=540
. "$(dirname "$0")/common.sh"
rows_on_h200
V=build/variants
epi_checks _o64 $V/kiln_restma
KILN_SWEEP_M=2048 sweeps sweep.txt O+res,down+res build/bench/kiln_sweep $V/kiln_sweep_restma
prefill8b build/kiln $V/kiln_restma
grep -E "^== |_k[36]_matmul" "$OUT/profiles.txt" | cut -c1-150
cat "$OUT/times.txt"
