#!/usr/bin/env bash
# bench/attn/run.sh BUILD_DIR OUT_DIR — the attention tables.
# Prefill: Kiln's attention_wgmma.cuh (tests/gpu/test_gpu_attention_wgmma with KILN_BENCH=1, after
# its correctness cases) against PyTorch SDPA's flash, cuDNN and efficient backends
# (bench/attn/sdpa.py) in the same run, TFLOP/s and % of the floor (FLOPs / the bf16 matmul
# ceiling measured by sdpa.py). Decode: Kiln's attention_decode.cuh (tests/gpu/test_gpu_attention
# with KILN_BENCH=1: B 1, 8, 32 x cache 1024, 8192, 32768, per launch inside a CUDA graph) against
# SDPA's backends (bench/attn/sdpa_decode.py), µs, TB/s and % of the floor (KV bytes / the read
# bandwidth `kiln ceilings` measures). DECODE_ONLY=1 skips the prefill table; KILN_DECODE_BENCH=2
# skips the decode test's correctness cases (run on their own, e.g. under compute-sanitizer).
# Writes OUT_DIR/kiln_attn.log, sdpa.jsonl, attn_table.md, kiln_decode.log, sdpa_decode.jsonl and
# decode_table.md. Needs an H100/H200 and PyTorch.
set -u
build=${1:-build}; out=${2:-bench-out}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
if [ "${DECODE_ONLY:-0}" = 0 ]; then
  KILN_BENCH=1 "$build/tests/gpu/test_gpu_attention_wgmma" > "$out/kiln_attn.log" 2>&1; echo "kiln test rc=$?" >> "$out/kiln_attn.log"
  python3 "$here/sdpa.py" > "$out/sdpa.jsonl" 2> "$out/sdpa.err"
  python3 "$here/table.py" "$out/kiln_attn.log" "$out/sdpa.jsonl" > "$out/attn_table.md"
  cat "$out/attn_table.md"
fi
KILN_BENCH=${KILN_DECODE_BENCH:-1} "$build/tests/gpu/test_gpu_attention" > "$out/kiln_decode.log" 2>&1; echo "kiln test rc=$?" >> "$out/kiln_decode.log"
python3 "$here/sdpa_decode.py" > "$out/sdpa_decode.jsonl" 2> "$out/sdpa_decode.err"
"$build/kiln" ceilings > "$out/ceilings.txt" 2>&1
python3 "$here/decode_table.py" "$out/kiln_decode.log" "$out/sdpa_decode.jsonl" "$out/ceilings.txt" > "$out/decode_table.md"
cat "$out/decode_table.md"
