#!/usr/bin/env bash
# bench/device/call_bd.sh — the batched decode graph (RoPE and the cache write in decode
# attention from 4 query rows, the QKV weight's rotation pairs read side by side) on a GPU in
# one call, over the slim build (carry build-gpu; build-gpu/variants/kiln_old: the default
# before it, for the timings):
#   1. `kiln run --check` against the interpreter: the 8B layer at small dims (B = 3, 4, 8, 17,
#      32; B = 2 S = 5), the full 8B at B = 32, the 1B (its scaled RoPE table) at B = 8,
#      Gemma-2B (head dim 256) and Phi-3-mini (head dim 96) at B = 4; racecheck and memcheck of
#      the 8B small dims at B = 8; ctest's test_api_gpu (B = 2 S = 5 takes the batched graph
#      beside the prefill and B <= 2 decode variants of the same model: one weight copy, both
#      layouts) and test_decode_gpu;
#   2. layer profiles, kiln_old and the new default interleaved: 8B B = 32 (two rounds), 16, 8,
#      4 and 1, the 1B at B = 8;
#   3. if time is left, bench/run.sh's 8B B = 32 row (Kiln, PyTorch eager + graph).
# LIMIT (380)
DEFAULT_LIMIT=380
. "$(dirname "$0")/common.sh"
L8=samples/llama3_8b_layer.kiln L1=samples/llama3_1b_layer.kiln OLD=build/variants/kiln_old
SMALL="-D D=1024 -D H=8 -D KV=2 -D F=2048"
( for b in 3 4 8 17 32; do kchk small-b$b $L8 $SMALL --dims B=$b,S=1,T=1024 --pos=900; done
  kchk small-b2s5 $L8 $SMALL --dims B=2,S=5,T=1024 --pos=700 ) > /tmp/ck_a.txt 2>&1 &
( kchk 8b-b32 $L8 --dims B=32,S=1,T=1024 --pos=1000
  kchk 1b-b8 $L1 --dims B=8,S=1,T=1024 --pos=1000 ) > /tmp/ck_b.txt 2>&1 &
( kchk g2b-b4 bench/attn/gemma_2b_layer.kiln --dims B=4,S=1,T=1024 --pos=1000
  kchk phi3-b4 samples/phi3_mini_layer.kiln --dims B=4,S=1,T=1024 --pos=1000 ) > /tmp/ck_c.txt 2>&1 &
for tool in racecheck memcheck; do
  ( timeout 150 $san --tool $tool --error-exitcode 9 build/kiln run $L8 $SMALL --dims B=8,S=1,T=512 --pos=400 \
      --random --check > "/tmp/san_$tool.txt" 2>&1
    echo "$tool B=8 rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "/tmp/san_$tool.txt" | tail -1)" ) > "/tmp/sanrc_$tool.txt" &
done
( cd build && timeout 200 ctest -R '^(test_api_gpu|test_decode_gpu)$' --output-on-failure > /tmp/ctest.txt 2>&1
  echo "ctest rc=$?" >> /tmp/ctest.txt ) &
wait
cat /tmp/ck_[abc].txt /tmp/sanrc_*.txt | tee "$OUT/checks.txt"
for f in /tmp/san_*.txt; do echo "==== $f"; grep -E "Race|Invalid|rror|hazard" "$f" | head -8; done >> "$OUT/checks.txt"
grep -E "tests passed|tests failed|Passed|Failed|passed,|rc=" /tmp/ctest.txt | tee -a "$OUT/checks.txt"
cp /tmp/ctest.txt "$OUT/ctest.txt"
echo "checks done $(el) s" | tee -a "$OUT/times.txt"
for r in 1 2; do
  for b in $OLD build/kiln; do prof $b 8b-b32 $L8 B=32,S=1,T=1024 $r 1000; done
  [ $r = 1 ] && for bb in 16 8 4 1; do for b in $OLD build/kiln; do prof $b 8b-b$bb $L8 B=$bb,S=1,T=1024 $r 1000; done; done
  [ $r = 1 ] && for b in $OLD build/kiln; do prof $b 1b-b8 $L1 B=8,S=1,T=1024 $r 1000; done
  echo "round $r done $(el) s" | tee -a "$OUT/times.txt"
done
sort "$OUT/table.txt"
bench_rows 8b-decode-b32 kiln,graph
cp /tmp/prof_*.txt "$OUT/" 2>/dev/null
