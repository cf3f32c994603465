#!/usr/bin/env bash
# bench/device/call_cpf.sh — the QKV GEMV's L2 prefetch of the cached rows decode attention reads
# next (codegen KILN_CG_QKV_CACHE_PF, gemv.cuh KILN_GEMV_CACHE_PF) and decode attention's
# positions read first, checked and timed in one device call over the slim build (carry
# build-gpu). Binaries under build/variants (bench/attn/push_variants.sh; copy them into
# build-gpu/variants after gpu_pack.sh): kiln_head and libkiln_head.so (the commit before these
# changes), kiln_cpf1 / libkiln_cpf1.so (-DKILN_CG_QKV_CACHE_PF=1: at each CTA's launch point),
# kiln_cpf2 / libkiln_cpf2.so (=2: right after the wait); build/kiln is the tree's default.
# Steps, each started only while under LIMIT:
#   1. `run --check` (against the interpreter) of the tree's kiln and both variants: the 1B layer
#      at B = 1 and 16, the 8B at B = 1 (full and small dims) and B = 4 (small dims, random
#      positions), Qwen3-8B, Gemma-2B and Phi-3-mini at B = 1; memcheck and racecheck of
#      kiln_cpf1 (1B B = 1; 8B small B = 4) and memcheck of the tree's kiln (Gemma-2B B = 1);
#   2. layer profiles (`--profile --profile-runs=40`) of the 1B and 8B layers at B = 1, the four
#      binaries interleaved, three rounds;
#   3. bench/bench.py's Kiln rows (1b-decode, 8b-decode) for the four libraries interleaved, two rounds.
# Results under $OUT: checks.txt, san.txt, profiles.txt, table.txt, rows.txt.
#   LIMIT (560)
DEFAULT_LIMIT=560
. "$(dirname "$0")/common.sh"
L1=samples/llama3_1b_layer.kiln L8=samples/llama3_8b_layer.kiln
SMALL="-D D=1024 -D H=8 -D KV=2 -D F=2048"
for b in build/kiln build/variants/kiln_cpf1 build/variants/kiln_cpf2; do
  n=$(basename "$b")
  ( bchk $b 1b-b1 $L1 --dims B=1,S=1,T=1024 --pos=1023
    bchk $b 1b-b16 $L1 --dims B=16,S=1,T=1024
    bchk $b 8b-b1s $L8 $SMALL --dims B=1,S=1,T=1024 --pos=1000
    bchk $b 8b-b4s $L8 $SMALL --dims B=4,S=1,T=1024
    bchk $b 8b-b1 $L8 --dims B=1,S=1,T=1024 --pos=1023
    bchk $b qwen3-b1 samples/qwen3_8b_layer.kiln --dims B=1,S=1,T=1024 --pos=700
    bchk $b gemma-b1 samples/gemma2_2b_layer.kiln --dims B=1,S=1,T=1024 --pos=1023
    bchk $b phi3-b1 samples/phi3_mini_layer.kiln --dims B=1,S=1,T=1024 --pos=1023 ) > "/tmp/checks_$n.txt" 2>&1 &
done
sanrun() { # LABEL TOOL BIN ARGS...
  local l=$1 t=$2 b=$3; shift 3
  timeout 150 $san --tool "$t" --error-exitcode 9 "$b" run "$@" --random --check > "/tmp/san_$l.txt" 2>&1
  echo "==== $l rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "/tmp/san_$l.txt" | tail -1)"
}
( sanrun mem-cpf1-1b memcheck build/variants/kiln_cpf1 $L1 --dims B=1,S=1,T=1024 --pos=1000 ) > /tmp/sanrc_1.txt &
( sanrun race-cpf1-1b racecheck build/variants/kiln_cpf1 $L1 --dims B=1,S=1,T=1024 --pos=1000 ) > /tmp/sanrc_2.txt &
( sanrun mem-cpf1-8b4 memcheck build/variants/kiln_cpf1 $L8 $SMALL --dims B=4,S=1,T=512 ) > /tmp/sanrc_3.txt &
( sanrun race-cpf1-8b4 racecheck build/variants/kiln_cpf1 $L8 $SMALL --dims B=4,S=1,T=512 ) > /tmp/sanrc_4.txt &
( sanrun mem-kiln-gemma memcheck build/kiln samples/gemma2_2b_layer.kiln --dims B=1,S=1,T=1024 --pos=1000 ) > /tmp/sanrc_5.txt &
wait
cat /tmp/checks_*.txt > "$OUT/checks.txt"
cat /tmp/sanrc_*.txt > "$OUT/san.txt"
for f in /tmp/san_*.txt; do echo "==== $f"; grep -E "Race|Invalid|Error|hazard|check step" "$f" | head -8; done >> "$OUT/san.txt"
echo "checks done $(el) s" | tee -a "$OUT/times.txt"
B4="build/variants/kiln_head build/kiln build/variants/kiln_cpf1 build/variants/kiln_cpf2"
for r in 1 2 3; do
  for b in $B4; do prof $b 1b-b1 $L1 B=1,S=1,T=1024 $r; done
  for b in $B4; do prof $b 8b-b1 $L8 B=1,S=1,T=1024 $r; done
done
echo "profiles done $(el) s" | tee -a "$OUT/times.txt"
for r in 1 2; do
  for lib in build/variants/libkiln_head.so build/libkiln.so build/variants/libkiln_cpf1.so build/variants/libkiln_cpf2.so; do
    left || break
    timeout 60 python3 bench/bench.py --lib "$lib" --cases 1b-decode,8b-decode --variants kiln > /tmp/row.txt 2>&1
    echo "== $lib round $r rc=$? ($(el) s)" | tee -a "$OUT/rows_full.txt" >> "$OUT/rows.txt"
    cat /tmp/row.txt >> "$OUT/rows_full.txt"
    grep -E "Llama" /tmp/row.txt | grep -E "µs" | head -4 >> "$OUT/rows.txt"
  done
done
echo "rows done $(el) s" | tee -a "$OUT/times.txt"
grep -E "rc=" "$OUT/checks.txt" "$OUT/san.txt" | head -40
sort "$OUT/table.txt"
cat "$OUT/rows.txt"
