#!/usr/bin/env bash
# bench/model/device_model3.sh — the model helper's GPU-machine call of this
# round, over a carried build/ whose kernel cache (build/kcache) was filled on
# the CPU machine with the same build (bench/model/kiln_vs_hf.py --warm,
# KILN_MODEL_WARM=1 test_model_gpu, compile_time --cache):
#   1. test_pack_gpu: packing on the device equals packing on the host, bit for bit
#   2. bench/model/kiln_vs_hf.py --ckpt: the random Llama-3-8B's first CKPT_LAYERS (32: all)
#      layers, embedding, norm and head written as a sharded checkpoint (0: the whole
#      model, save_pretrained), bench_load's three bandwidths on it; Kiln's
#      decode tokens/s for B = 1, 8, 32 at 1024 tokens of context, its one-layer
#      decode, and transformers + torch.compile(mode="reduce-overhead") at B = 1
#   3. tests/model/gpu_models.sh without the 1B checkpoint, in the time left (GM_TIME
#      reserved: teacher forcing against transformers with the weights packed on the
#      device, kiln generate, samples/embed)
# WARM_START=1: first the warm start of the whole 8B model with a device context
# (bench/compile_time --device; its plan cache filled with the same build).
# Results under $OUT (at most 8 files). DEADLINE: seconds for the whole script.
set -u
out=${OUT:-/tmp/out}
mkdir -p "$out"
export KILN_CACHE_DIR=$PWD/build/kcache
py=python3
[ -x /opt/torch/.venv/bin/python3 ] && py=/opt/torch/.venv/bin/python3
t0=$(date +%s)
deadline=${DEADLINE:-128}
left() { local l=$(( deadline - ($(date +%s) - t0) )); [ $l -gt 1 ] && echo $l || echo 1; }
{
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
  [ "${WARM_START:-0}" = 1 ] &&
    timeout 25 build/bench/compile_time samples/models/llama3_8b.kiln B=1,S=1,T=1024 --cache "$KILN_CACHE_DIR" --device
  timeout 30 build/tests/model/test_pack_gpu
  echo "rc=$? at $(( $(date +%s) - t0 )) s"
} > "$out/pack.txt" 2>&1
timeout "$(( $(left) > ${GM_TIME:-20} + 1 ? $(left) - ${GM_TIME:-20} : 1 ))" $py bench/model/kiln_vs_hf.py --bs 1,8,32 --ctx 1024 --new 16 --hf-bs 1 \
  --ckpt /tmp/ckpt8b --ckpt-layers "${CKPT_LAYERS:-32}" > "$out/tps.txt" 2>&1
echo "rc=$? at $(( $(date +%s) - t0 )) s" >> "$out/tps.txt"
GPU_MODELS_LOAD=0 OUT="$out/gm" timeout "$(left)" bash tests/model/gpu_models.sh > "$out/gpu_models.txt" 2>&1
echo "rc=$? at $(( $(date +%s) - t0 )) s" >> "$out/gpu_models.txt"
tar -C "$out" -czf "$out/gm.tgz" gm 2>/dev/null && rm -rf "$out/gm"
tail -n 40 "$out"/pack.txt "$out"/gpu_models.txt "$out"/tps.txt
