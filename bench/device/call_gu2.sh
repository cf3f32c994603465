#!/usr/bin/env bash
# bench/device/call_gu2.sh — the short form of call_gu.sh for a call with little device time left:
# over the slim build (carry build-gpu with build-gpu/variants), in order while under LIMIT (280):
#   1. `kiln run --check` (against the interpreter): kiln_ring at decode (Gemma-2B B = 1 and 2, 1B,
#      8B small dims B = 2), kiln_dpush / kiln_nc / kiln_c16 on Gemma-2B B = 1, the default's prefill
#      at S = 300 (8B small dims, Gemma-2B: the prefill attention's new configuration);
#   2. test_gpu_matmul's ring configurations against the reference;
#   3. layer profiles at B = 1 over 1024 keys: Gemma-2B (default, ring, dpush, nc, c16), 1B
#      (default, ring, pf), 8B and Phi-3-mini (default, ring);
#   4. racecheck and memcheck of the ring configurations (KILN_MM_SMALL);
#   5. the profiles again (a second round).
DEFAULT_LIMIT=280
. "$(dirname "$0")/common.sh"
san=compute-sanitizer; command -v $san >/dev/null || san=/usr/local/cuda/bin/compute-sanitizer
L8=samples/llama3_8b_layer.kiln
G2B=bench/attn/gemma_2b_layer.kiln
SMALL="-D D=1024 -D H=8 -D KV=2 -D F=2048"
V=build/variants
chk() { # bin label args...
  local b=$1 l=$2; shift 2
  timeout 60 "$b" run "$@" --random --check > "/tmp/chk_$(basename "$b")_$l.txt" 2>&1
  rc=$?; echo "$(basename "$b") $l rc=$rc $(grep -E 'check step' "/tmp/chk_$(basename "$b")_$l.txt" | tail -1 | cut -c1-100)"
}
( chk $V/kiln_ring g2b-b1 $G2B --dims B=1,S=1,T=1024 --pos=1000
  chk $V/kiln_ring g2b-b2 $G2B --dims B=2,S=1,T=1024 --pos=700
  chk $V/kiln_ring 1b-b1 samples/llama3_1b_layer.kiln --dims B=1,S=1,T=1024 --pos=1000
  chk $V/kiln_ring 8bs-b2 $L8 $SMALL --dims B=2,S=1,T=1024 --pos=900 ) > /tmp/checks_a.txt 2>&1 &
( chk $V/kiln_dpush g2b-b1 $G2B --dims B=1,S=1,T=1024 --pos=1000
  chk $V/kiln_nc g2b-b1 $G2B --dims B=1,S=1,T=1024 --pos=1000
  chk $V/kiln_c16 g2b-b1 $G2B --dims B=1,S=1,T=1024 --pos=1000 ) > /tmp/checks_b.txt 2>&1 &
( chk build/kiln 8bs-s300 $L8 $SMALL --dims B=2,S=300,T=512 --pos=0
  chk build/kiln g2b-s300 $G2B --dims B=1,S=300,T=512 --pos=0 ) > /tmp/checks_c.txt 2>&1 &
wait
cat /tmp/checks_[abc].txt | tee "$OUT/checks.txt"
echo "checks done $(el) s" | tee -a "$OUT/times.txt"
KILN_MM_FILTER=ring timeout 100 build/tests/gpu/test_gpu_matmul > "$OUT/mm_ring.log" 2>&1
echo "test_gpu_matmul ring rc=$? $(el) s" | tee -a "$OUT/times.txt"; grep -E "FAIL|passed|failed" "$OUT/mm_ring.log" | tail -4
round() {
  prof build/kiln g2b-b1 $G2B B=1,S=1,T=1024 $1
  for v in kiln_ring kiln_dpush kiln_nc kiln_c16; do prof $V/$v g2b-b1 $G2B B=1,S=1,T=1024 $1; done
  for b in build/kiln $V/kiln_ring $V/kiln_pf; do prof $b 1b-b1 samples/llama3_1b_layer.kiln B=1,S=1,T=1024 $1; done
  for b in build/kiln $V/kiln_ring; do prof $b 8b-b1 $L8 B=1,S=1,T=1024 $1; done
  for b in build/kiln $V/kiln_ring; do prof $b phi3-b1 samples/phi3_mini_layer.kiln B=1,S=1,T=1024 $1; done
}
round 1
echo "round 1 done $(el) s" | tee -a "$OUT/times.txt"
if left; then
  for tool in racecheck memcheck; do
    ( KILN_MM_SMALL=1 KILN_MM_FILTER=ring timeout 100 $san --tool $tool --error-exitcode 9 build/tests/gpu/test_gpu_matmul \
        > /tmp/san_$tool.txt 2>&1
      echo "==== $tool mm-ring rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' /tmp/san_$tool.txt | tail -1)" ) > /tmp/sanrc_$tool.txt &
  done
  wait
  cat /tmp/sanrc_*.txt | tee "$OUT/san.txt"
  echo "sanitizers done $(el) s" | tee -a "$OUT/times.txt"
fi
round 2
echo "round 2 done $(el) s" | tee -a "$OUT/times.txt"
sort "$OUT/table.txt"
