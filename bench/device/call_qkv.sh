#!/usr/bin/env bash
# bench/device/call_qkv.sh — the QKV epilogue's tile at large M (KILN_CG_WG_QKV_WIDE): one device
# call over the slim build (carry build-gpu with build-gpu/variants/kiln_qkvwide from
# bench/attn/push_variants.sh build qkvwide "-DKILN_CG_WG_QKV_WIDE=1"):
#   1. `kiln run --check` of kiln_qkvwide where its rule applies (two waves of 128x256 tiles):
#      the 8B layer (head dim 128) and the 1B (head dim 64, a partial last column tile) at small
#      widths and long prefills, Qwen3 (the per-head q/k norm in the epilogue);
#   2. prefill profiles (`--profile --profile-runs=10`), default and kiln_qkvwide interleaved,
#      three rounds: 8B at B=1 S=2048 and B=4 S=4096, 1B at B=4 S=2048, Qwen3-8B at B=1 S=2048.
# LIMIT (400)
DEFAULT_LIMIT=400
. "$(dirname "$0")/common.sh"
L8=samples/llama3_8b_layer.kiln L1=samples/llama3_1b_layer.kiln Q3=samples/qwen3_8b_layer.kiln
W=build/variants/kiln_qkvwide
kchk2() { local l=$1; shift; timeout 150 "$@" --random --check > "/tmp/chk_$l.txt" 2>&1; echo "check $l rc=$? $(grep -E 'check step' "/tmp/chk_$l.txt" | tail -1 | cut -c1-110)"; }
( kchk2 l8 $W run $L8 -D D=512 -D H=4 -D KV=2 -D F=512 --dims B=4,S=2400,T=2400 --pos=0
  kchk2 l8-plan $W compile $L8 -D D=512 -D H=4 -D KV=2 -D F=512 -D B=4 -D S=2400 -D T=2400 --emit=plan ) > /tmp/ck_a.txt 2>&1 &
( kchk2 l1 $W run $L1 -D D=256 -D H=4 -D KV=1 -D F=512 --dims B=8,S=2200,T=2200 --pos=0 ) > /tmp/ck_b.txt 2>&1 &
( kchk2 q3 $W run $Q3 -D D=512 -D H=4 -D KV=2 -D F=512 --dims B=4,S=2400,T=2400 --pos=0 ) > /tmp/ck_c.txt 2>&1 &
wait
cat /tmp/ck_[abc].txt | tee "$OUT/checks.txt"
grep -h "k1 " /tmp/chk_l8-plan.txt | head -3 | tee -a "$OUT/checks.txt"
echo "checks done $(el) s" | tee -a "$OUT/times.txt"
pp() { # bin label model dims round
  left || return
  local f=/tmp/pp_$(basename "$1")_$2_$5.txt
  timeout 90 "$1" run "$3" --dims "$4" --random --pos=0 --profile --profile-runs=10 > "$f" 2>&1
  rc=$?; { echo "== $(basename "$1") $2 round $5 rc=$rc ($(el) s)"; grep -E "^kiln_|^layer" "$f"; } >> "$OUT/profiles.txt"
  echo "$2 $(basename "$1") r$5: $(grep -E '^layer' "$f" | head -1 | cut -c1-70) | $(grep -E '_k1_matmul' "$f" | head -1 | awk '{for(i=1;i<=NF;i++) if($i=="us"){print $(i-1)" us"; exit}}')" >> "$OUT/table.txt"
}
for r in 1 2 3; do
  for b in build/kiln $W; do pp $b 8b-s2048 $L8 B=1,S=2048,T=2048 $r; done
  for b in $W build/kiln; do pp $b 8b-b4s4096 $L8 B=4,S=4096,T=4096 $r; done
  for b in build/kiln $W; do pp $b 1b-b4s2048 $L1 B=4,S=2048,T=2048 $r; done
  for b in $W build/kiln; do pp $b q3-s2048 $Q3 B=1,S=2048,T=2048 $r; done
done
sort "$OUT/table.txt"
