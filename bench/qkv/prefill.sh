#!/usr/bin/env bash
# bench/qkv/prefill.sh — the QKV epilogue at prefill (through shared memory and TMA stores,
# matmul_wgmma.cuh KILN_WGMMA_QKV) on the GPU machine: the checks against the interpreter
# (tests/gpu/qkv_epilogue_gpu.sh and more shapes: batch rows that tiles straddle, S below a
# tile, head dims 64 and 128, scaled RoPE, the register paths kept for partial rotary, skinny M
# and decode), compute-sanitizer memcheck and racecheck on two of them, the autotuning
# candidates of the projection with and without its epilogue against cuBLAS at M = 2048 and
# 16384 (bench/wgmma/kiln_sweep), the layer profiles of the two prefill rows (prof), and the
# two prefill rows of bench/run.sh with PyTorch beside them (bench, not in the default). Results
# under $OUT (or /tmp/qkvpre). PHASES (default "checks san sweep prof") picks phases; the sanitizers run
# beside the checks.
set -u
out=${OUT:-/tmp/qkvpre}
mkdir -p "$out/logs"
k=build/kiln
export KILN_CACHE_DIR=${KILN_CACHE_DIR:-/tmp/kiln_qkvpre_cache}
phases=${PHASES:-checks san sweep prof}
t0=$(date +%s)
L8='samples/llama3_8b_layer.kiln -D D=512 -D H=4 -D KV=2 -D F=512'
L1='samples/llama3_1b_layer.kiln -D D=256 -D H=4 -D KV=1 -D F=512'
checks=(
  "$L8 --dims B=2,S=300,T=512 --random --check"
  "$L8 --dims B=4,S=100,T=128 --random --check"
  "$L8 --dims B=3,S=257,T=300 --random --check --seed=7"
  "$L8 --dims B=2,S=300,T=512 --random --check --pos=212"
  "$L8 --dims B=1,S=2048,T=2048 --random --check"
  "$L1 --dims B=2,S=300,T=512 --random --check"
  "$L1 --dims B=1,S=1000,T=1024 --random --check --pos=24"
  "samples/llama3_1_8b_layer.kiln -D D=512 -D H=4 -D KV=2 -D F=256 -D ROPE_ORIG=4 --dims B=2,S=300,T=512 --random --check"
  "samples/pythia_1_4b_layer.kiln -D D=256 -D H=2 -D F=512 --dims B=2,S=300,T=512 --random --check"
  "samples/qwen3_8b_layer.kiln -D D=256 -D H=2 -D KV=1 --dims B=2,S=300,T=512 --random --check"
  "$L8 --dims B=2,S=40,T=64 --random --check"
  "$L8 --dims B=3,S=1,T=64 --random --steps 4 --check"
  "$L8 --dims B=2,S=300,T=512 --random --check --disable=epilogue-rope"
)
# the sanitizers run beside the checks (neither is timed)
san_pid=
if [[ $phases == *san* ]]; then
 (
  cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  for tool in memcheck racecheck; do
    ( timeout 100 $cs --tool $tool --report-api-errors all $k run $L8 --dims B=2,S=150,T=256 --random --check >"$out/logs/san_${tool}_8b.txt" 2>&1; echo "rc=$?" >>"$out/logs/san_${tool}_8b.txt" ) &
    ( timeout 100 $cs --tool $tool --report-api-errors all $k run $L1 --dims B=3,S=100,T=128 --random --check >"$out/logs/san_${tool}_1b.txt" 2>&1; echo "rc=$?" >>"$out/logs/san_${tool}_1b.txt" ) &
  done
  wait
  for f in "$out"/logs/san_*.txt; do echo "$f: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|^rc=|check step' "$f" | tr '\n' ' ')"; done >"$out/sanitizers.txt"
  echo "san: $(( $(date +%s) - t0 )) s" >>"$out/times.txt"
 ) &
  san_pid=$!
fi
if [[ $phases == *checks* ]]; then
  ( bash tests/gpu/qkv_epilogue_gpu.sh $k >"$out/logs/qkv_epilogue_gpu.txt" 2>&1; echo "rc=$?" >>"$out/logs/qkv_epilogue_gpu.txt" ) &
  i=0
  for c in "${checks[@]}"; do
    i=$((i + 1))
    ( echo "## kiln run $c"; timeout 120 $k run $c; echo "rc=$?" ) >"$out/logs/check_$i.txt" 2>&1 &
    while [ "$(jobs -r | wc -l)" -ge 9 ]; do sleep 1; done
  done
  wait $(jobs -p | grep -v "^${san_pid:-x}$") 2>/dev/null
  { for f in "$out"/logs/check_*.txt; do grep -H -E '^## |^rc=|check step' "$f" | tail -3; done
    tail -3 "$out/logs/qkv_epilogue_gpu.txt"; } >"$out/checks.txt"
  echo "checks: $(( $(date +%s) - t0 )) s" >>"$out/times.txt"
fi
[ -n "$san_pid" ] && wait "$san_pid"
if [[ $phases == *sweep* ]]; then
  KILN_SWEEP_SHAPES=${SWEEP_SHAPES:-QKV,QKV+rope} timeout 90 build/bench/kiln_sweep "$out/sweep.csv" >"$out/sweep.txt" 2>&1
  echo "rc=$?" >>"$out/sweep.txt"
  echo "sweep: $(( $(date +%s) - t0 )) s" >>"$out/times.txt"
fi
if [[ $phases == *prof* ]]; then
  {
    for d in B=1,S=2048,T=2048 B=4,S=4096,T=4096; do
      for x in "" --disable=fuse-qkv-epilogue; do
        echo "## kiln run samples/llama3_8b_layer.kiln --dims $d --random --profile --profile-runs=20 $x"
        timeout 100 $k run samples/llama3_8b_layer.kiln --dims $d --random --profile --profile-runs=20 $x
        echo "rc=$?"
      done
    done
  } >"$out/profiles.txt" 2>&1
  echo "prof: $(( $(date +%s) - t0 )) s" >>"$out/times.txt"
fi
if [[ $phases == *bench* ]]; then
  # the two prefill rows of bench/run.sh with their profiles (its files under logs/bench)
  OUT=$out/logs/bench BENCH_CASES=8b-prefill-2k,8b-prefill-b4-4k BENCH_PROFILE=1 \
    BENCH_VARIANTS=${BENCH_VARIANTS:-kiln,compile-graph} BENCH_TOTAL=${BENCH_TOTAL:-150} \
    timeout 210 bench/run.sh >/dev/null 2>&1
  cp "$out/logs/bench/results.md" "$out/logs/bench/bench.log" "$out/" 2>/dev/null
  echo "bench: $(( $(date +%s) - t0 )) s" >>"$out/times.txt"
fi
tar czf "$out/logs.tar.gz" -C "$out" logs && rm -rf "$out/logs"
