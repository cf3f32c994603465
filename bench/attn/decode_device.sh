#!/usr/bin/env bash
# bench/attn/decode_device.sh — issue 10's decode part for one GPU call, results to $OUT
# (one tarball, dattn.tgz, plus summary.txt): the decode attention test's correctness cases under
# compute-sanitizer memcheck, the decode table (bench/attn/run.sh with DECODE_ONLY=1), the
# profile (`kiln run --profile`) of the 1B, 8B, Gemma-2B and Phi-3-mini layers at B=1, S=1 with
# 1024 cached keys, and `kiln run --check` of the decode attention lines of tests/cli/run_gpu.sh.
# Run from the repository root with a configured build/.
set -u
OUT=${OUT:-/tmp/dattn-out}; mkdir -p "$OUT/r"; R=$OUT/r
export KILN_CACHE_DIR=${KILN_CACHE_DIR:-$PWD/build/kcache}
san=compute-sanitizer; command -v $san >/dev/null || san=/usr/local/cuda/bin/compute-sanitizer
nvidia-smi -L > "$R/device.txt" 2>&1
t0=$(date +%s)
if [ "${QUICK:-0}" = 1 ]; then # the test's cases and timings without the sanitizer, the profiles; no SDPA
  ( time KILN_BENCH=1 timeout 60 build/tests/gpu/test_gpu_attention ) > "$R/kiln_decode.log" 2>&1; echo "rc=$?" >> "$R/kiln_decode.log"
  echo "test $(( $(date +%s) - t0 )) s" >> "$R/times.txt"
  for m in llama3_1b_layer llama3_8b_layer gemma_2b_layer phi3_mini_layer; do
    timeout ${PROFILE_S:-16} build/kiln run $( [ -f samples/$m.kiln ] && echo samples/$m.kiln || echo bench/attn/$m.kiln ) --random --dims B=1,S=1,T=1024 --pos=1023 --profile > "$R/profile_$m.txt" 2>&1
    echo "rc=$?" >> "$R/profile_$m.txt"
  done
  { cat "$R/times.txt"; grep -E "FAIL|passed|bench decode" "$R/kiln_decode.log"
    for m in llama3_1b_layer llama3_8b_layer gemma_2b_layer phi3_mini_layer; do echo "== $m"; grep -E "attention|floor" "$R/profile_$m.txt" | head -4; done
  } > "$OUT/summary.txt" 2>&1
  tar czf "$OUT/dattn.tgz" -C "$OUT" r
  exit 0
fi
( time timeout ${SAN_S:-45} $san --tool memcheck build/tests/gpu/test_gpu_attention ) > "$R/memcheck.log" 2>&1; echo "rc=$?" >> "$R/memcheck.log"
echo "memcheck $(( $(date +%s) - t0 )) s" >> "$R/times.txt"
DECODE_ONLY=1 KILN_DECODE_BENCH=2 timeout ${TABLE_S:-50} bench/attn/run.sh build "$R" > /dev/null 2>&1
echo "table $(( $(date +%s) - t0 )) s" >> "$R/times.txt"
for m in llama3_1b_layer llama3_8b_layer gemma_2b_layer phi3_mini_layer; do
  timeout ${PROFILE_S:-16} build/kiln run $( [ -f samples/$m.kiln ] && echo samples/$m.kiln || echo bench/attn/$m.kiln ) --random --dims B=1,S=1,T=1024 --pos=1023 --profile > "$R/profile_$m.txt" 2>&1
  echo "rc=$?" >> "$R/profile_$m.txt"
  echo "profile $m $(( $(date +%s) - t0 )) s" >> "$R/times.txt"
done
{ echo '#!/usr/bin/env bash'; sed -n '1,/^\. "\$(dirname "\$0")\/expect.sh"/p' tests/cli/run_gpu.sh | tail -n +2
  grep -E "gemma_2b_layer|phi3_mini_layer|WINDOW=100|attention-cache-write|attention_hd16" tests/cli/run_gpu.sh
  echo 'echo "$pass passed, $fail failed"'; } > "$R/run_gpu_subset.sh"
sed -i "s|\$(dirname \"\$0\")/expect.sh|tests/cli/expect.sh|" "$R/run_gpu_subset.sh"
timeout ${CHECK_S:-25} bash "$R/run_gpu_subset.sh" build/kiln > "$R/run_gpu.log" 2>&1; echo "rc=$?" >> "$R/run_gpu.log"
echo "run_gpu $(( $(date +%s) - t0 )) s" >> "$R/times.txt"
{ cat "$R/times.txt"; tail -4 "$R/memcheck.log"; cat "$R/decode_table.md" 2>/dev/null; tail -3 "$R/run_gpu.log"
  for m in llama3_1b_layer llama3_8b_layer gemma_2b_layer phi3_mini_layer; do echo "== $m"; grep -iE "attention|floor|total|graph" "$R/profile_$m.txt" | head -12; done
} > "$OUT/summary.txt" 2>&1
tar czf "$OUT/dattn.tgz" -C "$OUT" r
