#!/usr/bin/env bash
# bench/attn/device.sh — everything of issue 10's prefill part for one GPU call, results to $OUT:
# the old attention templates' GPU test (regression), the attention_wgmma correctness cases and
# the table with its tile sweep (bench/attn/run.sh), compute-sanitizer memcheck and racecheck on
# a subset of cases. Run from the repository root with a configured build/.
set -u
OUT=${OUT:-/tmp/attn-out}; mkdir -p "$OUT"
nvidia-smi -L > "$OUT/device.txt" 2>&1
( time timeout 120 build/tests/gpu/test_gpu_attention ) > "$OUT/old_attention.log" 2>&1; echo "rc=$?" >> "$OUT/old_attention.log"
timeout 300 bench/attn/run.sh build "$OUT" > /dev/null 2>&1
san=compute-sanitizer; command -v $san >/dev/null || san=/usr/local/cuda/bin/compute-sanitizer
for tool in memcheck racecheck; do
  ( KILN_CASES=${KILN_SAN_CASES:-0,3,9,16,20} timeout 150 $san --tool $tool build/tests/gpu/test_gpu_attention_wgmma ) > "$OUT/san_$tool.log" 2>&1
  echo "rc=$?" >> "$OUT/san_$tool.log"
done
tail -3 "$OUT"/*.log
