#!/usr/bin/env bash
# bench/device/pack_probe.sh — the slim build that bench/device/call_probe.sh runs over: build/ built,
# the two `kiln` variants of codegen's even-width rule (KILN_CG_WG_EVEN 1 and 3) linked beside it
# (bench/attn/push_variants.sh), all packed into build-gpu/ (carry ["build-gpu"]).
set -eu
cd "$(dirname "$0")/../.."
ninja -C build > /dev/null
bash bench/attn/push_variants.sh build even "-DKILN_CG_WG_EVEN=1"
bash bench/attn/push_variants.sh build even3 "-DKILN_CG_WG_EVEN=3"
rm -rf build-gpu
GPU_PACK_MIN=0 bash scripts/gpu_pack.sh build build-gpu
mkdir -p build-gpu/variants
cp build/variants/kiln_even build/variants/kiln_even3 build-gpu/variants/
strip --strip-debug build-gpu/variants/kiln_even build-gpu/variants/kiln_even3
du -sh build-gpu
