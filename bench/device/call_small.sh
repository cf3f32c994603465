#!/usr/bin/env bash
# bench/device/call_small.sh — one device call over the slim build (carry build-gpu with
# build-gpu/variants from bench/attn/push_variants.sh): the GEMV rules for small models' decode,
# checked and timed against the default:
#   kiln_ringk  "-DKILN_CG_GEMV_RING=6 -DKILN_CG_GEMV_RING_MINK=8192"  the ring on weights of at
#               most KILN_CG_GEMV_SMALL_MB (40) with K >= 8192: the 1B layer's down projection
#   kiln_pf70   "-DKILN_CG_GEMV_SMALL_MB=70"  the L2 prefetch up to 70 MB (the 1B gate/up, the
#               8B and Phi-3 QKV, the Phi-3 and Gemma-2B down)
#   kiln_both   both
#   kiln_ring70 "-DKILN_CG_GEMV_RING=6 -DKILN_CG_GEMV_SMALL_MB=70"  the ring on every GEMV of at
#               most 70 MB (the 1B layer's four)
# 1. `kiln run --check` of each variant on the 1B, Phi-3-mini, Gemma-2B layers at B = 1 and the
#    8B layer at B = 1 and B = 2 S = 300 (small dims); memcheck of kiln_both on the 1B layer;
# 2. layer profiles (`--profile --profile-runs=40`), default and variants interleaved, two
#    rounds: 1B, 8B, Phi-3-mini, Gemma-2B at B = 1 over 1024 keys.
# LIMIT (420)
DEFAULT_LIMIT=420
. "$(dirname "$0")/common.sh"
L8=samples/llama3_8b_layer.kiln L1=samples/llama3_1b_layer.kiln P3=samples/phi3_mini_layer.kiln
G2B=bench/attn/gemma_2b_layer.kiln V=build/variants
VS="kiln_ringk kiln_pf70 kiln_both kiln_ring70"
for v in $VS; do
  ( bchk $V/$v 1b-b1 $L1 --dims B=1,S=1,T=1024 --pos=1000
    bchk $V/$v phi3-b1 $P3 --dims B=1,S=1,T=1024 --pos=1000
    bchk $V/$v g2b-b1 $G2B --dims B=1,S=1,T=1024 --pos=1000
    bchk $V/$v 8b-b1 $L8 --dims B=1,S=1,T=1024 --pos=1000
    bchk $V/$v 8b-s300 $L8 -D D=1024 -D H=8 -D KV=2 -D F=2048 --dims B=2,S=300,T=512 --pos=0 ) > "/tmp/ck_$v.txt" 2>&1 &
done
( timeout 120 $san --tool memcheck $V/kiln_both run $L1 --dims B=1,S=1,T=1024 --pos=1000 --random --check > /tmp/san_both.txt 2>&1
  echo "memcheck kiln_both 1b-b1 rc=$? $(grep -E 'ERROR SUMMARY' /tmp/san_both.txt | tail -1)" ) > /tmp/ck_san.txt 2>&1 &
wait
cat /tmp/ck_*.txt | tee "$OUT/checks.txt"
echo "checks done $(el) s" | tee -a "$OUT/times.txt"
for r in 1 2; do
  for b in build/kiln $V/kiln_ringk $V/kiln_pf70 $V/kiln_both $V/kiln_ring70; do prof $b 1b-b1 $L1 B=1,S=1,T=1024 $r; done
  for b in build/kiln $V/kiln_pf70 $V/kiln_both $V/kiln_ring70; do prof $b 8b-b1 $L8 B=1,S=1,T=1024 $r; done
  for b in build/kiln $V/kiln_pf70 $V/kiln_both $V/kiln_ring70; do prof $b phi3-b1 $P3 B=1,S=1,T=1024 $r; done
  for b in build/kiln $V/kiln_pf70 $V/kiln_both $V/kiln_ring70; do prof $b g2b-b1 $G2B B=1,S=1,T=1024 $r; done
  echo "round $r done $(el) s" | tee -a "$OUT/times.txt"
done
sort "$OUT/table.txt"
