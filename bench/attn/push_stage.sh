#!/usr/bin/env bash
# bench/attn/push_stage.sh TREE BASE_BUILD — the off-device part of bench/attn/push_device.sh: the
# attention test's cubins (TREE/build/attcubins) and the layers' kernels of TREE's kiln, of its
# variants (TREE/build/variants/kiln_*, bench/attn/push_variants.sh) and of BASE_BUILD's kiln in
# TREE/build/kcache (a kernel cache all binaries read), for the dims the call runs (no GPU
# needed: `kiln compile --emit=cubin` compiles for sm_90a). scripts/gpu_stage.sh copies none of
# these folders: copy them into the staged tree's build (the device script says so).
set -eu
tree=${1:?usage: push_stage.sh TREE BASE_BUILD}
base=${2:?usage: push_stage.sh TREE BASE_BUILD}
cd "$tree"
mkdir -p build/attcubins build/kcache
KILN_ATT_PRECOMPILE=1 KILN_ATT_CUBINS=$PWD/build/attcubins KILN_BENCH=1 KILN_DEC_SWEEP=1 build/tests/gpu/test_gpu_attention | tail -1
export KILN_CACHE_DIR=$PWD/build/kcache
w=$(mktemp -d)
for v in build/variants/kiln_*; do
    [ -x "$v" ] || continue
    for m in 1b 8b; do "$v" compile samples/llama3_${m}_layer.kiln -D B=1 -D S=1 -D T=1024 --emit=cubin -o "$w" --timings | tail -1; done
done
for bin in build/kiln "$base/kiln"; do
    for spec in "1b B=1 S=1 T=1024" "8b B=1 S=1 T=1024" "8b B=32 S=1 T=1024" "8b B=8 S=1 T=8192"; do
        set -- $spec
        "$bin" compile samples/llama3_$1_layer.kiln -D $2 -D $3 -D $4 --emit=cubin -o "$w" --timings | tail -1
    done
    "$bin" compile samples/llama3_8b_layer.kiln -D D=1024 -D H=8 -D KV=2 -D F=2048 -D B=1 -D S=1 -D T=1024 \
        --emit=cubin -o "$w" --timings | tail -1
done
rm -rf "$w"
du -sh build/attcubins build/kcache
