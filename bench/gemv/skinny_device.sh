#!/usr/bin/env bash
# bench/gemv/skinny_device.sh — one GPU call for the tensor-core GEMV of 17..64 rows
# (codegen/kernels/gemv_mma.cuh; issue 9's M = 32 target and the 8B decode B=32 row):
#  1. correctness, in parallel (no timing runs yet): test_gpu_matmul's gemv_mma cases
#     (KILN_MM_FILTER=_nt: f64 / cuBLAS reference, poisoned outputs), tests/gpu/gemv_mma_gpu.sh
#     (whole layers against the interpreter), compute-sanitizer memcheck and racecheck on
#     two gemv_mma configurations (split-K + folded norm + a capped grid; 64 rows, split-K),
#     their CPU-checked cases (KILN_MM_SMALL=1);
#  2. the sweep (KILN_BENCH=2 KILN_SWEEP_ONLY=1, configurations named *mma_*: gemv_mma
#     against the skinny wgmma split-K and cuBLAS, every 8B and 1B projection at M = 17, 32, 64,
#     CUPTI kernel durations);
#  3. the layer row: BENCH_CASES=8b-decode-b32 bench/run.sh (Kiln, PyTorch eager and eager in a
#     CUDA graph; the per-kernel profile).
# Run from the repository root with a built tree (build/). Results in $OUT (default
# /tmp/skinny_out): summary.txt, tests.log, sanitizer.log, sweep.log, sweep.csv, bench.log,
# results.md (at most 8 files). Knobs: T_MM, T_LAYER (0: skip the layer checks), T_SAN,
# SAN_TOOLS, SAN_CFGS, T_SWEEP, T_BENCH (seconds / lists), MM_FILTER, BENCH_VARIANTS.
set -u
out=${OUT:-/tmp/skinny_out}
mkdir -p "$out"
export KILN_SOURCE_DIR=$PWD
t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 )) s]"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader > "$out/summary.txt" 2>&1
work=$(mktemp -d)
san=compute-sanitizer
command -v $san >/dev/null 2>&1 || san=/usr/local/cuda/bin/compute-sanitizer

( KILN_MM_FILTER=${MM_FILTER:-_nt} timeout ${T_MM:-90} build/tests/gpu/test_gpu_matmul > "$work/mm.log" 2>&1; echo "test_gpu_matmul (${MM_FILTER:-_nt}) rc=$?" > "$work/mm.rc" ) &
if [ "${T_LAYER:-100}" -gt 0 ]; then
( KILN_CACHE_DIR=$work/c1 timeout ${T_LAYER:-100} tests/gpu/gemv_mma_gpu.sh build/kiln > "$work/layer.log" 2>&1; echo "gemv_mma_gpu.sh rc=$?" > "$work/layer.rc" ) &
fi
touch "$work/layer.log" "$work/layer.rc"
for tool in ${SAN_TOOLS:-memcheck racecheck}; do
  for f in ${SAN_CFGS:-gmma_bf16_biasres_nt4_mt1_w4_u2_sk2_norm_grid5 gmma_bf16_biasres_nt8_mt1_w8_u2_sk4}; do
    ( KILN_MM_SMALL=1 KILN_MM_FILTER=$f timeout ${T_SAN:-75} $san --tool $tool --error-exitcode 9 \
          build/tests/gpu/test_gpu_matmul > "$work/san_${tool}_$f.log" 2>&1
      echo "$tool $f rc=$?" >> "$work/san.rc" ) &
  done
done
wait
cat "$work/mm.rc" "$work/layer.rc" "$work/san.rc" >> "$out/summary.txt"
echo "correctness done $(el)" >> "$out/summary.txt"
{ echo "==== test_gpu_matmul KILN_MM_FILTER=${MM_FILTER:-_nt}"; grep -vE "^ok " "$work/mm.log"; grep -cE "^ok " "$work/mm.log";
  echo "==== gemv_mma_gpu.sh"; cat "$work/layer.log"; } > "$out/tests.log"
grep -E "^ok " "$work/mm.log" > "$work/mm_ok.txt"
for f in "$work"/san_*.log; do
  echo "==== $(basename "$f")"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|passed, |^FAIL|========= (Invalid|Race|Error|Warn)" "$f" | head -20
done > "$out/sanitizer.log"

KILN_BENCH=2 KILN_SWEEP_ONLY=1 KILN_MM_FILTER=mma_ KILN_BENCH_CSV="$out/sweep.csv" \
    timeout ${T_SWEEP:-80} build/tests/gpu/test_gpu_matmul > "$out/sweep.log" 2>&1
echo "sweep rc=$? $(el)" >> "$out/summary.txt"

BENCH_CASES=8b-decode-b32 BENCH_VARIANTS=${BENCH_VARIANTS:-kiln,eager,graph} BENCH_PROFILE=1 BENCH_TOTAL=${T_BENCH:-150} \
    BENCH_CASE_TIMEOUT=${T_BENCH:-150} OUT=$work/bench timeout $(( ${T_BENCH:-150} + 60 )) bench/run.sh > "$out/bench.log" 2>&1
echo "bench/run.sh rc=$? $(el)" >> "$out/summary.txt"
cp "$work/bench/results.md" "$out/results.md" 2>/dev/null
tar czf "$out/rest.tgz" -C "$work" mm.log mm_ok.txt layer.log bench $(cd "$work" && ls san_*.log) 2>/dev/null
echo "done $(el)" >> "$out/summary.txt"
