#!/usr/bin/env bash
# bench/moe/moe_gpu.sh — the mixture-of-experts run on the H200 (one device call): the GPU
# tests of the router, the grouped expert matmul, the gated kernel and the combine
# (tests/gpu test_gpu_moe, under compute-sanitizer memcheck: its cases' results and the
# checker's verdict in one run), Mixtral's layer at decode against the interpreter (kiln run
# --check), the DRAM bytes and time of its MoE kernels at decode (ncu --metrics
# dram__bytes_read.sum,gpu__time_duration.sum, clocks as found, in the same run), the layer's kernels timed
# inside graph replays (--profile), and the sliding-window decode target (bench/moe/
# window_decode.kiln profiled over a 32k cache and over a 4k one). Results under $OUT
# (summary.txt last; the logs in moe.tgz). Run from the tree root with a build in build/.
# KILN_CACHE_DIR: a kernel cache filled beforehand (same NVRTC) spares the compiles. QUICK=1: the
# test, ncu and the check only.
set -u
OUT=${OUT:-/tmp/moe_out}
R=$OUT/r
mkdir -p "$R"
B=build
export KILN_CACHE_DIR=${KILN_CACHE_DIR:-/tmp/kiln_moe_cache} KILN_TEST_SEED=${KILN_TEST_SEED:-20261201}
M=samples/mixtral_8x7b_layer.kiln
W=bench/moe/window_decode.kiln
DIMS=B=1,S=1,T=512
san=compute-sanitizer; command -v $san >/dev/null || san=/usr/local/cuda/bin/compute-sanitizer
step() { # name timeout command...: the log in $R/name.txt with its status and wall seconds
    local name=$1 to=$2 t0
    shift 2
    t0=$(date +%s)
    timeout "$to" "$@" >"$R/$name.txt" 2>&1
    echo "rc=$? wall=$(($(date +%s) - t0))" >>"$R/$name.txt"
}
step memcheck ${MEMCHECK_S:-40} $san --tool memcheck --error-exitcode 3 $B/tests/gpu/test_gpu_moe
# the MoE kernels under ncu in a run that also checks the layer against the interpreter
step ncu_decode ${NCU_S:-60} ncu --clock-control none --metrics dram__bytes_read.sum,gpu__time_duration.sum -k regex:_gather \
    $B/kiln run $M --dims $DIMS --random --no-graphs --check
if [ "${QUICK:-0}" != 1 ]; then
    step mixtral_profile 40 $B/kiln run $M --dims $DIMS --random --profile
    step window_32k 15 $B/kiln run $W --dims B=1,S=1,T=32768 --pos=32767 --random --profile
    step window_4k 15 $B/kiln run $W --dims B=1,S=1,T=4096 --pos=4095 --random --profile
fi
{
    grep -E "FAIL|passed|failed|ERROR SUMMARY|rc=" "$R/memcheck.txt" | tail -8
    echo "== ncu, check"; grep -E "_gather|dram__bytes_read.sum|gpu__time_duration.sum|rel|err|FAIL|rc=" "$R/ncu_decode.txt" | grep -v "==PROF==" | sed 's/  */ /g' | tail -16
    [ -f "$R/mixtral_profile.txt" ] && { echo "== profile"; grep -E "moe|gather|total|layer|floor|rc=" "$R/mixtral_profile.txt" | tail -14; }
    for w in window_32k window_4k; do [ -f "$R/$w.txt" ] && { echo "== $w"; grep -E "attention|total|rc=" "$R/$w.txt" | tail -4; }; done
} >"$OUT/summary.txt" 2>&1
tar czf "$OUT/moe.tgz" -C "$OUT" r
cat "$OUT/summary.txt"
