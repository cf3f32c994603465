#!/usr/bin/env bash
# bench/device/final_tests.sh — the merged tree's GPU checks in one device call, over the slim
# build (scripts/gpu_pack.sh build build-gpu; carry build-gpu): `ctest -L gpu`, then
# compute-sanitizer memcheck / racecheck on decode and prefill layers of small dims, each step
# started only while the elapsed time is under LIMIT seconds. Results under $OUT.
#   LIMIT (480), JOBS (3: ctest -j), TESTS (a ctest -R regex: only those), EXCLUDE (a ctest -E regex: not
#   those), SAN (1; 0: no sanitizer runs)
DEFAULT_LIMIT=480
. "$(dirname "$0")/common.sh"
git log --oneline -1 2>/dev/null | tee -a "$OUT/gpu.txt"
(cd build && timeout $((LIMIT - 120)) ctest -L gpu ${TESTS:+-R "$TESTS"} ${EXCLUDE:+-E "$EXCLUDE"} -j "${JOBS:-3}" --output-on-failure --timeout 300) > "$OUT/gpu_tests.log" 2>&1
echo "ctest -L gpu rc=$? $(el) s" | tee -a "$OUT/times.txt"
grep -E "tests passed|Failed|\*\*\*" "$OUT/gpu_tests.log" | tail -30
S='samples/llama3_8b_layer.kiln -D D=1024 -D H=8 -D KV=2 -D F=2048'
san() { # tool label args...
  local tool=$1 label=$2; shift 2
  [ "${SAN:-1}" = 1 ] && left || return
  local f=/tmp/san_${tool}_$label.txt
  timeout "${SAN_T:-40}" compute-sanitizer --tool "$tool" build/kiln run "$@" --random --check > "$f" 2>&1
  local rc=$?
  { echo "==== $tool $label: $* (rc $rc)"; tail -40 "$f"; } >> "$OUT/san.txt"
  echo "$tool $label rc=$rc $(el) s: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|hazard' "$f" | tail -1)" | tee -a "$OUT/times.txt"
}
san racecheck b1 $S --dims B=1,S=1,T=1024 --pos=1000
san racecheck b32 $S --dims B=32,S=1,T=1024 --pos=1000
san racecheck s300 $S --dims B=2,S=300,T=512 --pos=0
san racecheck b4 $S --dims B=4,S=1,T=512
SAN_T=150 san racecheck 1b-b1 samples/llama3_1b_layer.kiln --dims B=1,S=1,T=1024 --pos=1000
san memcheck b1 $S --dims B=1,S=1,T=1024 --pos=1000
san memcheck b32 $S --dims B=32,S=1,T=1024 --pos=1000
san memcheck s300 $S --dims B=2,S=300,T=512 --pos=0
san memcheck gemma bench/attn/gemma_2b_layer.kiln -D D=512 -D F=2048 --dims B=1,S=1,T=256 --pos=200
cat "$OUT/times.txt"
