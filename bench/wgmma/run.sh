#!/bin/sh
# bench/wgmma/run.sh [DIR] — build the wgmma harness with nvcc for sm_90a and run it on the GPU:
# resource report, HGMMA count in the SASS, correctness + timing (`all`), then the short
# correctness pass under compute-sanitizer memcheck and racecheck. Logs go to $OUT (or /tmp).
# DIR holds wgmma_bench.cu, common.cuh and matmul_wgmma.cuh (default: this tree's files).
set -u
here=$(cd "$(dirname "$0")" && pwd)
src=${1:-}
out=${OUT:-/tmp/wgmma_out}
mkdir -p "$out"
nvcc=${NVCC:-/usr/local/cuda/bin/nvcc}
if [ -n "$src" ]; then inc="-I$src"; cu="$src/wgmma_bench.cu"; else inc="-I$here/../../codegen/kernels"; cu="$here/wgmma_bench.cu"; fi
$nvcc -std=c++17 -O3 -lineinfo -gencode arch=compute_90a,code=sm_90a $inc -Xptxas -v -o /tmp/wgmma_bench "$cu" -lcublas \
    >"$out/build.log" 2>&1 || { cat "$out/build.log"; exit 1; }
grep -E "Compiling entry|registers|spill" "$out/build.log" | grep -B1 -A0 "Used" | grep -v "^--" | sed 's/ptxas info *: //' | paste - - | grep -v -E "fill_random|compare" | sed 's/Compiling entry function//'
cuobjdump --dump-sass /tmp/wgmma_bench > "$out/sass.txt" 2>&1 && echo "HGMMA in SASS: $(grep -c HGMMA "$out/sass.txt"), LDL/STL: $(grep -c -E 'LDL|STL' "$out/sass.txt")"
BENCH_CSV="$out/bench.csv" timeout 200 /tmp/wgmma_bench "${MODE:-all}" 2>&1 | tee "$out/run.log"
echo "exit: $?"
if [ "${SANITIZE:-1}" = 1 ]; then
    timeout 90 compute-sanitizer --tool memcheck /tmp/wgmma_bench small >"$out/memcheck.log" 2>&1; echo "memcheck rc=$?"; tail -3 "$out/memcheck.log"
    timeout 90 compute-sanitizer --tool racecheck /tmp/wgmma_bench small >"$out/racecheck.log" 2>&1; echo "racecheck rc=$?"; tail -3 "$out/racecheck.log"
fi
