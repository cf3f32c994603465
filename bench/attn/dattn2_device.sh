#!/usr/bin/env bash
# bench/attn/dattn2_device.sh — issue 10's decode clusters in one GPU call, results to $OUT
# (summary.txt, decode_table.md, kiln_decode.log, and dattn2.tgz with the rest):
#   1. tests/gpu/test_gpu_attention: every case against the f64 reference, then the decode
#      table's rows (codegen's shapes) and the sweep of kernel shapes (KILN_DEC_SWEEP=1);
#   2. `kiln run --profile` of the 1B, 8B, Gemma-2B and Phi-3-mini layers at B=1, S=1 over
#      1024 cached keys, and of the 8B layer at B=4, S=4096 (SM clock and power sampled);
#   3. `kiln run --check` of the decode lines of tests/cli/run_gpu.sh (the runtime's path);
#   4. PyTorch SDPA's decode backends and `kiln ceilings` (the decode table, same run);
#   5. compute-sanitizer memcheck and racecheck on the cluster cases;
#   6. the prefill kernel at B=4 S=4096 with cheap and random inputs, 2 and 3 stages.
# Run from the repository root with a configured build/.
set -u
OUT=${OUT:-/tmp/dattn2-out}; R=$OUT/r; mkdir -p "$R"
export KILN_CACHE_DIR=${KILN_CACHE_DIR:-$PWD/build/kcache}
san=compute-sanitizer; command -v $san >/dev/null || san=/usr/local/cuda/bin/compute-sanitizer
t0=$(date +%s)
stamp() { echo "$1 $(( $(date +%s) - t0 )) s" >> "$R/times.txt"; }
nvidia-smi -L > "$R/device.txt" 2>&1
CL=${CL_CASES:-46-61}

KILN_BENCH=1 KILN_DEC_SWEEP=1 timeout ${TEST_S:-90} build/tests/gpu/test_gpu_attention > "$OUT/kiln_decode.log" 2>&1
echo "rc=$?" >> "$OUT/kiln_decode.log"; stamp test

layer() { [ -f samples/$1.kiln ] && echo samples/$1.kiln || echo bench/attn/$1.kiln; }
for m in llama3_1b_layer llama3_8b_layer gemma_2b_layer phi3_mini_layer; do
  timeout ${PROFILE_S:-20} build/kiln run $(layer $m) --random --dims B=1,S=1,T=1024 --pos=1023 --profile \
    > "$R/profile_$m.txt" 2>&1; echo "rc=$?" >> "$R/profile_$m.txt"
done
stamp profiles
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw --format=csv -lms 100 > "$R/clocks_prefill.csv" 2>&1 &
smi=$!
timeout ${PREFILL_S:-40} build/kiln run samples/llama3_8b_layer.kiln --random --dims B=4,S=4096,T=4096 --pos=0 --profile \
  > "$R/profile_8b_prefill_b4.txt" 2>&1; echo "rc=$?" >> "$R/profile_8b_prefill_b4.txt"
stamp prefill-profile
KILN_BENCH=3 KILN_CASES=none timeout ${WG_S:-30} build/tests/gpu/test_gpu_attention_wgmma > "$R/wgmma_b4.log" 2>&1
echo "rc=$?" >> "$R/wgmma_b4.log"; kill $smi 2>/dev/null; stamp wgmma-b4

{ echo '#!/usr/bin/env bash'; sed -n '1,/^\. "\$(dirname "\$0")\/expect.sh"/p' tests/cli/run_gpu.sh | tail -n +2
  grep -E "gemma_2b_layer|phi3_mini_layer|llama3_1b_layer.*attention-cache-write|T=8 --random --steps 6" tests/cli/run_gpu.sh
  echo 'echo "$pass passed, $fail failed"'; } > "$R/run_gpu_subset.sh"
sed -i "s|\$(dirname \"\$0\")/expect.sh|tests/cli/expect.sh|" "$R/run_gpu_subset.sh"
timeout ${CHECK_S:-25} bash "$R/run_gpu_subset.sh" build/kiln > "$R/run_gpu.log" 2>&1; echo "rc=$?" >> "$R/run_gpu.log"
stamp run_gpu

timeout ${SDPA_S:-40} python3 bench/attn/sdpa_decode.py > "$R/sdpa_decode.jsonl" 2> "$R/sdpa_decode.err"
build/kiln ceilings > "$R/ceilings.txt" 2>&1
python3 bench/attn/decode_table.py "$OUT/kiln_decode.log" "$R/sdpa_decode.jsonl" "$R/ceilings.txt" > "$OUT/decode_table.md" 2>&1
stamp sdpa

( KILN_CASES=$CL timeout ${SAN_S:-40} $san --tool memcheck build/tests/gpu/test_gpu_attention ) > "$R/memcheck.log" 2>&1
echo "rc=$?" >> "$R/memcheck.log"; stamp memcheck
( KILN_CASES=${RACE_CASES:-47-49} timeout ${RACE_S:-30} $san --tool racecheck build/tests/gpu/test_gpu_attention ) > "$R/racecheck.log" 2>&1
echo "rc=$?" >> "$R/racecheck.log"; stamp racecheck

{ cat "$R/times.txt"; grep -E "FAIL|passed|rc=" "$OUT/kiln_decode.log" | head -30
  grep -E "^bench (decode|sweep)" "$OUT/kiln_decode.log"
  for m in llama3_1b_layer llama3_8b_layer gemma_2b_layer phi3_mini_layer 8b_prefill_b4; do
    echo "== $m"; grep -iE "attention|floor|total|graph|rc=" "$R/profile_$m.txt" 2>/dev/null | head -14; done
  echo "== wgmma b4"; grep -E "bench attn|rc=" "$R/wgmma_b4.log"
  echo "== run_gpu"; tail -4 "$R/run_gpu.log"
  echo "== memcheck"; tail -4 "$R/memcheck.log"; echo "== racecheck"; tail -4 "$R/racecheck.log"
} > "$OUT/summary.txt" 2>&1
tar czf "$OUT/dattn2.tgz" -C "$OUT" r
