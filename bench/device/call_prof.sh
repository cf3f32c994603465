#!/usr/bin/env bash
# bench/device/call_prof.sh — the profile with its CUPTI-detached replays, and the decode rows, in one
# device call over the slim build (GPU_PACK_MIN=1 scripts/gpu_pack.sh build build-gpu, plus
# build/tests/api/test_profile_gpu copied into build-gpu/tests/api/; carry build-gpu):
#   1. test_profile_gpu;
#   2. `kiln run --profile --profile-runs=40` of the 1B and 8B layers at B = 1 (1024 keys);
#   3. bench/run.sh's 1b-decode and 8b-decode rows with torch.compile + CUDA graph (BENCH_PROFILE=0),
#      with what is left of LIMIT.
# Results under $OUT.  LIMIT (240)
DEFAULT_LIMIT=240
. "$(dirname "$0")/common.sh"
timeout 60 build/tests/api/test_profile_gpu > "$OUT/test_profile_gpu.txt" 2>&1
echo "test_profile_gpu rc=$? $(el) s" | tee -a "$OUT/times.txt"
tail -3 "$OUT/test_profile_gpu.txt"
for m in 1b 8b; do
  timeout 60 build/kiln run samples/llama3_${m}_layer.kiln --dims B=1,S=1,T=1024 --random --pos=1023 --profile \
    --profile-runs=40 --profile-json="$OUT/profile_$m.json" > "$OUT/profile_$m.txt" 2>&1
  echo "profile $m rc=$? $(el) s" | tee -a "$OUT/times.txt"
  grep -E "^kiln_|^layer|without the profiler|^bubbles" "$OUT/profile_$m.txt" | cut -c1-140
done
bench_rows 1b-decode,8b-decode kiln,compile-graph
cat "$OUT/times.txt"
