#!/usr/bin/env bash
# bench/device/call_resregs.sh — the first GPU run of the later rounds' residual in registers
# (matmul_wgmma.cuh KILN_WGMMA_RES_REGS; codegen knob KILN_CG_WG_RES_REGS, off on main), one call
# over the slim build (carry build-gpu, with build-gpu/variants/kiln_resregs and kiln_sweep_resregs
# from `bash bench/attn/push_variants.sh build resregs "-DKILN_CG_WG_RES_REGS=1"`, copied and
# stripped). On an H200, bench/run.sh's rows come first (ROWS=0 skips them; CASES and VARIANTS as
# in call_last.sh). Then:
#   1. side by side: test_gpu_matmul's configurations with it (KILN_MM_FILTER=_o192: the cooperative
#      128x256 and 256x128 tiles, f16 whose later rounds stay with TMA), the same under
#      compute-sanitizer memcheck and racecheck (the small cases), and `kiln run --check` of the
#      variant where codegen applies it (call_restma.sh's shapes);
#   2. kiln_sweep O+res and down+res at M = 2048 and 16384, main against kiln_sweep_resregs, two rounds;
#   3. the 8B prefill profiles (S = 2048; B=4 S=4096), main against kiln_resregs, two rounds.
# Each step only while under LIMIT (540). Results in $OUT.
DEFAULT_LIMIT=540
. "$(dirname "$0")/common.sh"
if [ "${ROWS:-1}" = 1 ] && grep -q H200 "$OUT/gpu.txt"; then
  bench_rows "${CASES:-8b-prefill-b4-4k,8b-prefill-2k,1b-decode,8b-decode}" "${VARIANTS:-kiln,compile-graph}"
fi
V=build/variants
L8=samples/llama3_8b_layer.kiln
W='-D D=2048 -D H=16 -D KV=8 -D F=512'
# the correctness steps side by side (none of them is timed)
( KILN_MM_FILTER=_o192 timeout 170 build/tests/gpu/test_gpu_matmul > "$OUT/mm_o192.log" 2>&1
  echo "test_gpu_matmul _o192 rc=$? $(el) s: $(grep -E 'passed|failed' "$OUT/mm_o192.log" | tail -1)" ) | tee -a "$OUT/times.txt" &
for tool in memcheck racecheck; do
  ( KILN_MM_SMALL=1 KILN_MM_FILTER=_o192 timeout 150 $san --tool $tool --error-exitcode 9 build/tests/gpu/test_gpu_matmul \
      > "$OUT/san_$tool.txt" 2>&1
    echo "$tool _o192 rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/san_$tool.txt" | tail -1)" ) \
    | tee -a "$OUT/times.txt" &
done
{
  CHK_TIMEOUT=150 bchk $V/kiln_resregs l8w $L8 $W --dims B=2,S=300,T=512 --pos=0 &
  CHK_TIMEOUT=200 bchk $V/kiln_resregs l8full $L8 --dims B=1,S=130,T=256 --pos=0 &
  CHK_TIMEOUT=150 bchk $V/kiln_resregs l1 samples/llama3_1b_layer.kiln -D D=256 -D H=4 -D KV=1 -D F=512 --dims B=8,S=220,T=256 --pos=0 &
  CHK_TIMEOUT=150 bchk $V/kiln_resregs q3w samples/qwen3_8b_layer.kiln $W --dims B=2,S=300,T=512 --pos=0 &
  wait
} 2>&1 | sed 's/^/  /' | tee -a "$OUT/checks.txt"
wait
echo "checks done $(el) s" | tee -a "$OUT/times.txt"
KILN_SWEEP_M=2048 sweeps sweep.txt O+res,down+res build/bench/kiln_sweep $V/kiln_sweep_resregs
KILN_SWEEP_M=16384 sweeps sweep16k.txt O+res,down+res build/bench/kiln_sweep $V/kiln_sweep_resregs
prefill8b build/kiln $V/kiln_resregs
grep -E "^== |_k[36]_matmul" "$OUT/profiles.txt" | cut -c1-150
cat "$OUT/times.txt"
