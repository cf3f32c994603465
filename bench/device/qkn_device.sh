#!/usr/bin/env bash
# qkn: the per-head q/k norm per variant on the H200 (issue 18): Qwen3-8B layer profiles, default
# (prefill: the QKV-epilogue head norm; decode: the decode variants' graph) against
# --disable=epilogue-head-norm, interleaved; then tests/gpu/qk_norm_gpu.sh and compute-sanitizer on
# the fused paths. Each step starts only while the elapsed time is under LIMIT seconds.
set -u
export OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
export KILN_CACHE_DIR=$(mktemp -d)
LIMIT=${LIMIT:-70}
t0=$(date +%s)
el() { echo $(( $(date +%s) - t0 )); }
left() { [ "$(el)" -lt "$LIMIT" ]; }
Q=samples/qwen3_8b_layer.kiln
prof() { # label dims pos extra...
  local label=$1 dims=$2 pos=$3; shift 3
  echo "== $label $* ($(el) s)" >> "$OUT/prof.txt"
  timeout 30 build/kiln run $Q --dims "$dims" --random --pos="$pos" --profile --profile-runs=40 "$@" >> "$OUT/prof.txt" 2>&1
  echo "rc=$?" >> "$OUT/prof.txt"
}
for round in $(seq 1 "${ROUNDS:-1}"); do
  for d in "" "--disable=epilogue-head-norm"; do left && prof "prefill S=2048 r$round" B=1,S=2048,T=2048 0 $d; done
  for b in 1 4; do
    for d in "" "--disable=epilogue-head-norm" "--enable=epilogue-head-norm"; do
      left && prof "decode B=$b r$round" B=$b,S=1,T=1024 1000 $d
    done
  done
done
echo "profiles $(el) s" >> "$OUT/times.txt"
if left; then
  timeout ${QK_S:-40} bash tests/gpu/qk_norm_gpu.sh build/kiln > "$OUT/qk_norm_gpu.txt" 2>&1
  echo "qk_norm_gpu rc=$? $(el) s" >> "$OUT/times.txt"
fi
S='samples/qwen3_8b_layer.kiln -D D=512 -D H=4 -D KV=2 -D F=512'
for tool in memcheck racecheck; do
  left || break
  timeout 20 compute-sanitizer --tool $tool build/kiln run $S --dims B=2,S=64,T=128 --random --check > "$OUT/$tool.txt" 2>&1
  echo "$tool prefill rc=$? $(el) s" >> "$OUT/times.txt"
  left || break
  timeout 15 compute-sanitizer --tool $tool build/kiln run $S --dims B=1,S=1,T=64 --random --check --enable=epilogue-head-norm >> "$OUT/$tool.txt" 2>&1
  echo "$tool decode (fused) rc=$? $(el) s" >> "$OUT/times.txt"
done
cat "$OUT/times.txt"
