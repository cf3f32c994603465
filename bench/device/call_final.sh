#!/usr/bin/env bash
# bench/device/call_final.sh — this round's defaults on a GPU in one short call, over the slim
# build (carry build-gpu; build-gpu/variants/kiln_old: the default at the round's start):
# the batched decode graph, the skinny matmul's residual operands early and exchange without a
# round trip (KILN_CG_WG_DECODE 211), the plain-store skinny tile 64x128:
#   1. checks: test_gpu_matmul's configurations of those options (74-81: `_o51|_o48|_o35`),
#      `kiln run --check` of the 8B layer at small dims (B = 1, 4, 17, 32; B = 2 S = 5; B = 2
#      S = 300), the full 8B at B = 32 and the 1B at B = 32; racecheck and memcheck at B = 17 and
#      32 (small dims); ctest's test_decode_gpu and test_api_gpu;
#   2. layer profiles, kiln_old and the new default interleaved: 8B B = 32 (two rounds), 16, 8,
#      the 1B at B = 32; Gemma-2B and Phi-3-mini at B = 1 (new only);
#   3. if time is left, bench/run.sh's 8B B = 32 row (Kiln, PyTorch eager + graph).
# QUICK=1: step 2 is the 8B B = 32 pair, Gemma-2B and Phi-3-mini only.
# LIMIT (330)
DEFAULT_LIMIT=330
. "$(dirname "$0")/common.sh"
L8=samples/llama3_8b_layer.kiln L1=samples/llama3_1b_layer.kiln OLD=build/variants/kiln_old
SMALL="-D D=1024 -D H=8 -D KV=2 -D F=2048"
( KILN_MM_FILTER='_o51|_o48|_o35' timeout 150 build/tests/gpu/test_gpu_matmul > /tmp/mm.txt 2>&1
  echo "test_gpu_matmul 74-81 rc=$? $(grep -E 'passed|failed' /tmp/mm.txt | tail -1)" > /tmp/mmrc.txt ) &
( for b in 1 4 17 32; do kchk small-b$b $L8 $SMALL --dims B=$b,S=1,T=1024 --pos=900; done
  kchk small-b2s5 $L8 $SMALL --dims B=2,S=5,T=1024 --pos=700
  kchk small-s300 $L8 $SMALL --dims B=2,S=300,T=512 --pos=0 ) > /tmp/ck_a.txt 2>&1 &
( kchk 8b-b32 $L8 --dims B=32,S=1,T=1024 --pos=1000
  kchk 1b-b32 $L1 --dims B=32,S=1,T=1024 --pos=1000 ) > /tmp/ck_b.txt 2>&1 &
for tool in racecheck memcheck; do
  for b in ${SAN_B:-17 32}; do
    ( timeout 150 $san --tool $tool --error-exitcode 9 build/kiln run $L8 $SMALL --dims B=$b,S=1,T=512 --pos=400 \
        --random --check > "/tmp/san_${tool}_$b.txt" 2>&1
      echo "$tool B=$b rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "/tmp/san_${tool}_$b.txt" | tail -1)" ) \
      > "/tmp/sanrc_${tool}_$b.txt" &
  done
done
( cd build && timeout 200 ctest -R '^(test_api_gpu|test_decode_gpu)$' --output-on-failure > /tmp/ctest.txt 2>&1
  echo "ctest rc=$?" >> /tmp/ctest.txt ) &
wait
cat /tmp/mmrc.txt /tmp/ck_[ab].txt /tmp/sanrc_*.txt | tee "$OUT/checks.txt"
grep -E "FAIL|fail" /tmp/mm.txt | head -20 >> "$OUT/checks.txt"
for f in /tmp/san_*.txt; do echo "==== $f"; grep -E "Race|Invalid|rror|hazard" "$f" | head -6; done >> "$OUT/checks.txt"
grep -E "tests passed|tests failed|CHECK failed|passed,|rc=" /tmp/ctest.txt | tee -a "$OUT/checks.txt"
echo "checks done $(el) s" | tee -a "$OUT/times.txt"
for r in 1 2; do
  for b in $OLD build/kiln; do prof $b 8b-b32 $L8 B=32,S=1,T=1024 $r 1000; done
  [ $r = 1 ] && prof build/kiln g2b-b1 bench/attn/gemma_2b_layer.kiln B=1,S=1,T=1024 $r 1023
  [ $r = 1 ] && prof build/kiln phi3-b1 samples/phi3_mini_layer.kiln B=1,S=1,T=1024 $r 1023
  [ "${QUICK:-0}" = 1 ] && break
  [ $r = 1 ] && for bb in 16 8; do for b in $OLD build/kiln; do prof $b 8b-b$bb $L8 B=$bb,S=1,T=1024 $r 1000; done; done
  [ $r = 1 ] && for b in $OLD build/kiln; do prof $b 1b-b32 $L1 B=32,S=1,T=1024 $r 1000; done
  echo "round $r done $(el) s" | tee -a "$OUT/times.txt"
done
sort "$OUT/table.txt"
bench_rows 8b-decode-b32 kiln,graph
cp /tmp/prof_*.txt /tmp/ctest.txt "$OUT/" 2>/dev/null
