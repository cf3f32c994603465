#!/usr/bin/env bash
# bench/model/run.sh — whole-model generation speed on the GPU machine: Kiln
# (bench/model/bench_gen, fused LM head and the model's own head) against
# Hugging Face transformers with a static cache and torch.compile
# (bench/model/hf_decode.py), on random weights of the Llama-3.2-1B and
# Llama-3-8B shapes (tests/model/hf_reference.py writes the checkpoints: no
# download), plus the checkpoint load against the file-read and pinned
# host-to-device bandwidths measured in the same run.
#
#   bench/model/run.sh            both models, B = 1, 8, 32
#
# Knobs: BENCH_MODELS (1b,8b), BENCH_B (1,8,32), BENCH_PROMPT (32),
# BENCH_NEW (128), BENCH_HF (1: run the transformers side; 0: Kiln only),
# PYTHON. Results under $OUT (default /tmp/out): model.txt.
set -u
cd "$(dirname "$0")/../.." || exit 1
out=${OUT:-/tmp/out}
mkdir -p "$out"
py=${PYTHON:-python3}
[ -x /opt/torch/.venv/bin/python3 ] && py=/opt/torch/.venv/bin/python3
models=${BENCH_MODELS:-1b,8b}
bs=${BENCH_B:-1,8,32}
plen=${BENCH_PROMPT:-32}
nnew=${BENCH_NEW:-128}
rc=0
for k in ${models//,/ }; do
  case $k in
    1b) kf=samples/models/llama3_2_1b.kiln ;;
    8b) kf=samples/models/llama3_8b.kiln ;;
    *) echo "bench/model/run.sh: unknown model $k"; exit 64 ;;
  esac
  ck=/tmp/ckpt$k
  [ -f "$ck/model.safetensors.index.json" ] || $py tests/model/hf_reference.py "ckpt$k:$ck" || rc=1
  build/tests/model/bench_load "$kf" "$ck" || rc=1
  build/bench/bench_gen "$kf" "$ck" "$bs" "$plen" "$nnew" || rc=1
  [ "${BENCH_HF:-1}" = 1 ] && { $py bench/model/hf_decode.py "$k" "$bs" "$plen" "$nnew" || rc=1; }
done 2>&1 | tee -a "$out/model.txt"
exit $rc
