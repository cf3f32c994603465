#!/usr/bin/env bash
# bench/gemv/device.sh — one GPU call for the decode GEMV work (issues 9 and 11): the decode
# profiles of the Llama-3.2-1B and Llama-3-8B layers at B=1 (norm folds on and off) and B=32,
# the GEMV sweep (tests/gpu/test_gpu_matmul with KILN_BENCH=2: every projection of both
# layers at M = 1 and 32, CUPTI kernel durations, CSV), then the GPU tests of the folds
# (test_gpu_matmul's cases, test_decode_gpu, test_api_gpu), each under its own timeout.
# Run from the repository root with a built tree (build/). Results go to $OUT (default
# /tmp/gemv_out): profiles.txt, sweep.csv, sweep.log, tests.log, summary.txt.
# KILN_CACHE_DIR: a kernel cache to start from (default: kcache/ when present).
set -u
out=${OUT:-/tmp/gemv_out}
mkdir -p "$out"
K=build/kiln
export KILN_CACHE_DIR=${KILN_CACHE_DIR:-$PWD/kcache}
export KILN_SOURCE_DIR=$PWD
t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 )) s]"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader > "$out/summary.txt" 2>&1
prof() { # NAME SAMPLE B extra...
    local name=$1 f=$2 b=$3; shift 3
    echo "==== $name: $f B=$b $* $(el)" >> "$out/profiles.txt"
    timeout ${PROF_TIMEOUT:-14} $K run "samples/$f.kiln" --dims B=$b,S=1,T=1024 --random --pos=1000 --profile \
        --profile-runs=${PROF_RUNS:-40} "$@" >> "$out/profiles.txt" 2>&1
    echo "rc=$?" >> "$out/profiles.txt"
}
prof 1b-b1 llama3_1b_layer 1
prof 1b-b1-nofold llama3_1b_layer 1 --disable=norm-gain,norm-gemv
prof 8b-b1 llama3_8b_layer 1
prof 8b-b1-nofold llama3_8b_layer 1 --disable=norm-gain,norm-gemv
prof 8b-b32 llama3_8b_layer 32
prof 1b-b32 llama3_1b_layer 32
echo "profiles done $(el)" >> "$out/summary.txt"
KILN_BENCH=2 KILN_BENCH_CSV="$out/sweep.csv" timeout ${SWEEP_TIMEOUT:-40} build/tests/gpu/test_gpu_matmul > "$out/sweep.log" 2>&1
echo "test_gpu_matmul + sweep rc=$? $(el)" >> "$out/summary.txt"
timeout ${DECODE_TIMEOUT:-15} build/tests/gpu/test_decode_gpu > "$out/tests.log" 2>&1
echo "test_decode_gpu rc=$? $(el)" >> "$out/summary.txt"
timeout ${API_TIMEOUT:-20} build/tests/api/test_api_gpu >> "$out/tests.log" 2>&1
echo "test_api_gpu rc=$? $(el)" >> "$out/summary.txt"
grep -E "^(FAIL|ok .*norm|ok .*grid)" "$out/sweep.log" | head -80 >> "$out/summary.txt"
grep -E "passed|failed" "$out/sweep.log" | tail -2 >> "$out/summary.txt"
