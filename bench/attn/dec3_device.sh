#!/usr/bin/env bash
# bench/attn/dec3_device.sh — one GPU call for issue 10's decode attention shapes, results to
# $OUT (summary.txt, r.tgz):
#   1. tests/gpu/test_gpu_attention with KILN_BENCH=1 KILN_DEC_SWEEP=1: every case against the
#      f64 reference, the decode table, the sweep of kernel shapes (clusters of 8 / 16, warps,
#      stages, splits; B=1 x 1024 and 8192, B=8 x 8192, B=32 x 1024) and the milestone timings;
#   2. the 1B and 8B layers at B=1 over 1024 cached keys (`kiln run samples/llama3_{1b,8b}_layer.kiln
#      --dims B=1,S=1,T=1024 --random --pos=1000 --profile --profile-runs=40`) for build/kiln and
#      each build/variants/kiln_* (the tree built with other codegen constants), interleaved
#      (ROUNDS, default 2);
#   3. test_decode_gpu of build/ and of each build/variants/test_decode_gpu_*, then racecheck and
#      memcheck of `kiln run --check` on the 8B layer (T=256) for each binary, as time allows.
# DEADLINE (s, default 110): each step's cap or what is left.
set -u
OUT=${OUT:-/tmp/dec3-out}; R=$OUT/r; mkdir -p "$R"
export KILN_CACHE_DIR=${KILN_CACHE_DIR:-$PWD/build/kcache}
san=compute-sanitizer; command -v $san >/dev/null || san=/usr/local/cuda/bin/compute-sanitizer
t0=$(date +%s); DL=${DEADLINE:-110}; S=$OUT/summary.txt
tl() { local cap=$1 rsv=$2 left; left=$((DL - ($(date +%s) - t0) - rsv)); [ $left -lt $cap ] && cap=$left; [ $cap -lt 1 ] && cap=1; echo $cap; }
el() { echo "[$(($(date +%s) - t0)) s]"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader > "$S" 2>&1
KILN_BENCH=1 KILN_DEC_SWEEP=1 timeout $(tl ${ATT_S:-50} 40) build/tests/gpu/test_gpu_attention > "$R/attention.log" 2>&1
echo "test_gpu_attention rc=$? $(el)" >> "$S"
grep -E "^FAIL|passed, .* failed|compiled" "$R/attention.log" | tail -8 >> "$S"
grep -E "^bench (sweep|timing|decode B)" "$R/attention.log" >> "$S"
bins="build/kiln $(ls build/variants/kiln_* 2>/dev/null)"
for r in $(seq ${ROUNDS:-2}); do
    for v in $bins; do
        for m in 1b 8b; do
            n=$(basename $v)_${m}_$r
            timeout $(tl 10 25) $v run samples/llama3_${m}_layer.kiln --dims B=1,S=1,T=1024 --random --pos=1000 \
                --profile --profile-runs=40 > "$R/prof_$n.txt" 2>&1
            echo "== $n rc=$? $(el)" >> "$S"
            grep -E "attention|layer|graph|bubble" "$R/prof_$n.txt" | head -4 >> "$S"
        done
    done
done
for t in build/tests/gpu/test_decode_gpu build/variants/test_decode_gpu_*; do
    [ -x "$t" ] || continue
    timeout $(tl 15 8) $t > "$R/$(basename $t).log" 2>&1
    rc=$?; echo "$(basename $t) rc=$rc $(el)" >> "$S"; grep -E "FAIL|passed|failed" "$R/$(basename $t).log" | tail -3 >> "$S"
done
for v in $bins; do
    for tool in racecheck memcheck; do
        timeout $(tl 8 0) $san --tool $tool --error-exitcode 3 $v run samples/llama3_8b_layer.kiln \
            --dims B=1,S=1,T=256 --random --pos=100 --check > "$R/san_$(basename $v)_$tool.log" 2>&1
        rc=$?; echo "$tool $(basename $v) rc=$rc $(el)" >> "$S"
        grep -E "ERROR SUMMARY|RACECHECK SUMMARY|check" "$R/san_$(basename $v)_$tool.log" | tail -3 >> "$S"
    done
done
tar czf "$OUT/r.tgz" -C "$OUT" r
echo "done $(el)" >> "$S"
