#!/usr/bin/env bash
# bench/device/call_nopfo.sh — one call (about 200 s; carry build-gpu with
# build-gpu/variants/kiln_nopfo from `bench/attn/push_variants.sh build nopfo
# "-DKILN_CG_GEMV_PREFETCH_MIN_MB=9"`: the 1B layer's O GEMV without its L2 prefetch, every other
# kernel as the default):
#   1. `kiln run --check` of the variant on the 1B layer (B=1, 1024 keys);
#   2. decode profiles of the 1B layer, default and variant interleaved, three rounds (does the O
#      prefetch under the attention stretch the attention?);
#   3. bench/persist/sweep2.sh: each projection alone as a bulk-copy ring GEMV against Kiln's GEMVs.
# Before it, here: GPU_PACK_MIN=1 bash scripts/gpu_pack.sh build build-gpu;
#   bash bench/attn/push_variants.sh build nopfo "-DKILN_CG_GEMV_PREFETCH_MIN_MB=9";
#   mkdir -p build-gpu/variants && cp build/variants/kiln_nopfo build-gpu/variants/
# LIMIT (200)
DEFAULT_LIMIT=200
. "$(dirname "$0")/common.sh"
L1=samples/llama3_1b_layer.kiln
V=build/variants/kiln_nopfo
bchk $V 1b $L1 --dims B=1,S=1,T=1024 --pos=1000 | tee -a "$OUT/checks.txt"
for r in 1 2 3; do
  for b in build/kiln $V; do prof $b 1b-b1 $L1 B=1,S=1,T=1024 $r; done
done
grep -hE "^== |_k2_attention|_k3_matmul|^layer|without" "$OUT/profiles.txt" | cut -c1-150 > "$OUT/summary.txt"
sort "$OUT/table.txt"
left && LIMIT=$((LIMIT - $(el))) bash bench/persist/sweep2.sh | grep -E "^==|^alone|persistent layer: median|^kiln_|^layer"
