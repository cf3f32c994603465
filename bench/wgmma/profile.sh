#!/bin/sh
# bench/wgmma/profile.sh — Nsight Compute on one launch of cuBLAS and of each configuration
# (QKV shape, M=2048), after run.sh has built /tmp/wgmma_bench. Clocks left alone.
out=${OUT:-/tmp/wgmma_out}
ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1 || ls /usr/local/cuda/bin/ncu)
timeout 150 $ncu --clock-control none -k regex:"kwg|nvjet|sm90" --section SpeedOfLight --section ComputeWorkloadAnalysis \
    --section MemoryWorkloadAnalysis --section WarpStateStats --section Occupancy /tmp/wgmma_bench profile >"$out/ncu.txt" 2>&1
echo "ncu rc=$?"
grep -E "^  [a-zA-Z_].*\(|kwg|nvjet|Duration|SM Busy|Compute \(SM\) Throughput|Memory Throughput|L1/TEX Cache Throughput|L2 Cache Throughput|DRAM Throughput|Issue Slots Busy|Shared Memory|Executed Ipc Active|Stall|Warp Cycles Per Issued|Max Bandwidth|Mem Busy|Mem Pipes Busy" "$out/ncu.txt" | grep -v "^    ---" | cut -c1-150 | head -150
