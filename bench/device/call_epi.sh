#!/usr/bin/env bash
# bench/device/call_epi.sh — the prefill epilogues, one call (carry build-gpu: the pack of
# scripts/gpu_pack.sh for main, plus in build-gpu/variants/
#   kiln_silu, kiln_sweep_silu  kiln and bench/kiln_sweep built from dbb1b9a (branch silu-fdividef:
#                               kiln_silu / kiln_sigmoid dividing with __fdividef, not on main yet),
#   kiln_epiwarm                bench/attn/push_variants.sh build epiwarm "-DKILN_CG_WG_EPI_WARM=1",
#   kiln_qkvwide                bench/attn/push_variants.sh build qkvwide "-DKILN_CG_WG_QKV_WIDE=1"):
#   1. `ctest -L gpu` (four at a time) on main;
#   2. `kiln run --check` of kiln_silu (SwiGLU, MoE's gated experts and a sigmoid gate), kiln_qkvwide
#      and kiln_epiwarm where their rules apply (the cooperative QKV tile's instantiation of
#      kwg_qkv_stage has never run under --check; call_qkv.sh's shapes);
#   3. kiln_sweep gate/up, gate/up+swiglu, O, O+res: main against kiln_sweep_silu, two interleaved rounds;
#   4. 8B prefill profiles (S=2048; B=4 S=4096): main, kiln_silu, kiln_epiwarm, kiln_qkvwide, two rounds.
# Each step only while under LIMIT (560). Results in $OUT.
DEFAULT_LIMIT=560
. "$(dirname "$0")/common.sh"
V=build/variants
L8=samples/llama3_8b_layer.kiln L1=samples/llama3_1b_layer.kiln Q3=samples/qwen3_8b_layer.kiln
(cd build && timeout 330 ctest -L gpu --output-on-failure -j4 > "$OUT/ctest_gpu.log" 2>&1; echo "ctest rc=$?" >> "$OUT/ctest_gpu.log")
echo "ctest $(el) s: $(grep -E 'tests passed|tests failed' "$OUT/ctest_gpu.log" | tail -1) $(tail -1 "$OUT/ctest_gpu.log")" | tee -a "$OUT/times.txt"
grep -E "\*\*\*|Failed" "$OUT/ctest_gpu.log" | head -20
S8='-D D=512 -D H=4 -D KV=2 -D F=512'
{
  CHK_TIMEOUT=150 bchk $V/kiln_qkvwide l8 $L8 $S8 --dims B=4,S=2400,T=2400 --pos=0 &
  CHK_TIMEOUT=150 bchk $V/kiln_qkvwide l1 $L1 -D D=256 -D H=4 -D KV=1 -D F=512 --dims B=8,S=2200,T=2200 --pos=0 &
  CHK_TIMEOUT=150 bchk $V/kiln_qkvwide q3 $Q3 $S8 --dims B=4,S=2400,T=2400 --pos=0 &
  CHK_TIMEOUT=150 bchk $V/kiln_epiwarm l8 $L8 $S8 --dims B=4,S=2400,T=2400 --pos=0 &
  CHK_TIMEOUT=150 bchk $V/kiln_silu l8 $L8 $S8 --dims B=2,S=300,T=512 &
  CHK_TIMEOUT=150 bchk $V/kiln_silu l8dec $L8 $S8 --dims B=3,S=1,T=64 --steps 4 &
  CHK_TIMEOUT=150 bchk $V/kiln_silu moe samples/qwen_moe_layer.kiln -D D=256 -D H=2 -D FE=64 -D FS=128 -D E=8 --dims B=2,S=40,T=64 &
  wait
} 2>&1 | sed 's/^/  /' | tee -a "$OUT/checks.txt"
echo "checks done $(el) s" | tee -a "$OUT/times.txt"
KILN_SWEEP_M=2048 sweeps sweep.txt gate/up,gate/up+swiglu,O,O+res build/bench/kiln_sweep $V/kiln_sweep_silu
prefill8b build/kiln $V/kiln_silu $V/kiln_epiwarm $V/kiln_qkvwide
grep -E "^== |_k[1356]_matmul" "$OUT/profiles.txt" | cut -c1-150
cat "$OUT/times.txt"
