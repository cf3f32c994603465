#!/usr/bin/env bash
# bench/moe/moe_gpu.sh — the mixture-of-experts run on the H200 (one device call): the GPU
# tests of the router and the grouped expert matmul (tests/gpu test_gpu_moe), Mixtral's layer
# at decode against the interpreter (kiln run --check), the DRAM bytes and time of its MoE
# kernels at decode (ncu --metrics dram__bytes_read.sum), and compute-sanitizer memcheck of
# the tests. Results under $OUT. Run from the tree root with a build in build/.
set -u
OUT=${OUT:-/tmp/moe_out}
mkdir -p "$OUT"
B=build
export KILN_CACHE_DIR=/tmp/kiln_moe_cache KILN_TEST_SEED=${KILN_TEST_SEED:-20261201}
M=samples/mixtral_8x7b_layer.kiln
DIMS=B=1,S=1,T=512
t0=$(date +%s)
timeout 20 $B/tests/gpu/test_gpu_moe >"$OUT/test_gpu_moe.txt" 2>&1
echo "rc=$? wall=$(($(date +%s) - t0))" >>"$OUT/test_gpu_moe.txt"
t0=$(date +%s)
timeout 25 $B/kiln run $M --dims $DIMS --random --check >"$OUT/mixtral_check.txt" 2>&1
echo "rc=$? wall=$(($(date +%s) - t0))" >>"$OUT/mixtral_check.txt"
t0=$(date +%s)
timeout 20 ncu --metrics dram__bytes_read.sum,gpu__time_duration.sum -k regex:_gather \
    $B/kiln run $M --dims $DIMS --random --no-graphs >"$OUT/ncu_decode.txt" 2>&1
echo "rc=$? wall=$(($(date +%s) - t0))" >>"$OUT/ncu_decode.txt"
t0=$(date +%s)
timeout 18 compute-sanitizer --tool memcheck --error-exitcode 3 $B/tests/gpu/test_gpu_moe >"$OUT/memcheck.txt" 2>&1
echo "rc=$? wall=$(($(date +%s) - t0))" >>"$OUT/memcheck.txt"
