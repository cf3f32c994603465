#!/usr/bin/env bash
# bench/device/call_gu.sh — one device call over the slim build (carry build-gpu, with
# build-gpu/variants from bench/attn/push_variants.sh): why the gate/up GEMV of K = 2048 streams
# below the 8B layer's (Gemma-2B 72%, Llama-1B 80%, Llama-8B 95% of the floor in the H200
# profiles), decode attention in clusters of 16 with the push first (kiln_c16) or none (kiln_nc: 64 splits, the last CTA combines; both Gemma-2B only), the GEMV's weights through a shared-memory ring (kiln_ring), the decode attention of head dim 256 with the push kept (kiln_dpush) and the GEMV's
# L2 prefetch (kiln_pf), the prefill attention's measured knobs checked on every head dim.
#   1. `kiln run --check` (against the interpreter): prefill at S = 300 of the 8B layer (small
#      dims), Gemma-2B (head dim 256: the dynamic scheduler and cache hints), Gemma-2 (soft-cap,
#      window), Phi-3-mini (96); kiln_dpush at decode on Gemma-2B (B = 1, 3) and Gemma-2 (B = 1);
#      racecheck and memcheck of the Gemma-2B prefill (S = 300) and of kiln_dpush's decode;
#   2. ncu (no clock control) of the Gemma-2B layer's gate/up GEMV (default and kiln_ring) and
#      decode attention (default, kiln_c16, kiln_nc);
#   3. layer profiles, default and variants interleaved, two rounds (the first before 2.): Gemma-2B,
#      Phi-3-mini, 1B, 8B at B = 1; the 8B layer at B = 32 and 8 with RoPE and the cache write in
#      the QKV epilogue (default) and in decode attention ($ATTROPE, also checked at B = 8, 17, 32);
#      the 8B prefill at S = 2048 (default);
#   4. test_fault_gpu alone, if time is left.
# Results under $OUT. LIMIT (540)
DEFAULT_LIMIT=540
. "$(dirname "$0")/common.sh"
san=compute-sanitizer; command -v $san >/dev/null || san=/usr/local/cuda/bin/compute-sanitizer
NCU=ncu; command -v $NCU >/dev/null || NCU=/usr/local/cuda/bin/ncu
L8=samples/llama3_8b_layer.kiln
G2B=bench/attn/gemma_2b_layer.kiln
SMALL="-D D=1024 -D H=8 -D KV=2 -D F=2048"
ATTROPE=--disable=epilogue-rope,epilogue-cache-write # RoPE and the cache write in decode attention
chk() { # bin label args...
  local b=$1 l=$2; shift 2
  timeout 60 "$b" run "$@" --random --check > "/tmp/chk_$(basename "$b")_$l.txt" 2>&1
  rc=$?; echo "$(basename "$b") $l rc=$rc $(grep -E 'check step' "/tmp/chk_$(basename "$b")_$l.txt" | sort -t' ' -k1,1 | tail -2 | tr '\n' ' ' | cut -c1-160)"
}
( chk build/kiln 8b-s300 $L8 $SMALL --dims B=2,S=300,T=512 --pos=0
  chk build/kiln 8bs-b2 $L8 $SMALL --dims B=2,S=1,T=1024 --pos=900
  chk build/kiln g2b-b1 $G2B --dims B=1,S=1,T=1024 --pos=1000
  chk build/kiln g2b-s300 $G2B --dims B=1,S=300,T=512 --pos=0 ) > /tmp/checks_a.txt 2>&1 &
( chk build/kiln gemma2-s300 samples/gemma2_2b_layer.kiln --dims B=1,S=300,T=512 --pos=0
  chk build/kiln phi3-s300 samples/phi3_mini_layer.kiln --dims B=1,S=300,T=512 --pos=0 ) > /tmp/checks_b.txt 2>&1 &
( chk build/variants/kiln_ring g2b-b1 $G2B --dims B=1,S=1,T=1024 --pos=1000
  chk build/variants/kiln_ring g2b-b2 $G2B --dims B=2,S=1,T=1024 --pos=700
  chk build/variants/kiln_ring 1b-b1 samples/llama3_1b_layer.kiln --dims B=1,S=1,T=1024 --pos=1000
  chk build/variants/kiln_ring 8b-b1 $L8 --dims B=1,S=1,T=1024 --pos=1000
  chk build/variants/kiln_ring 8bs-b2 $L8 $SMALL --dims B=2,S=1,T=1024 --pos=900
  chk build/variants/kiln_ring phi3-b1 samples/phi3_mini_layer.kiln --dims B=1,S=1,T=1024 --pos=1000 ) > /tmp/checks_d.txt 2>&1 &
( chk build/variants/kiln_dpush g2b-b1 $G2B --dims B=1,S=1,T=1024 --pos=1000
  chk build/variants/kiln_c16 g2b-b1 $G2B --dims B=1,S=1,T=1024 --pos=1000
  chk build/variants/kiln_nc g2b-b1 $G2B --dims B=1,S=1,T=1024 --pos=1000
  chk build/variants/kiln_dpush g2b-b3 $G2B --dims B=3,S=1,T=1024 --pos=700
  chk build/variants/kiln_dpush gemma2-b1 samples/gemma2_2b_layer.kiln --dims B=1,S=1,T=1024 --pos=1000 ) > /tmp/checks_c.txt 2>&1 &
( chk build/kiln 8bs-b32-attrope $L8 $SMALL --dims B=32,S=1,T=1024 --pos=900 $ATTROPE
  chk build/kiln 8bs-b17-attrope $L8 $SMALL --dims B=17,S=1,T=1024 --pos=700 $ATTROPE
  chk build/kiln 8bs-b8-attrope $L8 $SMALL --dims B=8,S=1,T=1024 --pos=300 $ATTROPE ) > /tmp/checks_e.txt 2>&1 &
wait
cat /tmp/checks_[abcde].txt | tee "$OUT/checks.txt"
echo "checks done $(el) s" | tee -a "$OUT/times.txt"
# the ring's kernel against the reference (test_gpu_matmul's configurations 82-86), then its sweep
# at M = 1 against the deferred path (CUPTI kernel durations, standalone)
KILN_MM_FILTER=ring timeout 150 build/tests/gpu/test_gpu_matmul > "$OUT/mm_ring.log" 2>&1
echo "test_gpu_matmul ring rc=$? $(el) s" | tee -a "$OUT/times.txt"; tail -3 "$OUT/mm_ring.log"
round() {
  local r=$1
  for shape in "g2b-b1 $G2B B=1,S=1,T=1024" "phi3-b1 samples/phi3_mini_layer.kiln B=1,S=1,T=1024" \
    "1b-b1 samples/llama3_1b_layer.kiln B=1,S=1,T=1024" "8b-b1 $L8 B=1,S=1,T=1024"; do
    set -- $shape
    prof build/kiln "$1" "$2" "$3" $r
    for v in kiln_dpush kiln_pf kiln_ring; do prof build/variants/$v "$1" "$2" "$3" $r; done
  done
  prof build/variants/kiln_c16 g2b-b1 $G2B B=1,S=1,T=1024 $r
  prof build/variants/kiln_nc g2b-b1 $G2B B=1,S=1,T=1024 $r
  for b in 32 8; do
    prof build/kiln 8b-b$b $L8 B=$b,S=1,T=1024 $r 1000
    prof build/kiln 8b-b$b-attrope $L8 B=$b,S=1,T=1024 $r 1000 $ATTROPE
  done
}
round 1
echo "round 1 done $(el) s" | tee -a "$OUT/times.txt"
sanr() { # tool label bin args...
  local tool=$1 l=$2 b=$3; shift 3
  timeout 120 $san --tool "$tool" --error-exitcode 9 "$b" run "$@" --random --check > "/tmp/san_${tool}_$l.txt" 2>&1
  echo "==== $tool $l rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "/tmp/san_${tool}_$l.txt" | tail -1)"
}
for tool in racecheck memcheck; do
  sanr $tool g2b-s300 build/kiln $G2B -D D=512 -D F=1024 --dims B=1,S=300,T=512 --pos=0 > /tmp/sanrc_${tool}_p.txt &
  ( KILN_MM_SMALL=1 KILN_MM_FILTER=ring timeout 150 $san --tool $tool --error-exitcode 9 build/tests/gpu/test_gpu_matmul \
      > /tmp/san_${tool}_mmring.txt 2>&1
    echo "==== $tool mm-ring rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' /tmp/san_${tool}_mmring.txt | tail -1)" ) > /tmp/sanrc_${tool}_m.txt &
  sanr $tool 8bs-ring-b2 build/variants/kiln_ring $L8 $SMALL --dims B=2,S=1,T=512 --pos=400 > /tmp/sanrc_${tool}_r.txt &
  sanr $tool g2b-dpush-b1 build/variants/kiln_dpush $G2B -D D=512 -D F=1024 --dims B=1,S=1,T=512 --pos=400 > /tmp/sanrc_${tool}_d.txt &
done
wait
cat /tmp/sanrc_*.txt | tee "$OUT/san.txt"
for f in /tmp/san_*.txt; do echo "==== $f"; grep -E "Race|Invalid|Error|hazard" "$f" | head -8; done >> "$OUT/san.txt"
echo "sanitizers done $(el) s" | tee -a "$OUT/times.txt"
nc() { # label bin kernel-regex model dims
  left || return
  timeout 90 $NCU --clock-control none -k "regex:$3" -s 2 -c 1 --section SpeedOfLight --section MemoryWorkloadAnalysis \
    --section Occupancy --section WarpStateStats --section SchedulerStats --section LaunchStats \
    "$2" run "$4" --dims "$5" --random --pos=1000 --bench 5 > "$OUT/ncu_$1.txt" 2>&1
  echo "ncu $1 rc=$? $(el) s" | tee -a "$OUT/times.txt"
}
nc g2b-gu build/kiln '_k5_matmul' $G2B B=1,S=1,T=1024
nc g2b-gu-ring build/variants/kiln_ring '_k5_matmul' $G2B B=1,S=1,T=1024
nc g2b-att build/kiln '_attention' $G2B B=1,S=1,T=1024
nc g2b-att-c16 build/variants/kiln_c16 '_attention' $G2B B=1,S=1,T=1024
nc g2b-att-nc build/variants/kiln_nc '_attention' $G2B B=1,S=1,T=1024
if left; then
  KILN_BENCH=2 KILN_SWEEP_ONLY=1 KILN_SWEEP_M=1 KILN_SWEEP_SHAPES=1b. KILN_MM_FILTER='_dfr16|_ring' \
    KILN_BENCH_CSV="$OUT/ring_sweep.csv" timeout 90 build/tests/gpu/test_gpu_matmul > "$OUT/ring_sweep.log" 2>&1
  echo "ring sweep rc=$? $(el) s" | tee -a "$OUT/times.txt"
fi
round 2
prof build/kiln 8b-s2048 $L8 B=1,S=2048,T=2048 2 0
echo "profiles done $(el) s" | tee -a "$OUT/times.txt"
sort "$OUT/table.txt"
if [ "$(el)" -lt $((LIMIT - 150)) ]; then
  (cd build && timeout $((LIMIT - $(el) - 10)) ctest -R test_fault_gpu --output-on-failure) > "$OUT/fault.log" 2>&1
  echo "test_fault_gpu rc=$? $(el) s" | tee -a "$OUT/times.txt"
  tail -5 "$OUT/fault.log"
fi
