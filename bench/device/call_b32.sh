#!/usr/bin/env bash
# bench/device/call_b32.sh — the 8B layer's batched decode (issue 9's B = 32 target) in one short
# device call over the slim build (carry build-gpu with build-gpu/variants from
# bench/gemv/build_variants.sh: kiln-d83 (bit 6: O's and down's residual in registers from each
# tile's start, not the QKV epilogue's), kiln-d147 (bit 7: the tile's end without a round trip),
# kiln-d211 (both)), each also with RoPE and the cache write moved into attention ($ATTROPE):
#   1. `kiln run --check` of each variant, with and without $ATTROPE, on the 8B layer at small dims
#      (B = 1, 17, 32) and d211 + $ATTROPE on the full layer at B = 32; racecheck and memcheck of
#      d211 + $ATTROPE at B = 32 (small dims);
#   2. layer profiles, two rounds interleaved: the 8B layer at B = 32 (default and the three
#      variants, each with and without $ATTROPE); in the first round also B = 8 and 16 (default
#      and d211, with and without) and B = 1 (default and d211);
#   3. the raw profiles into $OUT (packed into $OUT/all.tgz on exit by common.sh).
# LIMIT (240)
DEFAULT_LIMIT=240
. "$(dirname "$0")/common.sh"
L8=samples/llama3_8b_layer.kiln V=build/variants
SMALL="-D D=1024 -D H=8 -D KV=2 -D F=2048"
ATTROPE=--disable=epilogue-rope,epilogue-cache-write
san=compute-sanitizer; command -v $san >/dev/null || san=/usr/local/cuda/bin/compute-sanitizer
chk() { # bin label args...
  local b=$1 l=$2; shift 2
  timeout 60 "$b" run "$@" --random --check > "/tmp/chk_$(basename "$b")_$l.txt" 2>&1
  rc=$?; echo "$(basename "$b") $l rc=$rc $(grep -E 'check step' "/tmp/chk_$(basename "$b")_$l.txt" | tail -1 | cut -c1-100)"
}
for v in kiln-d83 kiln-d147 kiln-d211; do
  ( for a in "" "$ATTROPE"; do
      t=${a:+-ar}
      chk $V/$v b1$t $L8 $SMALL --dims B=1,S=1,T=1024 --pos=1000 $a
      chk $V/$v b17$t $L8 $SMALL --dims B=17,S=1,T=1024 --pos=900 $a
      chk $V/$v b32$t $L8 $SMALL --dims B=32,S=1,T=1024 --pos=1000 $a
    done ) > "/tmp/ck_$v.txt" 2>&1 &
done
chk $V/kiln-d211 8b-b32-ar $L8 --dims B=32,S=1,T=1024 --pos=1000 $ATTROPE > /tmp/ck_full.txt 2>&1 &
for tool in racecheck memcheck; do
  ( timeout 120 $san --tool $tool --error-exitcode 9 $V/kiln-d211 run $L8 $SMALL --dims B=32,S=1,T=512 \
      --pos=400 --random --check $ATTROPE > "/tmp/san_$tool.txt" 2>&1
    echo "$tool kiln-d211 attrope B=32 rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "/tmp/san_$tool.txt" | tail -1)" ) \
    > "/tmp/sanrc_$tool.txt" &
done
wait
cat /tmp/ck_*.txt /tmp/sanrc_*.txt | tee "$OUT/checks.txt"
for f in /tmp/san_*.txt; do echo "==== $f"; grep -E "Race|Invalid|rror|hazard" "$f" | head -8; done >> "$OUT/checks.txt"
echo "checks done $(el) s" | tee -a "$OUT/times.txt"
for r in 1 2; do
  for b in build/kiln $V/kiln-d83 $V/kiln-d147 $V/kiln-d211; do
    prof $b 8b-b32 $L8 B=32,S=1,T=1024 $r 1000
    prof $b 8b-b32-ar $L8 B=32,S=1,T=1024 $r 1000 $ATTROPE
  done
  [ $r = 1 ] && for bb in 8 16; do
    for b in build/kiln $V/kiln-d211; do
      prof $b 8b-b$bb $L8 B=$bb,S=1,T=1024 $r 1000
      prof $b 8b-b$bb-ar $L8 B=$bb,S=1,T=1024 $r 1000 $ATTROPE
    done
  done
  [ $r = 1 ] && for b in build/kiln $V/kiln-d211; do prof $b 8b-b1 $L8 B=1,S=1,T=1024 $r; done
  echo "round $r done $(el) s" | tee -a "$OUT/times.txt"
done
sort "$OUT/table.txt"
cp /tmp/prof_*.txt "$OUT/" 2>/dev/null
