#!/usr/bin/env bash
# bench/attn/dec4_device.sh — the short GPU call of issue 10's decode attention rule (kernels
# compiled beforehand where they can be: KILN_ATT_CUBINS=build/attcubins filled by
# `KILN_ATT_PRECOMPILE=1 KILN_ATT_CUBINS=... KILN_CASES=13-200 KILN_BENCH=1 KILN_DEC_SWEEP=2
# build/tests/gpu/test_gpu_attention`, the layers' kernels in build/kcache by `kiln compile
# --emit=cubin`), results to $OUT (summary.txt, r.tgz):
#   1. test_gpu_attention: the decode cases against the f64 reference (KILN_CASES=13-200) and
#      the sweep of kernel shapes with the milestone timings (KILN_BENCH=1 KILN_DEC_SWEEP=2);
#   2. the 8B and 1B layers at B=1 over 1024 cached keys (`kiln run ... --dims B=1,S=1,T=1024
#      --random --pos=1000 --profile --profile-runs=40`), build/kiln (the rule) and
#      build/variants/kiln_old (the rule before) in turn;
#   3. test_decode_gpu; racecheck and memcheck of `kiln run --check` on the 8B-shaped layer
#      narrowed to D=F=512 (the attention as in the 8B: 32/8 heads of 128) at T=1024, pos 1000.
set -u
OUT=${OUT:-/tmp/dec4-out}; R=$OUT/r; mkdir -p "$R"
export KILN_CACHE_DIR=${KILN_CACHE_DIR:-$PWD/build/kcache}
san=compute-sanitizer; command -v $san >/dev/null || san=/usr/local/cuda/bin/compute-sanitizer
t0=$(date +%s); S=$OUT/summary.txt
el() { echo "[$(($(date +%s) - t0)) s]"; }
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader > "$S" 2>&1
KILN_ATT_CUBINS=$PWD/build/attcubins KILN_CASES=13-200 KILN_BENCH=1 KILN_DEC_SWEEP=2 timeout ${ATT_S:-24} \
    build/tests/gpu/test_gpu_attention > "$R/attention.log" 2>&1
echo "test_gpu_attention rc=$? $(el)" >> "$S"
grep -E "^FAIL|passed, .* failed|compiled" "$R/attention.log" | tail -8 >> "$S"
grep -E "^bench (sweep|timing)" "$R/attention.log" >> "$S"
for r in 1 ${ROUND2:-}; do
    for m in 8b 1b; do
        for v in build/kiln build/variants/kiln_old; do
            n=$(basename $v)_${m}_$r
            timeout ${PROF_S:-7} $v run samples/llama3_${m}_layer.kiln --dims B=1,S=1,T=1024 --random --pos=1000 \
                --profile --profile-runs=40 > "$R/prof_$n.txt" 2>&1
            echo "== $n rc=$? $(el)" >> "$S"
            grep -E "_attention|^layer" "$R/prof_$n.txt" | cut -c1-140 >> "$S"
        done
    done
done
timeout ${DEC_S:-10} build/tests/gpu/test_decode_gpu > "$R/test_decode_gpu.log" 2>&1
echo "test_decode_gpu rc=$? $(el)" >> "$S"; grep -E "FAIL|passed|failed" "$R/test_decode_gpu.log" | tail -3 >> "$S"
for tool in racecheck memcheck; do
    timeout ${SAN_S:-6} $san --tool $tool --error-exitcode 3 build/kiln run samples/llama3_8b_layer.kiln -D D=512 -D F=512 \
        --dims B=1,S=1,T=1024 --random --pos=1000 --check > "$R/san_$tool.log" 2>&1
    echo "$tool rc=$? $(el)" >> "$S"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|check" "$R/san_$tool.log" | tail -3 >> "$S"
done
tar czf "$OUT/r.tgz" -C "$OUT" r
echo "done $(el)" >> "$S"
