#!/usr/bin/env bash
# bench/gemv/dgemv_device.sh — one GPU call for issue 11's GEMV work (M <= 16): the GEMV tests and
# the standalone sweep in one process (tests/gpu/test_gpu_matmul, KILN_BENCH=2: CUPTI durations,
# weights rotated from HBM; the column-block pipelining off/on, widths 6..16, unroll, CTAs per
# SM), the decode tests (PDL on/off, graph/eager, folds on/off), `kiln run --check` of the real
# 1B and 8B layers at decode (the QKV epilogue with 12 columns, CTAs walking several blocks,
# PDL off, rules off), the 1B and 8B decode rows of bench/run.sh with their profiles, then
# compute-sanitizer memcheck and racecheck on the GEMV test configurations.
# Run from the repository root with a built tree. Results under $OUT (default /tmp/dgemv_out).
# KILN_CACHE_DIR: a kernel cache to start from (default: kcache/ when present).
set -u
out=${OUT:-/tmp/dgemv_out}
mkdir -p "$out/more"
export KILN_CACHE_DIR=${KILN_CACHE_DIR:-$PWD/kcache}
export KILN_SOURCE_DIR=$PWD
K=build/kiln
t0=$(date +%s)
el() { echo "[$(($(date +%s) - t0)) s]"; }
# DEADLINE (seconds from the start, default 150): each step's timeout is its cap or what is left
# of the deadline minus the reserve of the steps after it, whichever is less (at least 1 s)
DL=${DEADLINE:-150}
tl() { local cap=$1 rsv=$2 left; left=$((DL - ($(date +%s) - t0) - rsv)); [ $left -lt $cap ] && cap=$left; [ $cap -lt 1 ] && cap=1; echo $cap; }
S="$out/summary.txt"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader > "$S" 2>&1
# 0. first (the skipped-under-30-s rule of run.sh needs its time): the two B=1 decode rows with PyTorch (eager + CUDA graph; torch.compile costs ~40 s a case),
# then their profiles (bench/run.sh: kiln run --dims B=1,S=1,T=1024 --pos=1023 --profile)
(OUT=$out/more/bench BENCH_CASES=1b-decode,8b-decode BENCH_VARIANTS=${BENCH_VARIANTS:-kiln,graph} BENCH_PROFILE=1 \
    BENCH_TOTAL=$(($(tl 68 40) - 10)) BENCH_CASE_TIMEOUT=30 timeout $(tl 68 40) bash bench/run.sh) \
    > "$out/bench.log" 2>&1
echo "bench rc=$? $(el)" >> "$S"
# 1. GEMV tests + sweep (one process)
KILN_MM_FILTER=gemv_ KILN_BENCH=2 KILN_BENCH_CSV="$out/sweep.csv" timeout $(tl ${SWEEP_TIMEOUT:-20} 20) build/tests/gpu/test_gpu_matmul \
    > "$out/more/matmul.log" 2>&1
echo "test_gpu_matmul (+ sweep) rc=$? $(el)" >> "$S"
grep -E "^FAIL" "$out/more/matmul.log" | head -20 >> "$S"
grep -E "passed, .* failed" "$out/more/matmul.log" | tail -1 >> "$S"
# 2. decode tests and checks against the interpreter
timeout $(tl ${DECODE_TIMEOUT:-7} 13) build/tests/gpu/test_decode_gpu > "$out/more/decode.log" 2>&1
echo "test_decode_gpu rc=$? $(el)" >> "$S"
tail -2 "$out/more/decode.log" >> "$S"
chk() { # NAME args...
    local n=$1; shift
    timeout $(tl ${CHECK_TIMEOUT:-4} $CRSV) $K run "$@" --random --check >> "$out/more/checks.log" 2>&1
    local rc=$?
    echo "check $n rc=$rc $(el)" >> "$S"
    grep -E "^check step" "$out/more/checks.log" | tail -1 >> "$S"
}
CRSV=9 chk 1b-b1 samples/llama3_1b_layer.kiln --dims B=1,S=1,T=64 --steps 2
[ "$DL" -ge 140 ] && CRSV=5 chk 1b-b2-nopdl samples/llama3_1b_layer.kiln --dims B=2,S=1,T=64 --steps 2 --no-pdl
CRSV=5 chk 8b-b1 samples/llama3_8b_layer.kiln --dims B=1,S=1,T=64 --steps 2
(cd "$out" && tar czf more.tgz more && rm -rf more)
# 4. sanitizers on the GEMV configurations whose CTAs walk several column blocks (pipelined or not)
for tool in memcheck racecheck; do
    KILN_MM_FILTER=${SAN_FILTER:-_grid} timeout $(tl ${SAN_TIMEOUT:-8} 0) compute-sanitizer --tool $tool \
        --error-exitcode 3 build/tests/gpu/test_gpu_matmul > "$out/san_$tool.log" 2>&1
    echo "compute-sanitizer $tool rc=$? $(el)" >> "$S"
    grep -E "ERROR SUMMARY|passed, .* failed|RACECHECK SUMMARY" "$out/san_$tool.log" | tail -2 >> "$S"
done
ls "$out" >> "$S"
