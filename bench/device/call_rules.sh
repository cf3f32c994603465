#!/usr/bin/env bash
# bench/device/call_rules.sh — one short device call over the slim build (carry build-gpu with
# build-gpu/variants from bench/attn/push_variants.sh: kiln_tiny "-DKILN_CG_DEC_CLUSTER_TINY=2",
# kiln_tinyring "... -DKILN_CG_GEMV_RING=6 -DKILN_CG_GEMV_RING_MINK=8192", kiln_ringk (the ring
# at K >= 8192 alone), kiln_ring, kiln_pf): the candidate rules of decode, checked and timed.
#   1. `kiln run --check` of the variants (Gemma-2B at B = 1 and 2, the 1B and 8B layers);
#   2. layer profiles, two rounds interleaved: Gemma-2B (default, tiny, tinyring, ring), 1B
#      (default, ringk, pf, RoPE and the cache write in attention: $ATTROPE), 8B at B = 1
#      (default, ringk, $ATTROPE), Phi-3-mini (default, ringk), 8B at B = 4 and 16 (default,
#      $ATTROPE);
#   3. the raw profiles into $OUT too (packed into $OUT/all.tgz on exit by common.sh).
# LIMIT (220)
DEFAULT_LIMIT=220
. "$(dirname "$0")/common.sh"
L8=samples/llama3_8b_layer.kiln L1=samples/llama3_1b_layer.kiln P3=samples/phi3_mini_layer.kiln
G2B=bench/attn/gemma_2b_layer.kiln V=build/variants
ATTROPE=--disable=epilogue-rope,epilogue-cache-write
chk() { # bin label args...
  local b=$1 l=$2; shift 2
  timeout 60 "$b" run "$@" --random --check > "$OUT/chk_$(basename "$b")_$l.txt" 2>&1
  rc=$?; echo "$(basename "$b") $l rc=$rc $(grep -E 'check step' "$OUT/chk_$(basename "$b")_$l.txt" | tail -1 | cut -c1-100)"
}
( chk $V/kiln_tiny g2b-b1 $G2B --dims B=1,S=1,T=1024 --pos=1000
  chk $V/kiln_tiny g2b-b2 $G2B --dims B=2,S=1,T=1024 --pos=700
  chk $V/kiln_tinyring g2b-b1 $G2B --dims B=1,S=1,T=1024 --pos=1000 ) > /tmp/ck_a.txt 2>&1 &
( chk $V/kiln_tinyring 1b-b1 $L1 --dims B=1,S=1,T=1024 --pos=1000
  chk $V/kiln_ringk 8b-b1 $L8 --dims B=1,S=1,T=1024 --pos=1000
  chk $V/kiln_ringk phi3-b1 $P3 --dims B=1,S=1,T=1024 --pos=1000 ) > /tmp/ck_b.txt 2>&1 &
( chk build/kiln 1b-b1-attrope $L1 --dims B=1,S=1,T=1024 --pos=1000 $ATTROPE
  chk build/kiln 8b-b4-attrope $L8 -D D=1024 -D H=8 -D KV=2 -D F=2048 --dims B=4,S=1,T=1024 --pos=900 $ATTROPE ) > /tmp/ck_c.txt 2>&1 &
wait
cat /tmp/ck_[abc].txt | tee "$OUT/checks.txt"
echo "checks done $(el) s" | tee -a "$OUT/times.txt"
for r in 1 2; do
  for b in build/kiln $V/kiln_tiny $V/kiln_tinyring $V/kiln_ring; do prof $b g2b-b1 $G2B B=1,S=1,T=1024 $r; done
  for b in build/kiln $V/kiln_ringk $V/kiln_pf; do prof $b 1b-b1 $L1 B=1,S=1,T=1024 $r; done
  prof build/kiln 1b-b1-attrope $L1 B=1,S=1,T=1024 $r 1023 $ATTROPE
  for b in build/kiln $V/kiln_ringk; do prof $b 8b-b1 $L8 B=1,S=1,T=1024 $r; done
  prof build/kiln 8b-b1-attrope $L8 B=1,S=1,T=1024 $r 1023 $ATTROPE
  for b in build/kiln $V/kiln_ringk; do prof $b phi3-b1 $P3 B=1,S=1,T=1024 $r; done
  for bb in 4 16; do
    prof build/kiln 8b-b$bb $L8 B=$bb,S=1,T=1024 $r 1000
    prof build/kiln 8b-b$bb-attrope $L8 B=$bb,S=1,T=1024 $r 1000 $ATTROPE
  done
  echo "round $r done $(el) s" | tee -a "$OUT/times.txt"
done
sort "$OUT/table.txt"
cp /tmp/prof_*.txt "$OUT/" 2>/dev/null # (common.sh packs $OUT into all.tgz on exit)
