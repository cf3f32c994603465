#!/usr/bin/env bash
# bench/device/call_land.sh — the checks and timings that land the prefill epilogue defaults of
# this round (kiln_silu / kiln_sigmoid through __fdividef; the QKV epilogue's cooperative 128x256
# tile where N >= 4096 at the large-shape variant, KILN_CG_WG_QKV_WIDE 1), one call over the slim
# build (carry build-gpu, with build-gpu/variants/kiln_base: `kiln` of the tree before them):
#   1. `ctest -L gpu` (four at a time), and beside it `kiln run --check` where the new tile applies
#      (the 8B and Qwen3 layers at D=2048, H=16, KV=8: N = 4096, partial row tiles; full 8B widths
#      at S=130), SwiGLU at decode, the MoE layer's sigmoid gate, then compute-sanitizer memcheck and
#      racecheck of a small 8B prefill through the new tile;
#   2. profiles of the 8B prefill (S=2048; B=4 S=4096), the new build against kiln_base, two
#      interleaved rounds;
#   3. final_bench.sh with the time left: the decode profiles, then bench/run.sh's CASES (default the
#      8B prefill rows, 1B and 8B decode) for VARIANTS (default kiln,compile-graph).
# Each step only while under LIMIT (520). Results in $OUT.
DEFAULT_LIMIT=520
. "$(dirname "$0")/common.sh"
V=build/variants
L8=samples/llama3_8b_layer.kiln L1=samples/llama3_1b_layer.kiln Q3=samples/qwen3_8b_layer.kiln
W='-D D=2048 -D H=16 -D KV=8 -D F=512'
(cd build && timeout 320 ctest -L gpu --output-on-failure -j4 > "$OUT/ctest_gpu.log" 2>&1; echo "ctest rc=$?" >> "$OUT/ctest_gpu.log") &
{
  CHK_TIMEOUT=150 bchk build/kiln l8w $L8 $W --dims B=2,S=300,T=512 --pos=0 &
  CHK_TIMEOUT=150 bchk build/kiln l8w1 $L8 $W --dims B=1,S=1000,T=1024 --pos=0 &
  CHK_TIMEOUT=150 bchk build/kiln q3w $Q3 $W --dims B=2,S=300,T=512 --pos=0 &
  CHK_TIMEOUT=200 bchk build/kiln l8full $L8 --dims B=1,S=130,T=256 --pos=0 &
  CHK_TIMEOUT=150 bchk build/kiln l8dec $L8 $W --dims B=3,S=1,T=64 --steps 4 &
  CHK_TIMEOUT=150 bchk build/kiln moe samples/qwen_moe_layer.kiln -D D=256 -D H=2 -D FE=64 -D FS=128 -D E=8 --dims B=2,S=40,T=64 &
  wait
  for tool in memcheck racecheck; do
    timeout 200 $san --tool $tool --error-exitcode 9 build/kiln run $L8 $W --dims B=1,S=200,T=256 --pos=0 --random --check \
      > "$OUT/san_$tool.txt" 2>&1
    echo "$tool l8w rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/san_$tool.txt" | tail -1)"
  done
} 2>&1 | sed 's/^/  /' | tee -a "$OUT/checks.txt"
wait
echo "ctest + checks $(el) s: $(grep -E 'tests passed|tests failed' "$OUT/ctest_gpu.log" | tail -1) $(tail -1 "$OUT/ctest_gpu.log")" | tee -a "$OUT/times.txt"
grep -E "\*\*\*|Failed" "$OUT/ctest_gpu.log" | head -20
grep -E "^kiln_llama3_8b_layer_k1|wgmma" /tmp/chk_kiln_l8w.txt | head -3
prefill8b build/kiln $V/kiln_base
grep -E "^== |_k[1356]_matmul" "$OUT/profiles.txt" | cut -c1-150
# the rest: final_bench.sh (decode profiles, graph_gap, the bench rows with PyTorch) in what is left
LIMIT=$((LIMIT - $(el))) OUT="$OUT" CASES=${CASES:-8b-prefill-b4-4k,8b-prefill-2k,1b-decode,8b-decode} \
  VARIANTS=${VARIANTS:-kiln,compile-graph} bash "$(dirname "$0")/final_bench.sh" > "$OUT/final_bench.log" 2>&1
echo "final_bench rc=$? $(el) s" | tee -a "$OUT/times.txt"
tail -40 "$OUT/final_bench.log"
cat "$OUT/times.txt"
