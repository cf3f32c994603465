#!/usr/bin/env bash
# bench/qkv/run.sh — the QKV epilogue (RoPE + KV-cache write in the projection) on a GPU:
# its checks against the interpreter (tests/gpu/qkv_epilogue_gpu.sh, run in parallel), then the
# layer profiles at prefill and decode with the epilogue on and off (--disable=fuse-qkv-epilogue:
# the attention kernel rotates and writes the cache, as before). Results under $OUT (or /tmp/qkv).
set -u
out=${OUT:-/tmp/qkv}
mkdir -p "$out"
k=build/kiln
export KILN_CACHE_DIR=/tmp/kiln_qkv_cache
t0=$(date +%s)
# phase 1: the checks, 6 at a time (they compile their own kernels; the GPU work is small)
grep -E '^expect 0 ' tests/gpu/qkv_epilogue_gpu.sh | sed -e "s#\$L8#samples/llama3_8b_layer.kiln -D D=512 -D H=4 -D KV=2 -D F=512#" \
  -e "s#\$L1#samples/llama3_1b_layer.kiln -D D=256 -D H=4 -D KV=1 -D F=512#" -e "s/^expect 0 '[^']*' run //" >"$out/checks.list"
i=0
while read -r line; do
  i=$((i + 1))
  ( echo "## kiln run $line"; timeout 150 $k run $line; echo "rc=$?" ) >"/tmp/qkv_check_$i.txt" 2>&1 &
  while [ "$(jobs -r | wc -l)" -ge 6 ]; do sleep 1; done
done <"$out/checks.list"
wait
cat /tmp/qkv_check_*.txt >"$out/checks.txt"
echo "phase 1: $(( $(date +%s) - t0 )) s" >>"$out/times.txt"
# phase 2: profiles, one at a time
prof() { # name, model, dims, extra
  echo "## $1: kiln run $2 --dims $3 --random --profile --profile-runs=20 $4"
  timeout 100 $k run "$2" --dims "$3" --random --profile --profile-runs=20 $4
  echo "rc=$?"
}
{
  # QKV_MODES="on" profiles only with the epilogue (the default: on and off)
  for mode in ${QKV_MODES:-on off}; do
    x=""
    [ "$mode" = off ] && x=--disable=fuse-qkv-epilogue
    prof 8b-prefill-$mode samples/llama3_8b_layer.kiln B=1,S=2048,T=2048 "$x"
    prof 8b-decode-$mode samples/llama3_8b_layer.kiln B=1,S=1,T=1024 "$x"
    prof 1b-decode-$mode samples/llama3_1b_layer.kiln B=1,S=1,T=1024 "$x"
    prof 1b-prefill-$mode samples/llama3_1b_layer.kiln B=1,S=2048,T=2048 "$x"
    prof 8b-b4s4096-$mode samples/llama3_8b_layer.kiln B=4,S=4096,T=4096 "$x"
  done
} >"$out/profiles.txt" 2>&1
echo "phase 2: $(( $(date +%s) - t0 )) s" >>"$out/times.txt"
