#!/usr/bin/env bash
# bench/gemv/b32_device.sh — one GPU call for issue 9's M = 32 projections and the 8B decode B=32
# layer row:
#  1. correctness, in parallel (no timing yet): test_gpu_matmul's Hopper configurations
#     (KILN_MM_FILTER=wgmma: f64 / cuBLAS reference, poisoned outputs and workspaces; the skinny
#     64x128 / 64x64 tiles with the residual through the TMA store, split-K, M = 17..100, N and K off
#     the tiles), tests/gpu/qkv_epilogue_gpu.sh (layers against the interpreter, batched decode on the
#     skinny QKV TMA epilogue), compute-sanitizer memcheck and racecheck on two skinny configurations
#     (KILN_MM_SMALL=1) and on a batched-decode layer;
#  2. the sweep at M = 32 (KILN_BENCH=2 KILN_SWEEP_ONLY=1 KILN_SWEEP_M=32, the wgmma configurations
#     and cuBLAS, every 8B and 1B projection, CUPTI kernel durations);
#  3. the 8B layer at B=32: `kiln run --profile` with the heuristic's choices, then with --autotune
#     (the candidates timed, the fastest used), the 1B layer at B=32;
#  4. the bench row: BENCH_CASES=8b-decode-b32 BENCH_VARIANTS=${BENCH_VARIANTS:-kiln,graph} bench/run.sh.
# Run from the repository root with a built tree (build/). Results in $OUT (default /tmp/b32_out):
# summary.txt, tests.log, sanitizer.log, sweep.csv, profile.txt, bench.log, results.md, rest.tgz.
# Knobs (seconds): T_MM, T_QKV, T_SAN, T_SWEEP, T_PROF, T_BENCH; PHASES (default "checks sweep prof bench").
set -u
out=${OUT:-/tmp/b32_out}
mkdir -p "$out"
export KILN_SOURCE_DIR=$PWD
t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 )) s]"; }
phases=${PHASES:-checks sweep prof bench}
has() { case " $phases " in *" $1 "*) return 0 ;; esac; return 1; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader > "$out/summary.txt" 2>&1
work=$(mktemp -d)
san=compute-sanitizer
command -v $san >/dev/null 2>&1 || san=/usr/local/cuda/bin/compute-sanitizer
L8D='samples/llama3_8b_layer.kiln -D D=2048 -D H=16 -D KV=4 -D F=512'

if has checks; then
  ( KILN_MM_FILTER=wgmma timeout ${T_MM:-110} build/tests/gpu/test_gpu_matmul > "$work/mm.log" 2>&1
    echo "test_gpu_matmul (wgmma) rc=$?" > "$work/mm.rc" ) &
  ( KILN_CACHE_DIR=$work/c1 timeout ${T_QKV:-110} tests/gpu/qkv_epilogue_gpu.sh build/kiln > "$work/qkv.log" 2>&1
    echo "qkv_epilogue_gpu.sh rc=$?" > "$work/qkv.rc" ) &
  for tool in memcheck racecheck; do
    for f in wgmma_bf16_nk_biasres_64x64_s12_pp_c1_tma64_sk2 wgmma_bf16_nk_biasres_64x128_s8_pp_c1_tma128_sk4; do
      ( KILN_MM_SMALL=1 KILN_MM_FILTER=$f timeout ${T_SAN:-90} $san --tool $tool --error-exitcode 9 \
            build/tests/gpu/test_gpu_matmul > "$work/san_${tool}_$f.log" 2>&1
        echo "$tool $f rc=$?" >> "$work/san.rc" ) &
    done
    ( KILN_CACHE_DIR=$work/c2 timeout ${T_SAN:-90} $san --tool $tool --error-exitcode 9 \
          build/kiln run $L8D --dims B=32,S=1,T=64 --random --pos=40 --check > "$work/san_${tool}_layer.log" 2>&1
      echo "$tool layer B=32 D=2048 rc=$?" >> "$work/san.rc" ) &
  done
  wait
  cat "$work/mm.rc" "$work/qkv.rc" "$work/san.rc" >> "$out/summary.txt"
  echo "correctness done $(el)" >> "$out/summary.txt"
  { echo "==== test_gpu_matmul KILN_MM_FILTER=wgmma"; grep -vE "^ok " "$work/mm.log"; grep -cE "^ok " "$work/mm.log";
    echo "==== qkv_epilogue_gpu.sh"; cat "$work/qkv.log"; } > "$out/tests.log"
  for f in "$work"/san_*.log; do
    echo "==== $(basename "$f")"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|passed, |^FAIL|========= (Invalid|Race|Error|Warn)|check step|error" "$f" | head -20
  done > "$out/sanitizer.log"
fi

if has sweep; then
  KILN_BENCH=2 KILN_SWEEP_ONLY=1 KILN_SWEEP_M=32 KILN_MM_FILTER=wgmma_ KILN_BENCH_CSV="$out/sweep.csv" \
      timeout ${T_SWEEP:-60} build/tests/gpu/test_gpu_matmul > "$work/sweep.log" 2>&1
  echo "sweep rc=$? $(el)" >> "$out/summary.txt"
fi

if has prof; then
  {
    echo "==== 8B B=32 (heuristic)"
    KILN_CACHE_DIR=$work/c3 timeout ${T_PROF:-60} build/kiln run samples/llama3_8b_layer.kiln --dims B=32,S=1,T=1024 \
        --random --pos=1000 --profile 2>&1; echo "rc=$? $(el)"
    echo "==== 8B B=32 (--autotune)"
    KILN_CACHE_DIR=$work/c3 timeout ${T_PROF:-60} build/kiln run samples/llama3_8b_layer.kiln --dims B=32,S=1,T=1024 \
        --random --pos=1000 --autotune --profile 2>&1; echo "rc=$? $(el)"
    echo "==== 8B B=32 plan after tuning"
    KILN_CACHE_DIR=$work/c3 build/kiln compile samples/llama3_8b_layer.kiln -D B=32 -D S=1 -D T=1024 --emit=plan 2>&1 | sed -n 1,20p
    echo "==== 1B B=32 (heuristic)"
    KILN_CACHE_DIR=$work/c3 timeout ${T_PROF:-60} build/kiln run samples/llama3_1b_layer.kiln --dims B=32,S=1,T=1024 \
        --random --pos=1000 --profile 2>&1; echo "rc=$? $(el)"
  } > "$out/profile.txt" 2>&1
  echo "profiles done $(el)" >> "$out/summary.txt"
fi

if has bench; then
  BENCH_CASES=8b-decode-b32 BENCH_VARIANTS=${BENCH_VARIANTS:-kiln,graph} BENCH_PROFILE=0 BENCH_TOTAL=${T_BENCH:-90} \
      BENCH_CASE_TIMEOUT=${T_BENCH:-90} OUT=$work/bench timeout $(( ${T_BENCH:-90} + 30 )) bench/run.sh > "$out/bench.log" 2>&1
  echo "bench/run.sh rc=$? $(el)" >> "$out/summary.txt"
  cp "$work/bench/results.md" "$out/results.md" 2>/dev/null
fi
tar czf "$out/rest.tgz" -C "$work" $(cd "$work" && ls *.log 2>/dev/null) bench 2>/dev/null
echo "done $(el)" >> "$out/summary.txt"
