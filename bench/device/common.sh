# bench/device/common.sh — sourced by the final_* and variants scripts with DEFAULT_LIMIT set: the
# tree's root as the working folder, the slim build as build/, /work/main pointing here (the
# CTestTestfile.cmake files name /work/main/build), a fresh kernel cache, $OUT, the clock (el: seconds
# since the start; left: still under LIMIT) and the GPU's name, driver, clock and power in $OUT/gpu.txt.
set -u
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1
export OUT=${OUT:-/tmp/out}
mkdir -p "$OUT" /work
[ -e /work/main/CMakeLists.txt ] || ln -sfn "$PWD" /work/main
[ -e build ] || ln -sfn build-gpu build
export KILN_CACHE_DIR=${KILN_CACHE_DIR:-$(mktemp -d)}
LIMIT=${LIMIT:-${DEFAULT_LIMIT:-300}}
t0=$(date +%s)
el() { echo $(($(date +%s) - t0)); }
left() { [ "$(el)" -lt "$LIMIT" ]; }
# At most 8 files come back from $OUT: on exit, more than that are packed into $OUT/all.tgz (by
# the outermost script only, when one of these scripts runs another).
pack_out() {
  [ -z "${CLOCKS_PID:-}" ] || kill "$CLOCKS_PID" 2>/dev/null
  [ "$(find "$OUT" -type f | wc -l)" -gt 8 ] || return 0
  tar czf /tmp/kiln_out_all.tgz -C "$OUT" . && rm -rf "${OUT:?}"/* && mv /tmp/kiln_out_all.tgz "$OUT/all.tgz"
}
if [ -z "${KILN_OUT_PACKER:-}" ]; then
  export KILN_OUT_PACKER=$$
  trap pack_out EXIT
fi
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw --format=csv | tee -a "$OUT/gpu.txt"
# prof BIN LABEL MODEL DIMS ROUND [POS [FLAGS...]]: a layer profile (`--profile --profile-runs=40`,
# FLAGS added to the run), while under LIMIT; its kernel, layer and bubble lines to
# $OUT/profiles.txt, the layer line to $OUT/table.txt
prof() {
  left || return
  local f=/tmp/prof_$(basename "$1")_$2_$5.txt
  timeout 40 "$1" run "$3" --dims "$4" --random --pos=${6:-1023} --profile --profile-runs=40 "${@:7}" > "$f" 2>&1
  local rc=$?
  { echo "== $(basename "$1") $2 round $5 rc=$rc ($(el) s)"; grep -E "^kiln_|^layer|^bubbles|-> |without the profiler|^graph" "$f"; } >> "$OUT/profiles.txt"
  echo "$2 $(basename "$1") r$5: $(grep -E '^layer' "$f" | head -1 | cut -c1-110) | $(grep -E 'without the profiler' "$f" | head -1 | cut -c1-48)" >> "$OUT/table.txt"
}
# the sanitizer, and kchk LABEL ARGS...: `build/kiln run ARGS --random --check` (90 s at most) into
# /tmp/chk_LABEL.txt, one line on stdout: its status and last check line
san=compute-sanitizer; command -v $san >/dev/null || san=/usr/local/cuda/bin/compute-sanitizer
kchk() {
  local l=$1; shift
  timeout 90 build/kiln run "$@" --random --check > "/tmp/chk_$l.txt" 2>&1
  echo "check $l rc=$? $(grep -E 'check step' "/tmp/chk_$l.txt" | tail -1 | cut -c1-110)"
}
# bchk BIN LABEL ARGS...: `BIN run ARGS --random --check` (CHK_TIMEOUT s at most, default 60) into
# /tmp/chk_BIN_LABEL.txt, one line on stdout: the binary, its status and last check line
bchk() {
  local b=$1 l=$2; shift 2
  timeout "${CHK_TIMEOUT:-60}" "$b" run "$@" --random --check > "/tmp/chk_$(basename "$b")_$l.txt" 2>&1
  local rc=$?
  echo "$(basename "$b") $l rc=$rc $(grep -E 'check step' "/tmp/chk_$(basename "$b")_$l.txt" | tail -1 | cut -c1-100)"
}
# bench_rows CASES VARIANTS: bench/run.sh's rows (BENCH_PROFILE=0) with the time left under LIMIT,
# its table on stdout
bench_rows() {
  left || return
  BENCH_CASES=$1 BENCH_VARIANTS=$2 BENCH_PROFILE=0 BENCH_TOTAL=$((LIMIT - $(el))) \
    timeout $((LIMIT - $(el) + 30)) bench/run.sh > "$OUT/bench_stdout.txt" 2>&1
  echo "bench rc=$? $(el) s" | tee -a "$OUT/times.txt"
  sed -n '/---- all cases/,$p' "$OUT/bench.log" 2>/dev/null | head -12
}
# sweeps FILE SHAPES BIN...: bench/wgmma/kiln_sweep of each BIN over SHAPES (KILN_SWEEP_SHAPES; other
# KILN_SWEEP_* from the environment), two interleaved rounds of 100 s at most, while under LIMIT:
# every candidate line and summary to $OUT/FILE, the summaries and rules on stdout
sweeps() {
  local f=$1 shapes=$2 r b rc; shift 2
  for r in 1 2; do
    for b in "$@"; do
      left || break
      KILN_SWEEP_SHAPES=$shapes timeout 100 "$b" > /tmp/sw.txt 2>&1
      rc=$?
      { echo "== $(basename "$b") round $r rc=$rc ($(el) s)"; grep -E "^  |SUMMARY" /tmp/sw.txt; } >> "$OUT/$f"
    done
  done
  grep -E "^==|SUMMARY|<- rule" "$OUT/$f"
}
# prefill8b BIN...: the 8B layer's prefill profiles (B=1 S=2048; B=4 S=4096) of each BIN, two
# interleaved rounds (prof), then the layer lines sorted
prefill8b() {
  local r b
  for r in 1 2; do
    for b in "$@"; do
      prof "$b" 8b-s2048 samples/llama3_8b_layer.kiln B=1,S=2048,T=2048 $r 0
      prof "$b" 8b-b4s4096 samples/llama3_8b_layer.kiln B=4,S=4096,T=4096 $r 0
    done
  done
  sort "$OUT/table.txt"
}
# epi_checks FILTER BIN: a matmul epilogue variant's correctness steps side by side (none timed):
# test_gpu_matmul's configurations named by FILTER (KILN_MM_FILTER), the same under memcheck and
# racecheck (KILN_MM_SMALL), and `BIN run --check` of layers with an O / down epilogue: the 8B
# layer at D = 2048 (ping-pong 128x128, partial row tiles) and at full width at S = 130 (cooperative
# 128x256: the only one of the four with a second round of 128 columns, so the only one where the
# registers of KILN_WGMMA_RES_REGS take part; one tile per CTA there), the 1B and Qwen3 layers;
# lines to $OUT/times.txt and $OUT/checks.txt
epi_checks() {
  local f=$1 b=$2 tool
  local L8=samples/llama3_8b_layer.kiln W='-D D=2048 -D H=16 -D KV=8 -D F=512'
  ( KILN_MM_FILTER=$f timeout 170 build/tests/gpu/test_gpu_matmul > "$OUT/mm$f.log" 2>&1
    echo "test_gpu_matmul $f rc=$? $(el) s: $(grep -E 'passed|failed' "$OUT/mm$f.log" | tail -1)" ) | tee -a "$OUT/times.txt" &
  for tool in memcheck racecheck; do
    ( KILN_MM_SMALL=1 KILN_MM_FILTER=$f timeout 150 $san --tool $tool --error-exitcode 9 build/tests/gpu/test_gpu_matmul \
        > "$OUT/san_$tool.txt" 2>&1
      echo "$tool $f rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/san_$tool.txt" | tail -1)" ) \
      | tee -a "$OUT/times.txt" &
  done
  {
    CHK_TIMEOUT=150 bchk "$b" l8w $L8 $W --dims B=2,S=300,T=512 --pos=0 &
    CHK_TIMEOUT=200 bchk "$b" l8full $L8 --dims B=1,S=130,T=256 --pos=0 &
    CHK_TIMEOUT=150 bchk "$b" l1 samples/llama3_1b_layer.kiln -D D=256 -D H=4 -D KV=1 -D F=512 --dims B=8,S=220,T=256 --pos=0 &
    CHK_TIMEOUT=150 bchk "$b" q3w samples/qwen3_8b_layer.kiln $W --dims B=2,S=300,T=512 --pos=0 &
    wait
  } 2>&1 | sed 's/^/  /' | tee -a "$OUT/checks.txt"
  wait
  echo "checks done $(el) s" | tee -a "$OUT/times.txt"
}
# rows_on_h200: on an H200, bench/run.sh's rows (CASES, default the two 8B prefill rows, 1B and 8B
# decode; VARIANTS, default kiln,compile-graph) before a call's other steps; ROWS=0 skips them
rows_on_h200() {
  [ "${ROWS:-1}" = 1 ] && grep -q H200 "$OUT/gpu.txt" || return 0
  bench_rows "${CASES:-8b-prefill-b4-4k,8b-prefill-2k,1b-decode,8b-decode}" "${VARIANTS:-kiln,compile-graph}"
}
# gpu_ctest: `ctest -L gpu -E test_gpu_matmul` (six at a time: the device has 16 cores) in the time
# left under LIMIT, its log to $OUT/ctest_gpu.log, the summary to $OUT/times.txt and any failure on
# stdout
gpu_ctest() {
  left || return
  (cd build && timeout $((LIMIT - $(el))) ctest -L gpu -E test_gpu_matmul --output-on-failure -j6 > "$OUT/ctest_gpu.log" 2>&1
   echo "ctest rc=$?" >> "$OUT/ctest_gpu.log")
  echo "ctest $(el) s: $(grep -E 'tests passed|tests failed' "$OUT/ctest_gpu.log" | tail -1) $(tail -1 "$OUT/ctest_gpu.log")" | tee -a "$OUT/times.txt"
  grep -E "\*\*\*|Failed" "$OUT/ctest_gpu.log" | head -20
}
# clocks_bg: the SM and memory clocks, power, temperature and throttle reasons every 100 ms until the
# call ends, to $OUT/clocks.csv (nvidia-smi's timestamps; times.txt's "N s" stamps count from t0)
clocks_bg() {
  echo "clocks from t0 = $(date '+%Y/%m/%d %H:%M:%S')" > "$OUT/clocks.csv"
  local r=clocks_event_reasons.active
  nvidia-smi --query-gpu=$r --format=csv,noheader > /dev/null 2>&1 || r=clocks_throttle_reasons.active
  # started from a subshell, so that it is not a job of this shell: a bare `wait` (epi_checks) would
  # otherwise wait for it forever (the 2026-12-07 H100 call hung so)
  CLOCKS_PID=$( (nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,$r \
    --format=csv,noheader -lms 100 >> "$OUT/clocks.csv" 2>&1 </dev/null & echo $!) )
}
# ncu_qkv "CANDIDATES" PATTERN NCU_ARGS...: ncu (--clock-control none, NCU_ARGS: sections, metrics) of
# kiln_sweep's plain QKV product at M = 2048, one run per candidate (KILN_SWEEP_ONLY) while under
# LIMIT, into $OUT/ncu_qkv_cN.txt; the lines matching PATTERN (grep -E) on stdout
ncu_qkv() {
  local cands=$1 pat=$2 c ncu=ncu
  shift 2
  command -v $ncu >/dev/null || ncu=/usr/local/cuda/bin/ncu
  for c in $cands; do
    left || break
    KILN_SWEEP_M=2048 KILN_SWEEP_SHAPES=QKV KILN_SWEEP_ONLY=$c timeout $((LIMIT - $(el))) $ncu --clock-control none \
      -k regex:kiln_mm --launch-skip 2 --launch-count 1 "$@" build/bench/kiln_sweep > "$OUT/ncu_qkv_c$c.txt" 2>&1
    echo "ncu QKV candidate $c rc=$? $(el) s" | tee -a "$OUT/times.txt"
    grep -E "$pat" "$OUT/ncu_qkv_c$c.txt" | head -12
  done
}
# test_gpu_matmul helpers (KILN_MM_FILTER: '|'-separated name parts):
# mm_cases FILTER: the configurations' test cases (150 s at most) into $OUT/mm_cases.log, a line on stdout
mm_cases() {
  left || return
  KILN_MM_FILTER=$1 timeout 150 build/tests/gpu/test_gpu_matmul > "$OUT/mm_cases.log" 2>&1
  echo "cases rc=$? $(el) s: $(grep -E 'passed|failed' "$OUT/mm_cases.log" | tail -1)" | tee -a "$OUT/times.txt"
  grep -E "FAIL" "$OUT/mm_cases.log" | head -10
}
# mm_san FILTER: memcheck and racecheck of the configurations' small cases (KILN_MM_SMALL)
mm_san() {
  local tool
  for tool in memcheck racecheck; do
    left || break
    KILN_MM_SMALL=1 KILN_MM_FILTER=$1 timeout 70 $san --tool $tool --error-exitcode 9 build/tests/gpu/test_gpu_matmul \
      > "$OUT/san_$tool.txt" 2>&1
    echo "$tool rc=$? $(el) s: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/san_$tool.txt" | tail -1)" | tee -a "$OUT/times.txt"
  done
}
# mm_sweep NAME ROWS SHAPES FILTER: the sweep (KILN_BENCH=2, sweep configurations only) at ROWS
# (KILN_SWEEP_M) on SHAPES (KILN_SWEEP_SHAPES), two rounds while under LIMIT: $OUT/NAME_rR.csv, the
# lines in $OUT/NAME.txt
mm_sweep() {
  local r
  for r in 1 2; do
    left || break
    KILN_BENCH=2 KILN_SWEEP_ONLY=1 KILN_SWEEP_M=$2 KILN_SWEEP_SHAPES=$3 KILN_MM_FILTER=$4 \
      KILN_BENCH_CSV=$OUT/$1_r$r.csv timeout 150 build/tests/gpu/test_gpu_matmul > /tmp/sw.txt 2>&1
    { echo "== $1 round $r rc=$? ($(el) s)"; grep -E "^sweep|FAIL|compiled" /tmp/sw.txt; } >> "$OUT/$1.txt"
  done
}
