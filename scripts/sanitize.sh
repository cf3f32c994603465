#!/usr/bin/env bash
# compute-sanitizer over Kiln on the GPU machine (README, "Sanitizers"):
# memcheck (leaks and CUDA API errors included: 0 errors of any kind),
# racecheck, synccheck and initcheck, each over
#   - every sample at small dims, a prefill run and decode steps (CUDA graph
#     capture and replay): `kiln run --random --check`;
#   - the GPU tests of every kernel family (matmul mma.sync / wgmma / GEMV,
#     attention prefill / decode, row and elementwise, the launcher).
# Then the GPU fault sweep (tests/fault/test_fault_gpu), without a sanitizer.
# Run from the repository root over a carried build/ (as scripts/gpu.sh):
#   scripts/sanitize.sh [BUILD [TOOL...]]   default build/ and all four tools, then the fault sweep
#   (TOOL: memcheck racecheck synccheck initcheck fault); logs, summary.txt and logs.tar.gz in $OUT
#   (or /tmp/kiln-sanitize). The kernel-family tests run under memcheck only (their large cases would
#   take racecheck far too long; the samples' runs reach every family at small dims). Each sanitized
#   command stops after KILN_SANITIZE_TIMEOUT seconds (default 240), which counts as a failure.
# Exit 1 when any tool reports an error or any run fails.
set -u
build=${1:-build}
shift || true
tools=("$@")
[ ${#tools[@]} -gt 0 ] || tools=(memcheck racecheck synccheck initcheck fault)
limit=${KILN_SANITIZE_TIMEOUT:-240}
out=${OUT:-/tmp/kiln-sanitize}
mkdir -p "$out"
here=$(pwd)
if [ ! -e /work/main/CMakeLists.txt ]; then mkdir -p /work && ln -sfn "$here" /work/main; fi
cs=${COMPUTE_SANITIZER:-$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)}
kiln=$build/kiln
export KILN_CACHE_DIR=${KILN_CACHE_DIR:-$(mktemp -d)}
summary=$out/summary.txt
: >"$summary"
status=0

# name, then the command
runs=(
  "1b-prefill|$kiln run samples/llama3_1b_layer.kiln -D D=256 -D F=512 --dims B=2,S=5,T=16 --random --check"
  "1b-decode|$kiln run samples/llama3_1b_layer.kiln -D D=256 -D F=512 --dims B=2,S=1,T=16 --random --steps 3 --check"
  "8b-prefill|$kiln run samples/llama3_8b_layer.kiln -D D=256 -D F=512 --dims B=2,S=3,T=8 --random --check"
  "8b-decode|$kiln run samples/llama3_8b_layer.kiln -D D=256 -D F=512 --dims B=1,S=1,T=8 --random --steps 3 --check"
  "3.1-8b-prefill|$kiln run samples/llama3_1_8b_layer.kiln -D F=256 -D ROPE_ORIG=4 --dims B=2,S=3,T=16 --random --check"
  "3.1-8b-decode|$kiln run samples/llama3_1_8b_layer.kiln -D F=256 -D ROPE_ORIG=4 --dims B=1,S=1,T=16 --random --steps 3 --check"
  "gpt2|$kiln run samples/gpt2_block.kiln -D D=96 --dims B=2,S=7 --random --check"
  "gpt2-graphs|$kiln run samples/gpt2_block.kiln -D D=96 --dims B=1,S=4 --random --steps 3"
  "prefill-wgmma|$kiln run samples/llama3_8b_layer.kiln -D D=512 -D F=1024 --dims B=1,S=256,T=256 --random --check"
  "test_gpu_matmul|$build/tests/gpu/test_gpu_matmul"
  "test_gpu_attention|$build/tests/gpu/test_gpu_attention"
  "test_cg_gpu|$build/tests/gpu/test_cg_gpu"
  "test_rt_launch|$build/tests/gpu/test_rt_launch"
)

# warm the kernel cache, so the sanitized runs time kernels, not NVRTC
for r in "${runs[@]}"; do
  name=${r%%|*} cmd=${r#*|}
  case $name in test_*) continue ;; esac
  $cmd >"$out/warm-$name.log" 2>&1 || { echo "warm $name: FAILED (exit $?)" | tee -a "$summary"; status=1; }
done

for tool in "${tools[@]}"; do
  [ "$tool" = fault ] && continue
  opts=(--tool "$tool" --error-exitcode 99 --print-limit 20)
  case $tool in
    memcheck) opts+=(--leak-check full --report-api-errors all --check-device-heap yes) ;;
    racecheck) opts+=(--racecheck-report all) ;;
    initcheck) ;;
  esac
  for r in "${runs[@]}"; do
    name=${r%%|*} cmd=${r#*|}
    case $name in test_*) [ "$tool" = memcheck ] || continue ;; esac
    log="$out/$tool-$name.log"
    t0=$(date +%s)
    # shellcheck disable=SC2086
    timeout "$limit" "$cs" "${opts[@]}" $cmd >"$log" 2>&1
    rc=$?
    errs=$(grep -Eo 'ERROR SUMMARY: [0-9]+ error' "$log" | tail -1 | grep -Eo '[0-9]+' || echo "?")
    hazards=$(grep -Eo 'RACECHECK SUMMARY: [0-9]+ hazard' "$log" | tail -1 | grep -Eo '[0-9]+' || true)
    line="$tool $name: exit $rc, errors ${errs}${hazards:+, hazards $hazards}, $(( $(date +%s) - t0 )) s"
    echo "$line" | tee -a "$summary"
    if [ "$rc" -ne 0 ] || [ "$errs" != 0 ] || { [ -n "$hazards" ] && [ "$hazards" != 0 ]; }; then status=1; fi
  done
done

# the GPU fault sweep
if [[ " ${tools[*]} " == *" fault "* ]]; then
t0=$(date +%s)
(cd /work/main && "$build/tests/fault/test_fault_gpu") >"$out/fault-gpu.log" 2>&1
rc=$?
echo "fault sweep (GPU): exit $rc, $(( $(date +%s) - t0 )) s; $(tail -1 "$out/fault-gpu.log")" | tee -a "$summary"
grep -E 'calls:' "$out/fault-gpu.log" | tee -a "$summary"
[ "$rc" -eq 0 ] || status=1
fi
tar -czf "$out/logs.tar.gz" -C "$out" --exclude logs.tar.gz . 2>/dev/null
exit $status
