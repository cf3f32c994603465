#!/usr/bin/env bash
# decode helper's device call: GPU tests of the decode work, profiles with PDL on and off, memcheck.
set -u
export KILN_CACHE_DIR=/tmp/kiln-cache-decode
O=${OUT:-/tmp/out}; mkdir -p "$O"
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv > "$O/summary.txt" 2>&1
t0=$(date +%s)
( timeout 90 build/tests/gpu/test_decode_gpu; echo "rc=$?" ) > "$O/decode.txt" 2>&1
echo "decode test $(( $(date +%s) - t0 ))s: $(tail -2 "$O/decode.txt" | tr '\n' ' ')" >> "$O/summary.txt"
for m in 1b 8b; do
  for p in "" "--no-pdl"; do
    t1=$(date +%s)
    timeout 60 build/kiln run samples/llama3_${m}_layer.kiln --dims B=1,S=1,T=1024 --random --pos=1023 --profile $p > "$O/prof_${m}${p}.txt" 2>&1
    echo "profile $m $p rc=$? $(( $(date +%s) - t1 ))s" >> "$O/summary.txt"
    grep -E "^layer|^bubbles|memsets" "$O/prof_${m}${p}.txt" >> "$O/summary.txt"
  done
done
t1=$(date +%s)
( timeout 100 build/tests/api/test_api_gpu 2>&1 | tail -30; echo "rc=$?" ) > "$O/api.txt" 2>&1
echo "api test $(( $(date +%s) - t1 ))s: $(tail -3 "$O/api.txt" | tr '\n' ' ')" >> "$O/summary.txt"
t1=$(date +%s)
( timeout 60 compute-sanitizer --tool memcheck build/kiln run samples/llama3_1b_layer.kiln -D D=1024 -D H=16 -D KV=4 -D F=2048 --dims B=2,S=1,T=64 --random --steps 3 --check 2>&1 | tail -15 ) > "$O/memcheck.txt" 2>&1
echo "memcheck $(( $(date +%s) - t1 ))s: $(grep -E 'ERROR SUMMARY' "$O/memcheck.txt")" >> "$O/summary.txt"
cat "$O/summary.txt"
