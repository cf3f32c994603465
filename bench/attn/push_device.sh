#!/usr/bin/env bash
# bench/attn/push_device.sh — one GPU call for issue 10's decode attention at B=1 (the partials
# pushed into the cluster leader, KILN_DEC_PUSH; the cached rows' loads with their addresses
# computed once; two QK chains), results under $OUT (summary.txt, r.tgz). Builds nothing: the
# attention test's cubins are in build/attcubins (KILN_ATT_PRECOMPILE=1 KILN_ATT_CUBINS=...
# KILN_BENCH=1 KILN_DEC_SWEEP=1 build/tests/gpu/test_gpu_attention), the layers' kernels of both
# binaries in build/kcache (`kiln compile ... --emit=cubin` with KILN_CACHE_DIR, bench/attn/push_stage.sh),
# and build/variants/kiln_c16 is this tree's kiln with clusters of 16 CTAs of four warps
# (bench/attn/push_variants.sh build c16 "-DKILN_CG_DEC_CLUSTER_MAX=16 -DKILN_CG_DEC_CLUSTER_WARPS=4");
# scripts/gpu_stage.sh does not pack build/{attcubins,kcache,variants}: copy them into the
# staged tree's build.
# $BASE/kiln is main's build (the baseline), build/kiln this tree's. In order, each step capped
# by what is left of DEADLINE (s, default 150):
#   1. test_gpu_attention: every decode case against the f64 reference (KILN_CASES=13-400; the
#      push cases included), then the sweep of kernel shapes and the milestone stamps
#      (KILN_BENCH=1 KILN_DEC_SWEEP=2);
#   2. the 1B and 8B layers at B=1 over 1024 keys, `kiln run ... --dims B=1,S=1,T=1024 --random
#      --pos=1023 --profile --profile-runs=40`, baseline, this tree and (round 1) the c16 variant in turn;
#   3. compute-sanitizer racecheck and memcheck of one B=1 decode step of the 8B-shaped layer
#      (-D D=1024 -D H=8 -D KV=2 -D F=2048, T=1024, pos 1000, --check);
#   4. test_decode_gpu;
#   5. the 8B layer at B=32 over 1024 keys and B=8 over 8192, baseline and this tree;
#   6. a second round of step 2.
set -u
OUT=${OUT:-/tmp/push-out}; R=$OUT/r; mkdir -p "$R"
export KILN_CACHE_DIR=${KILN_CACHE_DIR:-$PWD/build/kcache}
BASE=${BASE:?BASE: the baseline build (kiln)}
san=compute-sanitizer; command -v $san >/dev/null || san=/usr/local/cuda/bin/compute-sanitizer
t0=$(date +%s); DL=${DEADLINE:-150}; S=$OUT/summary.txt
tl() { local cap=$1 rsv=$2 left; left=$((DL - ($(date +%s) - t0) - rsv)); [ $left -lt $cap ] && cap=$left; [ $cap -lt 1 ] && cap=1; echo $cap; }
el() { echo "[$(($(date +%s) - t0)) s]"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader > "$S" 2>&1

KILN_ATT_CUBINS=$PWD/build/attcubins KILN_CASES=13-400 KILN_BENCH=1 KILN_DEC_SWEEP=2 timeout $(tl 45 100) \
    build/tests/gpu/test_gpu_attention > "$R/attention.log" 2>&1
echo "test_gpu_attention rc=$? $(el)" >> "$S"
grep -E "^FAIL|passed, .* failed|compiled" "$R/attention.log" | tail -8 >> "$S"
grep -E "^bench (sweep|timing)" "$R/attention.log" | sed -e 's/^bench //' >> "$S"

prof() { # BIN NAME MODEL DIMS POS
    timeout $(tl 14 ${PRSV:-20}) "$1" run samples/llama3_$3_layer.kiln --dims "$4" --random --pos=$5 --profile \
        --profile-runs=40 > "$R/prof_$2_$3_${4//[,=]/_}.txt" 2>&1
    echo "== $2 $3 $4 rc=$? $(el)" >> "$S"
    grep -E "_attention|^layer|^bubbles" "$R/prof_$2_$3_${4//[,=]/_}.txt" | cut -c1-150 >> "$S"
}
round() {
    for m in 1b 8b; do
        prof "$BASE/kiln" base $m B=1,S=1,T=1024 1023
        prof build/kiln new $m B=1,S=1,T=1024 1023
        [ -n "${1:-}" ] && [ -x build/variants/kiln_c16 ] && prof build/variants/kiln_c16 c16 $m B=1,S=1,T=1024 1023
    done
}
round c16

for tool in racecheck memcheck; do
    timeout $(tl 40 30) $san --tool $tool --error-exitcode 3 build/kiln run samples/llama3_8b_layer.kiln -D D=1024 \
        -D H=8 -D KV=2 -D F=2048 --dims B=1,S=1,T=1024 --random --pos=1000 --check > "$R/san_$tool.log" 2>&1
    echo "$tool rc=$? $(el)" >> "$S"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|check|hazard" "$R/san_$tool.log" | tail -4 >> "$S"
done

timeout $(tl 40 20) build/tests/gpu/test_decode_gpu > "$R/test_decode_gpu.log" 2>&1
echo "test_decode_gpu rc=$? $(el)" >> "$S"; grep -E "FAIL|passed|failed" "$R/test_decode_gpu.log" | tail -4 >> "$S"

PRSV=0
for b in "$BASE/kiln base" "build/kiln new"; do
    set -- $b
    prof $1 $2 8b B=32,S=1,T=1024 1023
    prof $1 $2 8b B=8,S=1,T=8192 8191
done
[ $(tl 999 0) -ge 30 ] && round
tar czf "$OUT/r.tgz" -C "$OUT" r
echo "done $(el)" >> "$S"
cat "$S"
