#!/usr/bin/env bash
# bench/device/call_tail.sh — what call_resregs.sh leaves for a second call on the same warm machine
# (same carry: build-gpu with its variants): `ctest -L gpu -E test_gpu_matmul` (common.sh gpu_ctest:
# the sharded QKV-epilogue, QK-norm and `kiln run` GPU tests, test_api_gpu's misaligned residual),
# then on an H200 the 8B decode B=32 row against PyTorch eager in a CUDA graph (issue 9's B=32
# target, last measured 2026-12-06), then ncu of the three plain QKV candidates as in
# call_resregs.sh's step 5. Each step only while under LIMIT (560). Results in $OUT.
DEFAULT_LIMIT=560
. "$(dirname "$0")/common.sh"
clocks_bg
gpu_ctest
grep -q H200 "$OUT/gpu.txt" && bench_rows 8b-decode-b32 kiln,graph
NCU=ncu; command -v $NCU >/dev/null || NCU=/usr/local/cuda/bin/ncu
for c in 0 1 4; do
  left || break
  KILN_SWEEP_M=2048 KILN_SWEEP_SHAPES=QKV KILN_SWEEP_ONLY=$c timeout $((LIMIT - $(el))) $NCU --clock-control none \
    -k regex:kiln_mm --launch-skip 2 --launch-count 1 --section SpeedOfLight --section ComputeWorkloadAnalysis \
    --section WarpStateStats --section MemoryWorkloadAnalysis build/bench/kiln_sweep > "$OUT/ncu_qkv_c$c.txt" 2>&1
  echo "ncu QKV candidate $c rc=$? $(el) s" | tee -a "$OUT/times.txt"
  grep -E "Duration|Compute \(SM\) Throughput|Issue Slots Busy|Executed Ipc A|Shared Memory|Stall" "$OUT/ncu_qkv_c$c.txt" | head -12
done
cat "$OUT/times.txt"
