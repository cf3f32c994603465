#!/usr/bin/env bash
# bench/device/call_beside.sh — decode attention beside the QKV GEMV (KILN_CG_QKV_BESIDE, in commit
# ed6b2ae only: measured a loss and removed; build the variants from that commit. The GEMV
# one CTA per SM under a carveout, the attention launched at once): one device call over the slim
# build (carry build-gpu with build-gpu/variants/kiln_beside100 and kiln_beside132w4 from
# bench/attn/push_variants.sh build beside100 "-DKILN_CG_QKV_BESIDE=100" and
# bench/attn/push_variants.sh build beside132w4 "-DKILN_CG_QKV_BESIDE=132 -DKILN_CG_DEC_CLUSTER_WARPS=4
# -DKILN_CG_QKV_BESIDE_NREG=120": the attention's CTAs of four warps, room for them at the 8B too):
#   1. `kiln run --check` of the variant on the 1B and 8B layers at decode (B=1, 1024 keys) and
#      memcheck of the 1B step;
#   2. decode profiles (`--profile --profile-runs=40`), default and variant interleaved, three rounds,
#      1B and 8B at B=1 (the layer with CUDA events, without the profiler, per kernel).
# LIMIT (320)
DEFAULT_LIMIT=320
. "$(dirname "$0")/common.sh"
L8=samples/llama3_8b_layer.kiln L1=samples/llama3_1b_layer.kiln
V=build/variants/kiln_beside100 W=build/variants/kiln_beside132w4
for b in $V $W; do
  ( bchk $b 1b $L1 --dims B=1,S=1,T=1024 --pos=1000; bchk $b 8b $L8 --dims B=1,S=1,T=1024 --pos=1000 ) > /tmp/ck_$(basename $b).txt 2>&1 &
done
timeout 60 $san --tool memcheck $V run $L1 --dims B=1,S=1,T=1024 --pos=1000 --random --check > /tmp/san_b.txt 2>&1
echo "memcheck 1b rc=$? $(grep -E 'ERROR SUMMARY' /tmp/san_b.txt)" | tee -a "$OUT/checks.txt"
wait
cat /tmp/ck_*.txt | tee -a "$OUT/checks.txt"
echo "checks done $(el) s" | tee -a "$OUT/times.txt"
for r in 1 2 3; do
  for b in build/kiln $V $W; do prof $b 1b-b1 $L1 B=1,S=1,T=1024 $r; done
  for b in $W $V build/kiln; do prof $b 8b-b1 $L8 B=1,S=1,T=1024 $r; done
done
grep -hE "^== |_k2_attention|_k1_matmul|^layer|without|^graph|^bubbles" "$OUT/profiles.txt" | cut -c1-150 > "$OUT/summary.txt"
sort "$OUT/table.txt"
