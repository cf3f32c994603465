#!/usr/bin/env bash
# The decode checks on the GPU machine: GPU tests, profiles with PDL on/off, memcheck, a short bench.
set -u
export KILN_CACHE_DIR=/tmp/kiln-cache-decode
O=${OUT:-/tmp/out}; mkdir -p "$O"
S=$O/summary.txt
t() { local name=$1; shift; local t1=$(date +%s); ( timeout "$@"; echo "rc=$?" ) > "$O/$name.txt" 2>&1
      echo "$name $(( $(date +%s) - t1 ))s: $(grep -E 'passed|rc=' "$O/$name.txt" | tail -2 | tr '\n' ' ')" >> "$S"; }
t decode 60 build/tests/gpu/test_decode_gpu
grep "norm-gemv on vs off" "$O/decode.txt" >> "$S"
t api 60 build/tests/api/test_api_gpu
t profile 30 build/tests/api/test_profile_gpu
for m in 1b 8b; do for p in "" --no-pdl; do
  timeout 40 build/kiln run samples/llama3_${m}_layer.kiln --dims B=1,S=1,T=1024 --random --pos=1023 --profile --profile-runs=200 $p > "$O/prof_${m}${p}.txt" 2>&1
  echo "profile $m $p: $(grep -E '^layer' "$O/prof_${m}${p}.txt" | cut -c1-70) | $(grep -E '^bubbles' "$O/prof_${m}${p}.txt" | cut -c1-60)" >> "$S"
done; done
timeout 40 build/kiln run samples/llama3_8b_layer.kiln --dims B=32,S=1,T=1024 --random --pos=1023 --profile --profile-runs=50 > "$O/prof_8b_b32.txt" 2>&1
echo "profile 8b B=32: $(grep -E '^layer' "$O/prof_8b_b32.txt" | cut -c1-70) | $(grep -E '^bubbles' "$O/prof_8b_b32.txt" | cut -c1-60)" >> "$S"
timeout 40 compute-sanitizer --tool memcheck --report-api-errors no build/kiln run samples/llama3_1b_layer.kiln -D D=1024 -D H=16 -D KV=4 -D F=2048 --dims B=2,S=1,T=64 --random --steps 2 --check > "$O/memcheck.txt" 2>&1
echo "memcheck: $(grep -E 'ERROR SUMMARY|^ok' "$O/memcheck.txt" | tr '\n' ' ')" >> "$S"
BENCH_CASES=1b-decode BENCH_VARIANTS=kiln,graph BENCH_PROFILE=0 BENCH_TOTAL=45 BENCH_CASE_TIMEOUT=40 timeout 60 bench/run.sh > "$O/bench.txt" 2>&1
grep -E "^\| Llama" "$O/bench.txt" >> "$S"
tar czf "$O/logs.tgz" -C "$O" decode.txt api.txt profile.txt memcheck.txt bench.txt && rm -f "$O"/{decode,api,profile,memcheck,bench}.txt
cat "$S"
