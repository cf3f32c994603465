#!/usr/bin/env bash
# Runs Kiln's libFuzzer harnesses (tests/fuzz/) one after the other.
#
#   scripts/fuzz.sh [--time SECONDS] [--merge] [--dir DIR] [frontend|safetensors ...]
#
# --time   seconds per harness (default 60: the CI smoke run)
# --merge  afterwards, minimize the committed seed corpus with what this run
#          found (libFuzzer -merge=1 into tests/fuzz/corpus/NAME)
# --dir    the clang build (default build-fuzz/), configured with KILN_FUZZ=ON
#
# Each harness starts from its committed corpus plus DIR/corpus/NAME (kept
# between runs), with its dictionary, in one process. Crashes,
# leaks and timeouts land in DIR/artifacts/NAME/ and make the script exit 1;
# the last status line of each run (executions, coverage, corpus) is printed
# and kept in DIR/fuzz-NAME.log. Needs clang with libFuzzer (scripts/deps.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
time=60 merge=0 dir=build-fuzz harnesses=()
while [ $# -gt 0 ]; do
  case $1 in
    --time) time=$2; shift 2 ;;
    --time=*) time=${1#--time=}; shift ;;
    --merge) merge=1; shift ;;
    --dir) dir=$2; shift 2 ;;
    --dir=*) dir=${1#--dir=}; shift ;;
    frontend|safetensors) harnesses+=("$1"); shift ;;
    *) echo "usage: scripts/fuzz.sh [--time SECONDS] [--merge] [--dir DIR] [frontend|safetensors ...]" >&2; exit 64 ;;
  esac
done
[ ${#harnesses[@]} -gt 0 ] || harnesses=(frontend safetensors)
if ! command -v clang >/dev/null; then
  echo "fuzz: clang not found (scripts/deps.sh installs it)" >&2
  exit 1
fi
CC=clang cmake -S . -B "$dir" -G Ninja -DCUDAToolkit_ROOT="${CUDAToolkit_ROOT:-/usr/local/cuda}" \
  -DKILN_FUZZ=ON -DKILN_WERROR=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
targets=()
for h in "${harnesses[@]}"; do targets+=("fuzz_$h"); done
cmake --build "$dir" -j "$(nproc)" --target "${targets[@]}"

status=0
for h in "${harnesses[@]}"; do
  work="$dir/corpus/$h" art="$dir/artifacts/$h/" log="$dir/fuzz-$h.log"
  mkdir -p "$work" "$art"
  echo "== fuzz_$h for ${time}s"
  # detect_leaks: every input must free what it allocates
  rc=0
  ASAN_OPTIONS=detect_leaks=1 "$dir/tests/fuzz/fuzz_$h" "$work" "tests/fuzz/corpus/$h" \
    -dict="tests/fuzz/$h.dict" -max_total_time="$time" -timeout=25 -rss_limit_mb=2048 -max_len=65536 \
    -print_final_stats=1 -artifact_prefix="$art" >"$log" 2>&1 || rc=$?
  grep -E '^#[0-9]+.*(DONE|pulse|NEW|REDUCE)' "$log" | tail -1 || true
  grep -E '^stat::(number_of_executed_units|peak_rss_mb|new_units_added)' "$log" || true
  if [ "$rc" -ne 0 ] || ls "$art" | grep -q .; then
    echo "fuzz_$h: FAILED (exit $rc); inputs in $art, log in $log" >&2
    grep -E 'ERROR|SUMMARY' "$log" | head -5 >&2 || true
    status=1
  fi
  if [ "$merge" -eq 1 ]; then
    min="$dir/min/$h"
    rm -rf "$min" && mkdir -p "$min"
    "$dir/tests/fuzz/fuzz_$h" -merge=1 "$min" "tests/fuzz/corpus/$h" "$work" >"$dir/merge-$h.log" 2>&1
    rm -f "tests/fuzz/corpus/$h"/* && cp "$min"/* "tests/fuzz/corpus/$h"/
    echo "fuzz_$h: committed corpus minimized to $(ls "tests/fuzz/corpus/$h" | wc -l) inputs"
  fi
done
exit $status
