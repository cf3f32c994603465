#!/usr/bin/env bash
# bench/row/build.sh [OUT] — builds the row-kernel variants that bench/row/device.sh times: the
# 8B layer's prefill RMSNorm (no gain: folded into the weights) and Mixtral's (with its gain),
# as codegen emits them, then with row.cuh's constants changed (threads, items, VEC, launch
# bounds), each into OUT (default build-gpu/rowbench) with bench/row/row_main.cu.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:-build-gpu/rowbench}
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
build/kiln compile samples/llama3_8b_layer.kiln -D B=4 -D S=4096 -D T=4096 --emit=cuda -o "$tmp/l8" >/dev/null
build/kiln compile samples/mixtral_8x7b_layer.kiln -D B=4 -D S=4096 -D T=4096 --emit=cuda -o "$tmp/mx" >/dev/null
plain=$tmp/l8/kiln_llama3_8b_layer_k0_row.cu
gain=$tmp/mx/kiln_mixtral_8x7b_layer_k4_row.cu
grep -q "const float f0 = kiln_ldv(kiln_al<AL>(p.t0)" "$plain"
grep -q "kiln_ldv(kiln_al<AL>(p.t9) + i)" "$gain"
# name threads items vec launch-bounds-min-blocks(0: none)
variants="base 256 16 1 0
v8 512 8 8 0
t256 256 16 8 0
t128 128 32 8 0"
build() { # kind src name threads items vec lb defs
    local f=$tmp/$1_$3.cu
    sed -e "s/^#define KILN_ROW_THREADS .*/#define KILN_ROW_THREADS $4/" -e "s/^#define KILN_ROW_ITEMS .*/#define KILN_ROW_ITEMS $5/" \
        -e "s/^#define KILN_ROW_VEC .*/#define KILN_ROW_VEC $6/" "$2" > "$f"
    [ "$7" = 0 ] || sed -i "s/__launch_bounds__(KILN_ROW_THREADS)/__launch_bounds__(KILN_ROW_THREADS, $7)/" "$f"
    nvcc -O3 -arch=sm_90a -std=c++17 -DKFILE="\"$f\"" $8 -Xptxas -v bench/row/row_main.cu -o "$out/$1_$3" > "$f.log" 2>&1
    echo "$1_$3: $(grep -A3 "entry function 'kiln" "$f.log" | grep -o "Used [0-9]* registers\|[0-9]* bytes spill stores" | tr '\n' ' ')"
}
while read -r name t it v lb; do
    build plain "$plain" "$name" "$t" "$it" "$v" "$lb" "-DARG_IN=t0 -DARG_OUT=t13"
    build gain "$gain" "$name" "$t" "$it" "$v" "$lb" "-DGAIN -DARG_IN=t33 -DARG_GAIN=t9 -DARG_OUT=t34"
done <<< "$variants"
ls "$out"
