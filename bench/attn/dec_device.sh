#!/usr/bin/env bash
# bench/attn/dec_device.sh — one GPU call for issue 10's B=1 decode attention and issue 11's B=1
# decode rows, results to $OUT (summary.txt plus r.tgz):
#   1. the in-layer profiles of the 1B and 8B layers at B=1 over 1024 cached keys
#      (`kiln run samples/llama3_{1b,8b}_layer.kiln --dims B=1,S=1,T=1024 --random --pos=1000
#      --profile --profile-runs=40`), for build/kiln and for each binary under build/variants/
#      (the same tree built with other template or codegen defaults: the sweep);
#   2. the attention tests against the f64 reference (tests/gpu/test_gpu_attention), the decode
#      tests (graph replay against eager launch, PDL on against off, folds on and off:
#      tests/gpu/test_decode_gpu), the GEMV tests (test_gpu_matmul, KILN_MM_FILTER=gemv_);
#   3. compute-sanitizer memcheck and racecheck on the cluster decode cases and the GEMV cases,
#      memcheck on two decode steps of the 1B layer (the kernels back to back under PDL);
#   4. the 1B and 8B decode rows of bench/run.sh (Kiln and PyTorch eager + CUDA graph), before 3
#      when at least 35 s are left after SRSV (default 40) s kept for the sanitizers.
# DEADLINE (s, default 150): each step's timeout is its cap or what is left minus the reserve of
# the steps after it. PHASES (default "prof tests san bench") picks steps.
set -u
OUT=${OUT:-/tmp/dec-out}; R=$OUT/r; mkdir -p "$R"
export KILN_CACHE_DIR=${KILN_CACHE_DIR:-$PWD/build/kcache}
san=compute-sanitizer; command -v $san >/dev/null || san=/usr/local/cuda/bin/compute-sanitizer
t0=$(date +%s); DL=${DEADLINE:-150}; PH=${PHASES:-prof tests san bench}
S=$OUT/summary.txt
tl() { local cap=$1 rsv=$2 left; left=$((DL - ($(date +%s) - t0) - rsv)); [ $left -lt $cap ] && cap=$left; [ $cap -lt 1 ] && cap=1; echo $cap; }
el() { echo "[$(($(date +%s) - t0)) s]"; }
has() { case " $PH " in *" $1 "*) return 0;; esac; return 1; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader > "$S" 2>&1
prof() { # BIN NAME LAYER
    timeout $(tl 12 ${PRSV:-110}) "$1" run samples/llama3_$3_layer.kiln --dims B=1,S=1,T=1024 --random --pos=1000 \
        --profile --profile-runs=40 > "$R/prof_$2_$3.txt" 2>&1
    echo "== $2 $3 rc=$? $(el)" >> "$S"
    grep -E "attention|matmul|bubble|layer|total" "$R/prof_$2_$3.txt" | head -9 >> "$S"
}
if has prof; then
    for m in 1b 8b; do prof build/kiln main $m; done
    for v in build/variants/kiln_*; do [ -x "$v" ] || continue
        for m in 1b 8b; do prof "$v" "$(basename "$v")" $m; done
    done
fi
if has tests; then
    timeout $(tl 30 0) build/tests/gpu/test_gpu_attention > "$R/attention.log" 2>&1
    echo "test_gpu_attention rc=$? $(el)" >> "$S"; grep -E "^FAIL|passed, .* failed" "$R/attention.log" | tail -8 >> "$S"
    timeout $(tl 15 0) build/tests/gpu/test_decode_gpu > "$R/decode.log" 2>&1
    echo "test_decode_gpu rc=$? $(el)" >> "$S"; grep -E "FAIL|passed|failed" "$R/decode.log" | tail -6 >> "$S"
    KILN_MM_FILTER=gemv_ timeout $(tl 12 0) build/tests/gpu/test_gpu_matmul > "$R/gemv.log" 2>&1
    echo "test_gpu_matmul gemv_ rc=$? $(el)" >> "$S"; grep -E "^FAIL|passed, .* failed" "$R/gemv.log" | tail -4 >> "$S"
fi
if has bench && [ $(tl 999 ${SRSV:-40}) -ge 35 ]; then
    b=$(tl 50 ${SRSV:-40})
    (OUT=$R/bench BENCH_CASES=1b-decode,8b-decode BENCH_VARIANTS=${BENCH_VARIANTS:-kiln,graph} BENCH_PROFILE=0 \
        BENCH_TOTAL=$((b - 3)) BENCH_CASE_TIMEOUT=$(( (b - 3) / 2 )) timeout $b bash bench/run.sh) > "$R/bench.log" 2>&1
    echo "bench rc=$? $(el)" >> "$S"; grep -E "decode|floor" "$R/bench/results.md" 2>/dev/null | head -6 >> "$S"
fi
if has san; then
    KILN_CASES=${SAN_CASES:-46-61} timeout $(tl 15 0) $san --tool memcheck --error-exitcode 3 \
        build/tests/gpu/test_gpu_attention > "$R/san_att_memcheck.log" 2>&1
    echo "sanitizer memcheck attention rc=$? $(el)" >> "$S"
    grep -E "ERROR SUMMARY|passed, .* failed" "$R/san_att_memcheck.log" | tail -2 >> "$S"
    KILN_CASES=${RACE_CASES:-46-50} timeout $(tl 10 0) $san --tool racecheck --error-exitcode 3 \
        build/tests/gpu/test_gpu_attention > "$R/san_att_racecheck.log" 2>&1
    echo "sanitizer racecheck attention rc=$? $(el)" >> "$S"
    grep -E "ERROR SUMMARY|RACECHECK SUMMARY|passed, .* failed" "$R/san_att_racecheck.log" | tail -2 >> "$S"
    for tool in memcheck racecheck; do
        KILN_MM_FILTER=${SAN_FILTER:-_grid} timeout $(tl 8 0) $san --tool $tool --error-exitcode 3 \
            build/tests/gpu/test_gpu_matmul > "$R/san_gemv_$tool.log" 2>&1
        echo "sanitizer $tool gemv rc=$? $(el)" >> "$S"
        grep -E "ERROR SUMMARY|RACECHECK SUMMARY|passed, .* failed" "$R/san_gemv_$tool.log" | tail -2 >> "$S"
    done
    timeout $(tl 12 0) $san --tool memcheck --error-exitcode 3 build/kiln run samples/llama3_1b_layer.kiln \
        --dims B=1,S=1,T=1024 --random --pos=1000 --steps 2 > "$R/san_layer.log" 2>&1
    echo "memcheck 1b layer rc=$? $(el)" >> "$S"; grep -E "ERROR SUMMARY" "$R/san_layer.log" | tail -2 >> "$S"
fi
tar czf "$OUT/r.tgz" -C "$OUT" r
echo "done $(el)" >> "$S"
