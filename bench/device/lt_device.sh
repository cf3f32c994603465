#!/usr/bin/env bash
# lt: cuBLASLt as an autotuning candidate (codegen/cg_lt.c, runtime/rt_cublaslt.c) on the H200.
# Run from the tree's root (the device command's `bash bench/device/lt_device.sh`); results under $OUT; < 120 s.
set -u
export OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
export KILN_CACHE_DIR=$(mktemp -d) # one cache for both layer runs: the second reads the first's choices
t0=$(date +%s)
el() { echo $(( $(date +%s) - t0 )); }
# cuBLASLt forced (KILN_FORCE_CUBLASLT, set by the test): bias+GELU, bias+ReLU, residual, batched vs f64, graphs
( timeout 30 build/tests/gpu/test_lt_gpu ) > "$OUT/test_lt_gpu.log" 2>&1
echo "test_lt_gpu rc=$? $(el) s" | tee -a "$OUT/times.txt"
# the Llama-3 8B layer at prefill: every matmul's candidates timed (cuBLASLt for the residual
# projections O and down), then profiled; then the same choices (stored: nothing timed) checked
L="samples/llama3_8b_layer.kiln --dims B=1,S=2048,T=2048 --random --autotune"
( timeout 45 build/kiln run $L --profile --profile-runs=20 ) > "$OUT/run_autotune_profile.log" 2>&1
echo "run --autotune --profile rc=$? $(el) s" | tee -a "$OUT/times.txt"
( timeout 40 build/kiln run $L --check ) > "$OUT/run_autotune_check.log" 2>&1
echo "run --autotune --check rc=$? $(el) s" | tee -a "$OUT/times.txt"
grep -h "autotune:\|cublasLt" "$OUT"/run_*.log | sort | uniq > "$OUT/choices.txt"
ls "$OUT"
