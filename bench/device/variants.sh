#!/usr/bin/env bash
# bench/device/variants.sh — codegen options that are off by default, checked and timed against
# the default in one device call, over the slim build (carry build-gpu). The variants are `kiln`
# binaries that differ only in codegen/cg_family.c's defines (bench/attn/push_variants.sh BUILD
# NAME "DEFINES"; copy build/variants into build-gpu/variants after gpu_pack.sh):
#   kiln_d211  -DKILN_CG_WG_DECODE=211   the skinny matmul's epilogue operands early + the tile's end
#                                        without a round trip (bench/gemv/sk3_device.sh)
#   kiln_cols  -DKILN_CG_DEC_COLS=1      decode attention: P V split by columns (bench/attn/cols_device.sh)
#   kiln_pf    -DKILN_CG_GEMV_PREFETCH=1 the GEMV's first block into L2 before the PDL wait
#   kiln_all   all three
# Steps, each started only while the elapsed time is under LIMIT seconds:
#   1. `kiln run --check` (against the interpreter) of every variant on the 8B layer at small dims
#      (B = 1, 17, 32 decode; B = 2 S = 300 prefill) and the full 1B (B = 1) and 8B (B = 32) layers;
#      racecheck and memcheck of kiln_all at B = 1 and B = 32 (small dims);
#   2. layer profiles (`--profile --profile-runs=40`), default and variants interleaved, two rounds:
#      1B B=1, 8B B=1, 8B B=32; and the default's 8B prefill at S = 2048 in each round.
# Results under $OUT: checks.txt, san.txt, profiles.txt; a short table last on stdout.
#   LIMIT (300)
DEFAULT_LIMIT=300
. "$(dirname "$0")/common.sh"
san=compute-sanitizer; command -v $san >/dev/null || san=/usr/local/cuda/bin/compute-sanitizer
V="kiln_d211 kiln_cols kiln_pf kiln_all"
L8=samples/llama3_8b_layer.kiln
SMALL="-D D=1024 -D H=8 -D KV=2 -D F=2048"
for v in $V; do
  b=build/variants/$v
  ( bchk $b b1 $L8 $SMALL --dims B=1,S=1,T=1024 --pos=1000
    bchk $b b17 $L8 $SMALL --dims B=17,S=1,T=1024 --pos=900
    bchk $b b32 $L8 $SMALL --dims B=32,S=1,T=1024 --pos=1000
    bchk $b s300 $L8 $SMALL --dims B=2,S=300,T=512 --pos=0
    bchk $b 1b-b1 samples/llama3_1b_layer.kiln --dims B=1,S=1,T=1024 --pos=1023
    bchk $b 8b-b32 $L8 --dims B=32,S=1,T=1024 --pos=1000 ) > "/tmp/checks_$v.txt" 2>&1 &
done
for tool in racecheck memcheck; do
  for d in B=1 B=32; do
    ( timeout 90 $san --tool $tool --error-exitcode 9 build/variants/kiln_all run $L8 $SMALL --dims $d,S=1,T=512 \
        --pos=400 --random --check > "/tmp/san_${tool}_$d.txt" 2>&1
      echo "==== $tool kiln_all $d rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "/tmp/san_${tool}_$d.txt" | tail -1)" ) \
      > "/tmp/sanrc_${tool}_$d.txt" &
  done
done
wait
cat /tmp/checks_*.txt > "$OUT/checks.txt"
cat /tmp/sanrc_*.txt > "$OUT/san.txt"
for f in /tmp/san_*.txt; do echo "==== $f"; grep -E "Race|Invalid|Error|hazard" "$f" | head -10; done >> "$OUT/san.txt"
echo "checks done $(el) s" >> "$OUT/times.txt"
for r in 1 2; do
  for shape in "1b-b1 samples/llama3_1b_layer.kiln B=1,S=1,T=1024" "8b-b1 $L8 B=1,S=1,T=1024" "8b-b32 $L8 B=32,S=1,T=1024"; do
    set -- $shape
    prof build/kiln "$1" "$2" "$3" $r
    for v in $V; do prof build/variants/$v "$1" "$2" "$3" $r; done
  done
  prof build/kiln 8b-s2048 $L8 B=1,S=2048,T=2048 $r 0 # prefill: the default only (attention's softmax changes)
done
echo "profiles done $(el) s" >> "$OUT/times.txt"
cat "$OUT/checks.txt" "$OUT/san.txt" | grep -E "rc=|SUMMARY" | head -40
cat "$OUT/times.txt"
sort "$OUT/table.txt"
