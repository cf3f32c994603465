#!/bin/sh
# bench/wgmma/run.sh [DIR] — build the wgmma harness with nvcc for sm_90a and run it on the GPU:
# resource report, HGMMA count in the SASS, correctness + the matmul table (`all`), then the
# short correctness pass under compute-sanitizer memcheck and racecheck, and racecheck on a
# build with a planted race (-DKWG_TEST_EARLY_RELEASE: slots released before the wgmma reading
# them has retired). Logs go to $OUT (or /tmp/wgmma_out); bench.csv holds every row.
# DIR holds wgmma_bench.cu, common.cuh, matmul_wgmma.cuh and runtime/rt_tmap.{c,h},
# runtime/rt_err.{c,h}, runtime/rt_launch.h, bench_stub.c (default: this tree's files).
# BIN=path: run that prebuilt harness instead of building (nvcc on a machine without a GPU:
# `NVCC_ONLY=1 bench/wgmma/run.sh` builds /tmp/wgmma_bench and stops); RACE_BIN likewise for
# the planted-race build (none: that check is skipped).
# MODE=check|bench|table|all|small (default all); SANITIZE=0 skips the sanitizer runs.
set -u
here=$(cd "$(dirname "$0")" && pwd)
src=${1:-}
out=${OUT:-/tmp/wgmma_out}
mkdir -p "$out"
nvcc=${NVCC:-/usr/local/cuda/bin/nvcc}
if [ -n "$src" ]; then inc="-I$src"; cu="$src/wgmma_bench.cu $src/runtime/rt_tmap.c $src/runtime/rt_err.c $src/bench_stub.c"
else root="$here/../.."; inc="-I$root/codegen/kernels -I$root"; cu="$here/wgmma_bench.cu $root/runtime/rt_tmap.c $root/runtime/rt_err.c $here/bench_stub.c"; fi
flags="-std=c++17 -O3 -lineinfo -gencode arch=compute_90a,code=sm_90a $inc"
bin=${BIN:-}
race=${RACE_BIN:-}
if [ -z "$bin" ]; then
    bin=/tmp/wgmma_bench
    $nvcc $flags -Xptxas -v -o $bin $cu -lcublas -lnvrtc >"$out/build.log" 2>&1 || { cat "$out/build.log"; exit 1; }
    grep -E "Compiling entry|Used|spill" "$out/build.log" | grep -v -E "fill_random|compare|read_stream" | sed 's/ptxas info *: //' | paste - - - | grep kwg | sed 's/Compiling entry function//; s/for .sm_90a.//; s/bytes stack frame, //'
    if [ "${SANITIZE:-1}" = 1 ]; then race=/tmp/wgmma_race; $nvcc $flags -DKWG_TEST_EARLY_RELEASE -o $race $cu -lcublas -lnvrtc >"$out/build_race.log" 2>&1; fi
    [ "${NVCC_ONLY:-0}" = 1 ] && exit 0
fi
cuobjdump --dump-sass "$bin" > "$out/sass.txt" 2>&1 && echo "HGMMA in SASS: $(grep -c HGMMA "$out/sass.txt"), LDL/STL: $(grep -c -E 'LDL|STL' "$out/sass.txt"), UTMASTG: $(grep -c UTMASTG "$out/sass.txt")"
BENCH_CSV="$out/bench.csv" timeout ${TIMEOUT:-200} "$bin" "${MODE:-all}" > "$out/run.log" 2>&1
echo "exit: $?"
grep -v -E "^ok |^      " "$out/run.log"
echo "$(grep -c '^ok ' "$out/run.log") ok lines"
if [ "${SANITIZE:-1}" = 1 ]; then
    for tool in memcheck racecheck; do
        timeout ${SAN_TIMEOUT:-35} compute-sanitizer --tool $tool "$bin" small >"$out/$tool.log" 2>&1
        echo "$tool rc=$?: $(grep -E 'SUMMARY|passed' "$out/$tool.log" | tr '\n' ' ') kwg hazards: $(grep -A1 'Race reported' "$out/$tool.log" | grep -c kwg)"
    done
    if [ -n "$race" ]; then
        timeout ${SAN_TIMEOUT:-35} compute-sanitizer --tool racecheck "$race" small >"$out/racecheck_planted.log" 2>&1
        echo "planted-race racecheck rc=$?: $(grep -E 'SUMMARY|passed' "$out/racecheck_planted.log" | tr '\n' ' ') kwg hazards: $(grep -A1 'Race reported' "$out/racecheck_planted.log" | grep -c kwg)"
    fi
fi
