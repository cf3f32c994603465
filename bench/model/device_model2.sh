#!/usr/bin/env bash
# bench/model/device_model2.sh — the model helper's one GPU-machine call of this
# round, over a carried build/ whose kernel and plan caches (build/kcache) were
# filled on the CPU machine with the same build (bench/model/kiln_vs_hf.py
# --warm, KILN_MODEL_WARM=1 test_model_gpu, compile_time --cache):
#   1. the warm start of the whole 8B model with a device context (compile_time --device)
#   2. tests/model/gpu_models.sh without the 1B checkpoint load (teacher forcing against
#      transformers, kiln generate, samples/embed)
#   3. bench/model/kiln_vs_hf.py: Kiln's 8B decode tokens/s for B = 1, 8, 32 at 1024
#      tokens of context, its one-layer decode, and transformers + torch.compile on the
#      same weights (the batch sizes its compile leaves time for)
# Results under $OUT (at most 8 files).
set -u
out=${OUT:-/tmp/out}
mkdir -p "$out"
export KILN_CACHE_DIR=$PWD/build/kcache
py=python3
[ -x /opt/torch/.venv/bin/python3 ] && py=/opt/torch/.venv/bin/python3
t0=$(date +%s)
el() { echo "$(( $(date +%s) - t0 )) s"; }
{
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
  timeout 25 build/bench/compile_time samples/models/llama3_8b.kiln B=1,S=1,T=1024 --cache "$KILN_CACHE_DIR" --device
  echo "rc=$? at $(el)"
} > "$out/warm.txt" 2>&1
GPU_MODELS_LOAD=0 OUT="$out/gm" timeout 40 bash tests/model/gpu_models.sh > "$out/gpu_models.txt" 2>&1
echo "rc=$? at $(el)" >> "$out/gpu_models.txt"
tar -C "$out" -czf "$out/gm.tgz" gm 2>/dev/null && rm -rf "$out/gm"
timeout "${TPS_TIMEOUT:-60}" $py bench/model/kiln_vs_hf.py --bs 1,8,32 --ctx 1024 --new 16 --hf-bs 1,8,32 --hf-timeout 5 \
  > "$out/tps.txt" 2>&1
echo "rc=$? at $(el)" >> "$out/tps.txt"
tail -n 30 "$out"/*.txt
