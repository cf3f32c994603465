#!/usr/bin/env bash
# bench/device/call_resregs.sh — the first GPU run of the later rounds' residual in registers
# (matmul_wgmma.cuh KILN_WGMMA_RES_REGS; codegen knob KILN_CG_WG_RES_REGS, off on main), one call
# over the slim build (carry build-gpu, with build-gpu/variants/kiln_resregs and kiln_sweep_resregs
# from `bash bench/attn/push_variants.sh build resregs "-DKILN_CG_WG_RES_REGS=1"`, copied and
# stripped). On an H200, bench/run.sh's rows come first (ROWS=0 skips them; CASES and VARIANTS as
# in call_last.sh). Then:
#   1. side by side (common.sh epi_checks): test_gpu_matmul's configurations with it
#      (KILN_MM_FILTER=_o192: the cooperative 128x256 and 256x128 tiles, f16 whose later rounds stay
#      with TMA), the same under compute-sanitizer memcheck and racecheck (the small cases), and
#      `kiln run --check` of the variant where codegen applies it;
#   2. kiln_sweep O+res and down+res at M = 2048 and 16384, main against kiln_sweep_resregs, two rounds;
#   3. the 8B prefill profiles (S = 2048; B=4 S=4096), main against kiln_resregs, two rounds;
#   4. main's decode profiles (1B and 8B, B = 1) and `ctest -L gpu -E test_gpu_matmul` (common.sh
#      gpu_ctest) in the time left;
#   5. ncu of three plain QKV candidates (why the ping-pong tile loses), in the time left.
# The clocks and power every 100 ms beside it all (common.sh clocks_bg; clocks_summary.py per profile):
# the prefill profiles run power-limited (README, "Why the 8B layer's instance is slower").
# Each step only while under LIMIT (560). Results in $OUT.
DEFAULT_LIMIT=560
. "$(dirname "$0")/common.sh"
clocks_bg
rows_on_h200
V=build/variants
epi_checks _o192 $V/kiln_resregs
KILN_SWEEP_M=2048 sweeps sweep.txt O+res,down+res build/bench/kiln_sweep $V/kiln_sweep_resregs
KILN_SWEEP_M=16384 sweeps sweep16k.txt O+res,down+res build/bench/kiln_sweep $V/kiln_sweep_resregs
prefill8b build/kiln $V/kiln_resregs
grep -E "^== |_k[36]_matmul" "$OUT/profiles.txt" | cut -c1-150
prof build/kiln 1b-dec samples/llama3_1b_layer.kiln B=1,S=1,T=1024 1
prof build/kiln 8b-dec samples/llama3_8b_layer.kiln B=1,S=1,T=1024 1
grep -E "^== kiln [18]b-dec|attention|^layer|^bubbles" "$OUT/profiles.txt" | tail -12 | cut -c1-160
gpu_ctest
# 5. in the time still left: ncu of the plain QKV product's cooperative 128x256 (kiln_sweep candidate
#    0), ping-pong 128x128 s5 (1) and cooperative 256x128 (4) at M = 2048: why the ping-pong tile runs
#    at 0.80 of cuBLAS (docs/MATMUL.md, "What the QKV + RoPE gap is made of")
ncu_qkv "0 1 4" "Duration|Compute \(SM\) Throughput|Issue Slots Busy|Executed Ipc A|Shared Memory|Stall" \
  --section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats --section MemoryWorkloadAnalysis
python3 bench/device/clocks_summary.py "$OUT/clocks.csv" "$OUT/profiles.txt" | tee "$OUT/clocks_summary.txt"
cat "$OUT/times.txt"
