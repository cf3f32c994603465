#!/usr/bin/env bash
# bench/attn/cols_device.sh — a second GPU call for issue 10's B=1 decode attention (after
# bench/attn/push_device.sh; not run yet): KILN_DEC_COLS (one softmax per key tile for the CTA,
# P V split by columns, no warp merge) in build/variants/kiln_cols (bench/attn/push_variants.sh
# build cols -DKILN_CG_DEC_COLS=1), against the tree's default (the push) and main ($BASE/kiln).
# Staged as push_device.sh says (bench/attn/push_stage.sh; copy build/{attcubins,kcache,variants}
# into the staged tree). Steps,
# each capped by what is left of DEADLINE (s, default 70):
#   1. test_gpu_attention: every decode case against the f64 reference (the push and cols cases
#      included), the sweep and the milestone stamps (KILN_BENCH=1 KILN_DEC_SWEEP=2);
#   2. the 1B and 8B layers at B=1 over 1024 keys (`kiln run ... --dims B=1,S=1,T=1024 --random
#      --pos=1023 --profile --profile-runs=40`): main, push, cols in turn;
#   3. racecheck and memcheck of one B=1 decode step of the 8B-shaped layer through kiln_cols;
#   4. test_decode_gpu; 5. a second round of step 2.
set -u
OUT=${OUT:-/tmp/cols-out}; R=$OUT/r; mkdir -p "$R"
export KILN_CACHE_DIR=${KILN_CACHE_DIR:-$PWD/build/kcache}
BASE=${BASE:?BASE: the baseline build (kiln)}
san=compute-sanitizer; command -v $san >/dev/null || san=/usr/local/cuda/bin/compute-sanitizer
t0=$(date +%s); DL=${DEADLINE:-70}; S=$OUT/summary.txt
tl() { local cap=$1 rsv=$2 left; left=$((DL - ($(date +%s) - t0) - rsv)); [ $left -lt $cap ] && cap=$left; [ $cap -lt 1 ] && cap=1; echo $cap; }
el() { echo "[$(($(date +%s) - t0)) s]"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader > "$S" 2>&1
KILN_ATT_CUBINS=$PWD/build/attcubins KILN_CASES=13-400 KILN_BENCH=1 KILN_DEC_SWEEP=2 timeout $(tl 30 40) \
    build/tests/gpu/test_gpu_attention > "$R/attention.log" 2>&1
echo "test_gpu_attention rc=$? $(el)" >> "$S"
grep -E "^FAIL|passed, .* failed|compiled" "$R/attention.log" | tail -8 >> "$S"
grep -E "^bench (sweep|timing).*(cluster=(8|16) .*push=4|push4)" "$R/attention.log" | sed -e 's/^bench //' -e 's/(median \/ max over CTAs, us)//' >> "$S"
prof() { # BIN NAME MODEL
    timeout $(tl 10 ${PRSV:-25}) "$1" run samples/llama3_$3_layer.kiln --dims B=1,S=1,T=1024 --random --pos=1023 --profile \
        --profile-runs=40 > "$R/prof_$2_$3.txt" 2>&1
    echo "== $2 $3 rc=$? $(el)" >> "$S"
    grep -E "_attention|^layer" "$R/prof_$2_$3.txt" | cut -c1-130 >> "$S"
}
round() { for m in 1b 8b; do prof "$BASE/kiln" base $m; prof build/kiln push $m; prof build/variants/kiln_cols cols $m; done; }
round
for tool in racecheck memcheck; do
    timeout $(tl 15 12) $san --tool $tool --error-exitcode 3 build/variants/kiln_cols run samples/llama3_8b_layer.kiln -D D=1024 \
        -D H=8 -D KV=2 -D F=2048 --dims B=1,S=1,T=1024 --random --pos=1000 --check > "$R/san_$tool.log" 2>&1
    echo "$tool rc=$? $(el)" >> "$S"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|check step 0: out" "$R/san_$tool.log" | tail -2 >> "$S"
done
timeout $(tl 25 0) build/tests/gpu/test_decode_gpu > "$R/test_decode_gpu.log" 2>&1
echo "test_decode_gpu rc=$? $(el)" >> "$S"; grep -E "FAIL|passed|failed" "$R/test_decode_gpu.log" | tail -3 >> "$S"
PRSV=0; [ $(tl 999 0) -ge 20 ] && round
tar czf "$OUT/r.tgz" -C "$OUT" r
echo "done $(el)" >> "$S"
cat "$S"
