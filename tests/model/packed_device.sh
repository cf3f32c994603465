#!/usr/bin/env bash
# tests/model/packed_device.sh — packed variable-length prefill on the GPU machine in one call
# (over a carried build/ with its kernel cache build/kcache, filled on the CPU machine by
# `KILN_MODEL_WARM=1 build/tests/model/test_packed_gpu ...`): test_packed_gpu (ragged and chunked
# packed prefill against each prompt unpadded, kiln_generate with the packed model),
# compute-sanitizer memcheck of one packed prefill (KILN_PACKED_ONE=1), then the transformers
# checkpoints (tests/model/hf_reference.py) and `kiln generate --batch-file` on their three ragged
# prompts with and without --packed beside transformers' greedy tokens. Results under $OUT.
# About 80 s of wall time with the kernels in the cache (fill it on the CPU machine first:
#   KILN_MODEL_WARM=1 KILN_CACHE_DIR=$PWD/build/kcache build/tests/model/test_packed_gpu \
#     samples/models/llama3_2_1b.kiln NL=2 V=512 D=256 H=4 KV=2 F=512
# and test_model_gpu's KILN_MODEL_WARM=1 run for the per-length `kiln generate`).
set -u
out=${OUT:-/tmp/out}
mkdir -p "$out" build/hf
export KILN_CACHE_DIR=$PWD/build/kcache
small="NL=2 V=512 D=256 H=4 KV=2 F=512"
py=python3
[ -x /opt/torch/.venv/bin/python3 ] && py=/opt/torch/.venv/bin/python3
t0=$(date +%s)
timeout 35 build/tests/model/test_packed_gpu samples/models/llama3_2_1b.kiln $small > "$out/packed.txt" 2>&1
echo "test_packed_gpu rc=$? ($(( $(date +%s) - t0 )) s)" | tee "$out/summary.txt"
grep -E "logits|caches|generate|table|passed|CHECK" "$out/packed.txt" >> "$out/summary.txt"
t1=$(date +%s)
KILN_PACKED_ONE=1 timeout 30 compute-sanitizer --tool memcheck --leak-check full --error-exitcode 9 \
  build/tests/model/test_packed_gpu samples/models/llama3_2_1b.kiln $small > "$out/memcheck.txt" 2>&1
echo "memcheck (one packed prefill) rc=$? ($(( $(date +%s) - t1 )) s)" | tee -a "$out/summary.txt"
tail -6 "$out/memcheck.txt" >> "$out/summary.txt"
t2=$(date +%s)
timeout 25 $py tests/model/hf_reference.py llama:build/hf/llama:build/hf/llama.json > "$out/models.txt" 2>&1
echo "hf_reference rc=$? ($(( $(date +%s) - t2 )) s)" | tee -a "$out/summary.txt"
$py - > build/hf/batch.txt <<'PY'
import json
r = json.load(open("build/hf/llama.json"))
for p in r["prompts"]:
    print(",".join(map(str, p["prompt"])))
PY
D=""
for d in $small; do D="$D -D $d"; done
{
  echo "kiln generate --batch-file (per-length prefill):"
  timeout 10 build/kiln generate samples/models/llama3_2_1b.kiln --weights build/hf/llama --batch-file build/hf/batch.txt \
    --max-new 33 --max-seq 64 $D
  echo "kiln generate --batch-file --packed:"
  timeout 10 build/kiln generate samples/models/llama3_2_1b.kiln --weights build/hf/llama --batch-file build/hf/batch.txt \
    --max-new 33 --max-seq 64 --packed $D
  echo "kiln generate --batch-file --packed --prefill-chunk 3:"
  timeout 10 build/kiln generate samples/models/llama3_2_1b.kiln --weights build/hf/llama --batch-file build/hf/batch.txt \
    --max-new 33 --max-seq 64 --packed --prefill-chunk 3 $D
  echo "transformers' greedy:"
  $py -c "import json; [print(','.join(map(str, p['greedy']))) for p in json.load(open('build/hf/llama.json'))['prompts']]"
} > "$out/cli.txt" 2>&1
cat "$out/cli.txt" >> "$out/summary.txt"
cat "$out/summary.txt"
