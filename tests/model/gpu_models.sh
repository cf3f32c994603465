#!/usr/bin/env bash
# tests/model/gpu_models.sh — the whole-model GPU tests on the GPU machine, over
# a carried build/ (KILN_CACHE_DIR may point at a kernel cache filled by
# `KILN_MODEL_WARM=1 build/tests/model/test_model_gpu ...` on a machine with the
# same NVRTC). Builds the random-weight transformers checkpoints and references
# (tests/model/hf_reference.py), runs test_model_gpu on the Llama and the Qwen2
# model, kiln generate and the embedding sample; then the checkpoint load speed
# (GPU_MODELS_LOAD=0 skips the 2.5 GB checkpoint and its load). Results under ${OUT:-/tmp/out}.
set -u
out=${OUT:-/tmp/out}
mkdir -p "$out" build/hf
py=python3
[ -x /opt/torch/.venv/bin/python3 ] && py=/opt/torch/.venv/bin/python3
small="NL=2 V=512 D=256 H=4 KV=2 F=512"
rc=0
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/device.txt"
load=${GPU_MODELS_LOAD:-1}
ck=""; [ "$load" = 1 ] && ck=ckpt1b:/tmp/ckpt1b
$py tests/model/hf_reference.py llama:build/hf/llama:build/hf/llama.json qwen2:build/hf/qwen2:build/hf/qwen2.json \
  $ck > "$out/models.txt" 2>&1 || rc=1
tail -5 "$out/models.txt"
ls build/hf/llama | tee -a "$out/models.txt"
build/tests/model/test_model_gpu samples/models/llama3_2_1b.kiln build/hf/llama build/hf/llama.json $small \
  > "$out/llama.txt" 2>&1 || rc=1
tail -20 "$out/llama.txt"
build/tests/model/test_model_gpu samples/models/qwen2_5_0_5b.kiln build/hf/qwen2 build/hf/qwen2.json $small \
  > "$out/qwen2.txt" 2>&1 || rc=1
tail -20 "$out/qwen2.txt"
D=""
for d in $small; do D="$D -D $d"; done
prompt=$($py -c "import json; print(','.join(map(str, json.load(open('build/hf/llama.json'))['prompt'])))")
{
  echo "kiln generate (greedy):"
  build/kiln generate samples/models/llama3_2_1b.kiln --weights build/hf/llama --prompt-ids "$prompt" --max-new 33 \
    --buckets 1 --max-seq 64 $D
  echo "transformers' greedy:"
  $py -c "import json; print(','.join(map(str, json.load(open('build/hf/llama.json'))['greedy'])))"
  echo "kiln generate (temperature 0.8, top-k 20, top-p 0.9, seed 5):"
  build/kiln generate samples/models/llama3_2_1b.kiln --weights build/hf/llama --prompt-ids "$prompt" --max-new 33 \
    --buckets 1 --max-seq 64 --temperature 0.8 --top-k 20 --top-p 0.9 --seed 5 $D
  echo "samples/embed:"
  build/samples/embed/kiln_embed samples/models/llama3_2_1b.kiln - 16
} > "$out/cli.txt" 2>&1 || rc=1
cat "$out/cli.txt"
[ "$load" = 1 ] || exit $rc
# the checkpoint load speed: a Llama-3.2-1B-shaped random checkpoint in two shards (2.5 GB)
build/tests/model/bench_load samples/models/llama3_2_1b.kiln /tmp/ckpt1b > "$out/load.txt" 2>&1 || rc=1
build/tests/model/bench_load samples/models/llama3_2_1b.kiln /tmp/ckpt1b >> "$out/load.txt" 2>&1 || rc=1
grep ckpt_1b "$out/models.txt" >> "$out/load.txt"
cat "$out/load.txt"
exit $rc
