#!/usr/bin/env bash
# bench/wgmma/qkv_epi_device.sh — the QKV epilogue's rotation hoisted out of the per-pair loop
# (matmul_wgmma.cuh kwg_qkv_stage), on a GPU, against the build before it (carry build-gpu with
# build-gpu/variants/kiln_base and kiln_sweep_base built from the parent commit):
#   1. checks: tests/gpu/qkv_epilogue_gpu.sh and qk_norm_gpu.sh with the new kiln;
#   2. kiln_sweep over QKV and QKV+rope (every candidate, cuBLAS beside each; EPI_SHAPES picks other
#      shapes, e.g. EPI_SHAPES=gate/up,gate/up+swiglu) for the base and the new build, interleaved,
#      two rounds;
#   3. 8B prefill profiles (S=2048; B=4 S=4096) base and new interleaved, two rounds;
#   4. kiln_sweep of the new build over every 8B GEMM with and without its fused epilogue.
# Each step only while under LIMIT (DEFAULT 330). Results in $OUT.
DEFAULT_LIMIT=330
. "$(dirname "$0")/../device/common.sh"
V=build/variants
for t in qkv_epilogue_gpu qk_norm_gpu; do
  timeout 150 bash tests/gpu/$t.sh build/kiln > "$OUT/$t.log" 2>&1
  echo "$t rc=$? $(el) s: $(grep -cE '^ok|PASS|passed' "$OUT/$t.log") ok lines; $(tail -1 "$OUT/$t.log")" | tee -a "$OUT/times.txt"
done
sweeps qkv_sweep.txt "${EPI_SHAPES:-QKV,QKV+rope}" $V/kiln_sweep_base build/bench/kiln_sweep
prefill8b $V/kiln_base build/kiln
grep -E "^== |_k1_matmul" "$OUT/profiles.txt" | cut -c1-140
left && { timeout $((LIMIT - $(el))) build/bench/kiln_sweep "$OUT/kiln_sweep_epi.csv" > "$OUT/kiln_sweep_epi.log" 2>&1; echo "kiln_sweep epi rc=$? $(el) s"; grep SUMMARY "$OUT/kiln_sweep_epi.log"; }
