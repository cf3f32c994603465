#!/usr/bin/env bash
# bench/attn/run.sh BUILD_DIR OUT_DIR — the attention prefill table: Kiln's attention_wgmma.cuh
# (tests/gpu/test_gpu_attention_wgmma with KILN_BENCH=1, after its correctness cases) against
# PyTorch SDPA's flash, cuDNN and efficient backends (bench/attn/sdpa.py) in the same run,
# TFLOP/s and % of the floor (FLOPs / the bf16 matmul ceiling measured by sdpa.py).
# Writes OUT_DIR/kiln_attn.log, sdpa.jsonl and attn_table.md. Needs an H100/H200 and PyTorch.
set -u
build=${1:-build}; out=${2:-bench-out}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
KILN_BENCH=1 "$build/tests/gpu/test_gpu_attention_wgmma" > "$out/kiln_attn.log" 2>&1; echo "kiln test rc=$?" >> "$out/kiln_attn.log"
python3 "$here/sdpa.py" > "$out/sdpa.jsonl" 2> "$out/sdpa.err"
python3 "$here/table.py" "$out/kiln_attn.log" "$out/sdpa.jsonl" > "$out/attn_table.md"
cat "$out/attn_table.md"
