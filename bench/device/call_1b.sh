#!/usr/bin/env bash
# bench/device/call_1b.sh — issue 11's 1B decode target (36 us): the GEMV's early weight stream
# only for small matrices, checked and timed against the default in one call, over the slim build
# (carry build-gpu with build-gpu/variants from bench/attn/push_variants.sh BUILD NAME "DEFINES"):
#   kiln_ringk34  "-DKILN_CG_GEMV_RING=6 -DKILN_CG_GEMV_RING_MINK=8192 -DKILN_CG_GEMV_SMALL_MB=40"
#                 (the ring at K >= 8192 for weights of at most 40 MB: the 1B down projection)
#   kiln_pf34     "-DKILN_CG_GEMV_PREFETCH=1 -DKILN_CG_GEMV_SMALL_MB=40"
#                 (the L2 prefetch for weights of at most 40 MB: the 1B QKV, O and down, the 8B O)
#   1. `kiln run --check` of each variant: the 1B, 8B and Phi-3-mini layers at B = 1;
#   2. layer profiles, default and variants interleaved, two rounds: 1B, 8B, Phi-3-mini, Gemma-2B at
#      B = 1 over 1024 keys;
#   3. if time is left, bench/run.sh's 1B and 8B decode rows (Kiln, torch.compile + graph).
# LIMIT (300)
DEFAULT_LIMIT=300
. "$(dirname "$0")/common.sh"
L8=samples/llama3_8b_layer.kiln L1=samples/llama3_1b_layer.kiln P3=samples/phi3_mini_layer.kiln
G2B=bench/attn/gemma_2b_layer.kiln V="build/variants/kiln_ringk34 build/variants/kiln_pf34"
for v in $V; do
  ( for m in $L1 $L8 $P3; do
      timeout 90 $v run $m --dims B=1,S=1,T=1024 --pos=1000 --random --check > /tmp/c.txt 2>&1
      rc=$?; echo "check $(basename $v) $(basename $m) rc=$rc $(grep -E 'check step' /tmp/c.txt | tail -1 | cut -c1-100)"
    done ) > "/tmp/ck_$(basename $v).txt" 2>&1 &
done
wait
cat /tmp/ck_*.txt | tee "$OUT/checks.txt"
for r in 1 2; do
  for m in "1b $L1" "8b $L8" "phi3 $P3" "g2b $G2B"; do
    set -- $m
    for b in build/kiln $V; do prof $b $1-b1 $2 B=1,S=1,T=1024 $r; done
  done
  echo "round $r done $(el) s" | tee -a "$OUT/times.txt"
done
sort "$OUT/table.txt"
bench_rows 1b-decode,8b-decode kiln,compile-graph
cp /tmp/prof_*.txt "$OUT/" 2>/dev/null
