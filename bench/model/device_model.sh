#!/usr/bin/env bash
# bench/model/device_model.sh — the model helper's one short GPU-machine call:
# the Llama whole-model GPU test (teacher forcing, generation, the fused LM
# head against the unfused one), kiln generate against transformers' greedy,
# and Kiln's 1B generation speed and checkpoint load (bench/model/run.sh with
# the transformers side off), over a kernel cache warmed on a CPU machine with
# the same NVRTC (build/kcache). Results under $OUT.
set -u
out=${OUT:-/tmp/out}
mkdir -p "$out" build/hf
export KILN_CACHE_DIR=$PWD/build/kcache
py=python3
[ -x /opt/torch/.venv/bin/python3 ] && py=/opt/torch/.venv/bin/python3
small="NL=2 V=512 D=256 H=4 KV=2 F=512"
t0=$(date +%s.%N)
{
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  $py tests/model/hf_reference.py llama:build/hf/llama:build/hf/llama.json ckpt1b:/tmp/ckpt1b 2>&1 | tail -3
  echo "setup $(echo "$(date +%s.%N) - $t0" | bc) s"
} > "$out/setup.txt" 2>&1
timeout 60 build/tests/model/test_model_gpu samples/models/llama3_2_1b.kiln build/hf/llama build/hf/llama.json $small \
  > "$out/llama.txt" 2>&1; echo "rc=$? at $(echo "$(date +%s.%N) - $t0" | bc) s" >> "$out/llama.txt"
D=""; for d in $small; do D="$D -D $d"; done
prompt=$($py -c "import json; print(','.join(map(str, json.load(open('build/hf/llama.json'))['prompt'])))")
{
  echo "kiln generate (greedy, fused head):"
  build/kiln generate samples/models/llama3_2_1b.kiln --weights build/hf/llama --prompt-ids "$prompt" --max-new 33 \
    --buckets 1 --max-seq 64 --fused-head $D
  echo "transformers' greedy:"
  $py -c "import json; print(','.join(map(str, json.load(open('build/hf/llama.json'))['greedy'])))"
} > "$out/cli.txt" 2>&1
BENCH_MODELS=1b BENCH_HF=0 BENCH_NEW=64 timeout 90 bench/model/run.sh > /dev/null 2>&1
echo "total $(echo "$(date +%s.%N) - $t0" | bc) s" >> "$out/model.txt"
tail -40 "$out"/*.txt
