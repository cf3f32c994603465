#!/bin/sh
# bench/wgmma/run.sh [DIR] — build the wgmma harness with nvcc for sm_90a and run it on the GPU:
# resource report, HGMMA count in the SASS, correctness + timing (`all`), then the short
# correctness pass under compute-sanitizer memcheck and racecheck, and racecheck on a build with
# a planted race (-DKWG_TEST_EARLY_RELEASE: slots released before the wgmma reading them has
# retired), which must report hazards in the kwg kernels. Logs go to $OUT (or /tmp/wgmma_out).
# DIR holds wgmma_bench.cu, common.cuh, matmul_wgmma.cuh and runtime/rt_tmap.{c,h},
# runtime/rt_launch.h (default: this tree's files).
# MODE=check|bench|all|small (default all); SANITIZE=0 skips the sanitizer runs.
set -u
here=$(cd "$(dirname "$0")" && pwd)
src=${1:-}
out=${OUT:-/tmp/wgmma_out}
mkdir -p "$out"
nvcc=${NVCC:-/usr/local/cuda/bin/nvcc}
if [ -n "$src" ]; then inc="-I$src"; cu="$src/wgmma_bench.cu $src/runtime/rt_tmap.c"
else root="$here/../.."; inc="-I$root/codegen/kernels -I$root"; cu="$here/wgmma_bench.cu $root/runtime/rt_tmap.c"; fi
flags="-std=c++17 -O3 -lineinfo -gencode arch=compute_90a,code=sm_90a $inc"
$nvcc $flags -Xptxas -v -o /tmp/wgmma_bench $cu -lcublas >"$out/build.log" 2>&1 || { cat "$out/build.log"; exit 1; }
if [ "${SANITIZE:-1}" = 1 ]; then $nvcc $flags -DKWG_TEST_EARLY_RELEASE -o /tmp/wgmma_race $cu -lcublas >"$out/build_race.log" 2>&1 & fi
grep -E "Compiling entry|Used|spill" "$out/build.log" | grep -v -E "fill_random|compare" | sed 's/ptxas info *: //' | paste - - - | grep kwg | sed 's/Compiling entry function//; s/for .sm_90a.//; s/bytes stack frame, //'
cuobjdump --dump-sass /tmp/wgmma_bench > "$out/sass.txt" 2>&1 && echo "HGMMA in SASS: $(grep -c HGMMA "$out/sass.txt"), LDL/STL: $(grep -c -E 'LDL|STL' "$out/sass.txt")"
BENCH_CSV="$out/bench.csv" timeout 150 /tmp/wgmma_bench "${MODE:-all}" > "$out/run.log" 2>&1
echo "exit: $?"
grep -v "^ok " "$out/run.log"
echo "$(grep -c '^ok ' "$out/run.log") ok lines"
if [ "${SANITIZE:-1}" = 1 ]; then
    wait
    for tool in memcheck racecheck; do
        timeout 35 compute-sanitizer --tool $tool /tmp/wgmma_bench small >"$out/$tool.log" 2>&1
        echo "$tool rc=$?: $(grep -E 'SUMMARY|passed' "$out/$tool.log" | tr '\n' ' ') kwg hazards: $(grep -A1 'Race reported' "$out/$tool.log" | grep -c kwg)"
    done
    timeout 35 compute-sanitizer --tool racecheck /tmp/wgmma_race small >"$out/racecheck_planted.log" 2>&1
    echo "planted-race racecheck rc=$?: $(grep -E 'SUMMARY|passed' "$out/racecheck_planted.log" | tr '\n' ' ') kwg hazards: $(grep -A1 'Race reported' "$out/racecheck_planted.log" | grep -c kwg)"
fi
