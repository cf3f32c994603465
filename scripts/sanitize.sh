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
#   take racecheck far too long; the samples' runs reach every family at small dims). The tools run
#   side by side, one lane each (memcheck three: samples and two of families), so the whole sweep fits one
#   device call; the fault sweep runs alone afterwards (it compares device memory in use). Each
#   sanitized command stops after KILN_SANITIZE_TIMEOUT seconds (default 240), a failure.
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

small="-D D=256 -D F=512"
# name, then the command
runs=(
  "1b-prefill|$kiln run samples/llama3_1b_layer.kiln $small --dims B=2,S=5,T=16 --random --check"
  "1b-decode|$kiln run samples/llama3_1b_layer.kiln $small --dims B=2,S=1,T=16 --random --steps 3 --check"
  "8b-prefill|$kiln run samples/llama3_8b_layer.kiln $small --dims B=2,S=3,T=8 --random --check"
  "8b-decode|$kiln run samples/llama3_8b_layer.kiln $small --dims B=1,S=1,T=8 --random --steps 3 --check"
  "3.1-8b-prefill|$kiln run samples/llama3_1_8b_layer.kiln -D F=256 -D ROPE_ORIG=4 --dims B=2,S=3,T=16 --random --check"
  "3.1-8b-decode|$kiln run samples/llama3_1_8b_layer.kiln -D F=256 -D ROPE_ORIG=4 --dims B=1,S=1,T=16 --random --steps 3 --check"
  "gpt2|$kiln run samples/gpt2_block.kiln -D D=96 --dims B=2,S=7 --random --check"
  "gpt2-graphs|$kiln run samples/gpt2_block.kiln -D D=96 --dims B=1,S=4 --random --steps 3"
  "pythia-prefill|$kiln run samples/pythia_1_4b_layer.kiln $small -D H=2 --dims B=2,S=5,T=16 --random --check"
  "pythia-decode|$kiln run samples/pythia_1_4b_layer.kiln $small -D H=2 --dims B=2,S=1,T=16 --random --steps 3 --check"
  "gemma2-prefill|$kiln run samples/gemma2_2b_layer.kiln $small -D WINDOW=3 --dims B=2,S=5,T=16 --random --check"
  "gemma2-decode|$kiln run samples/gemma2_2b_layer.kiln $small -D WINDOW=3 --dims B=2,S=1,T=16 --random --steps 3 --check"
  "qwen3-prefill|$kiln run samples/qwen3_8b_layer.kiln $small -D H=2 -D KV=1 --dims B=2,S=5,T=16 --random --check"
  "qwen3-decode|$kiln run samples/qwen3_8b_layer.kiln $small -D H=2 -D KV=1 --dims B=1,S=1,T=16 --random --steps 3 --check"
  "mixtral-prefill|$kiln run samples/mixtral_8x7b_layer.kiln $small -D H=2 -D KV=1 --dims B=2,S=5,T=16 --random --check"
  "mixtral-decode|$kiln run samples/mixtral_8x7b_layer.kiln $small -D H=2 -D KV=1 --dims B=1,S=1,T=16 --random --steps 3 --check"
  "qwen-moe-prefill|$kiln run samples/qwen_moe_layer.kiln -D D=256 -D H=2 -D FE=64 -D FS=128 -D E=8 --dims B=2,S=5,T=16 --random --check"
  "qwen-moe-decode|$kiln run samples/qwen_moe_layer.kiln -D D=256 -D H=2 -D FE=64 -D FS=128 -D E=8 --dims B=1,S=1,T=16 --random --steps 3 --check"
  "prefill-wgmma|$kiln run samples/llama3_8b_layer.kiln -D D=512 -D F=1024 --dims B=1,S=256,T=256 --random --check"
  "prefill-wgmma-hd128|$kiln run samples/llama3_8b_layer.kiln -D D=1024 -D H=8 -D KV=2 -D F=1024 --dims B=1,S=256,T=256 --random --check"
)
# the kernel-family GPU tests (memcheck only: their large cases would take the other tools far too long;
# the samples' runs reach every family at small dims)
families=(
  "test_gpu_matmul|$build/tests/gpu/test_gpu_matmul"
  "test_gpu_attention|$build/tests/gpu/test_gpu_attention"
  "test_gpu_attention_wgmma|$build/tests/gpu/test_gpu_attention_wgmma"
  "test_decode_gpu|$build/tests/gpu/test_decode_gpu"
  "test_cg_gpu|$build/tests/gpu/test_cg_gpu"
  "test_rt_launch|$build/tests/gpu/test_rt_launch"
)
for t in "$build"/tests/gpu/test_gpu_moe "$build"/tests/gpu/test_autotune_gpu "$build"/tests/model/test_pack_gpu; do
  [ -x "$t" ] && families+=("$(basename "$t")|$t")
done

# warm the kernel cache (side by side), so the sanitized runs time kernels, not NVRTC
for r in "${runs[@]}"; do
  name=${r%%|*} cmd=${r#*|}
  # shellcheck disable=SC2086
  { $cmd >"$out/warm-$name.log" 2>&1 || echo "warm $name: FAILED (exit $?)" >"$out/warm-$name.failed"; } &
done
wait
for f in "$out"/warm-*.failed; do [ -e "$f" ] && { cat "$f" | tee -a "$summary"; status=1; rm -f "$f"; }; done

# lane TOOL TAG NAME|CMD...: one tool over its runs, one after the other; a line each to summary.txt,
# failure marked by $out/lane-....failed. Lanes run side by side (the tools are CPU-bound on the host).
lane() {
  local tool=$1 tag=$2
  shift 2
  local opts=(--tool "$tool" --error-exitcode 99 --print-limit 20)
  case $tool in
    memcheck) opts+=(--leak-check full --check-device-heap yes) ;;
    racecheck) opts+=(--racecheck-report all) ;;
  esac
  local r
  for r in "$@"; do
    local name=${r%%|*} cmd=${r#*|} extra=()
    # test_rt_launch provokes CUDA API errors on purpose (a missing kernel, shared memory above the
    # device's limit, ...) to check that the launcher reports them; memory errors still count there,
    # and every sample run above reports API errors in full
    if [ "$tool" = memcheck ]; then
      extra=(--report-api-errors all)
      [ "$name" = test_rt_launch ] && extra=(--report-api-errors no)
    fi
    local log="$out/$tool-$name.log" t0 rc errs hazards line
    t0=$(date +%s)
    # shellcheck disable=SC2086
    timeout "$limit" "$cs" "${opts[@]}" "${extra[@]}" $cmd >"$log" 2>&1
    rc=$?
    errs=$(grep -Eo 'ERROR SUMMARY: [0-9]+ error' "$log" | tail -1 | grep -Eo '[0-9]+' || echo "?")
    hazards=$(grep -Eo 'RACECHECK SUMMARY: [0-9]+ hazard' "$log" | tail -1 | grep -Eo '[0-9]+' || true)
    line="$tool $name$([ "$name" = test_rt_launch ] && echo " (${extra[*]})"): exit $rc, errors ${errs}${hazards:+, hazards $hazards}, $(( $(date +%s) - t0 )) s"
    echo "$line" >>"$summary" # one short line per append: lanes side by side do not interleave within it
    if [ "$rc" -ne 0 ] || [ "$errs" != 0 ] || { [ -n "$hazards" ] && [ "$hazards" != 0 ]; }; then
      : >"$out/lane-$tool-$tag.failed"
    fi
  done
}
for tool in "${tools[@]}"; do
  [ "$tool" = fault ] && continue
  lane "$tool" samples "${runs[@]}" &
  if [ "$tool" = memcheck ]; then # the family tests in two lanes: even and odd entries
    even=() odd=()
    for i in "${!families[@]}"; do if (( i % 2 )); then odd+=("${families[$i]}"); else even+=("${families[$i]}"); fi; done
    lane "$tool" families-a "${even[@]}" &
    lane "$tool" families-b "${odd[@]}" &
  fi
done
wait
cat "$summary"
for f in "$out"/lane-*.failed; do [ -e "$f" ] && { status=1; rm -f "$f"; }; done

# does initcheck see TMA stores? (the Hopper matmul's output tiles leave through them)
nvcc=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
if [[ " ${tools[*]} " == *" initcheck "* ]] && [ -x "$nvcc" ]; then
  if "$nvcc" -arch=sm_90a -o "$out/initcheck_tma_probe" scripts/initcheck_tma_probe.cu >"$out/probe-build.log" 2>&1; then
    for how in plain bulk; do
      "$cs" --tool initcheck --print-limit 4 "$out/initcheck_tma_probe" "$how" >"$out/initcheck-probe-$how.log" 2>&1
      errs=$(grep -Eo 'ERROR SUMMARY: [0-9]+ error' "$out/initcheck-probe-$how.log" | grep -Eo '[0-9]+' || echo "?")
      echo "initcheck probe, buffer written by a $how store then read: errors $errs; $(grep -E 'store: sum' "$out/initcheck-probe-$how.log")" |
        tee -a "$summary"
    done
    rm -f "$out/initcheck_tma_probe"
  else
    echo "initcheck probe: nvcc failed (probe-build.log)" | tee -a "$summary"
  fi
fi

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
