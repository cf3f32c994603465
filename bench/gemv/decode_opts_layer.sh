#!/usr/bin/env bash
# bench/gemv/decode_opts_layer.sh — the 8B decode layer's profile with each variant of matmul_wgmma's
# decode-sized options (build/variants/kiln-dMASK, bench/gemv/build_variants.sh), interleaved: one
# warm-up run first (it measures the ceilings and brings the clocks up; not reported), then
# ROUNDS (default "32:0,3,7,1 32:0,3,7 8:0,3 4:0,3": batch:masks) of `kiln run --profile
# --profile-runs=40`. Results in $OUT/profiles.txt; no profile starts after T_TOTAL seconds.
set -u
out=${OUT:-/tmp/dopt_layer}
mkdir -p "$out"
export KILN_SOURCE_DIR=$PWD
t0=$(date +%s)
work=$(mktemp -d)
export KILN_CACHE_DIR=$work/c
L8=samples/llama3_8b_layer.kiln
prof() {
    [ $(( $(date +%s) - t0 )) -lt ${T_TOTAL:-45} ] || { echo "==== kiln-d$1 B=$2 skipped (T_TOTAL)"; return; }
    echo "==== kiln-d$1 B=$2"
    timeout 30 build/variants/kiln-d$1 run $L8 --dims B=$2,S=1,T=1024 --random --pos=1000 --profile --profile-runs=40 2>&1 |
        grep -E "_matmul|_attention|_row|^layer:|^bubbles:"
    echo "rc=$? [$(( $(date +%s) - t0 )) s]"
}
{
    prof 0 32 > "$work/warmup.txt"
    for r in ${ROUNDS:-32:0,3,7,1 32:0,3,7 8:0,3 4:0,3}; do
        b=${r%%:*}
        for m in $(echo "${r#*:}" | tr , ' '); do prof "$m" "$b"; done
    done
} > "$out/profiles.txt" 2>&1
echo "done [$(( $(date +%s) - t0 )) s]" >> "$out/profiles.txt"
