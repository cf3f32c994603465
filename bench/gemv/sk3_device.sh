#!/usr/bin/env bash
# bench/gemv/sk3_device.sh — one GPU call for issue 9's M = 32 projections (matmul_wgmma.cuh
# KILN_WGMMA_EPI_EARLY 2: the epilogue's operands in registers from a tile's start; KILN_WGMMA_TAIL:
# the tile's end without a round trip; codegen/cg_family.c KILN_CG_WG_DECODE bits 6 and 7, default
# mask 211):
#  1. correctness, in parallel, before any timing: test_gpu_matmul's new configurations (74-81:
#     f64 / cuBLAS reference, poisoned outputs, M 1..4099 incl. 17, 31, 32, 33, 64, N and K off the
#     tiles, more tiles than resident clusters), test_decode_gpu, tests/gpu/qkv_epilogue_gpu.sh,
#     `kiln run --check` of the 8B layer (small dims at B = 32, 8, 17; full dims at B = 32),
#     compute-sanitizer racecheck and memcheck of the small layer at B = 32 and racecheck of three
#     new matmul configurations (KILN_MM_SMALL); meanwhile the kernel cache for step 3 is filled;
#  2. the M = 32 sweep of the 8B projections: the cluster split 2 with and without the new options
#     (CUPTI kernel durations, weights rotated, cuBLAS in the same process);
#  3. layer profiles (`kiln run --profile --profile-runs=40`), main's build ($BASE/kiln) interleaved
#     with this one: B=32 two rounds (base, d211 = both options, d83 = registers only, d147 = tail only),
#     then B=8, 16, 64 and prefill S=2048 (base, default).
# test_decode_gpu runs the library's default mask (19 until this call has passed; with 211 as
# the default it checks the new paths too). Needs build/variants/kiln-d211, kiln-d83 and
# kiln-d147 (bench/gemv/build_variants.sh build 211 83 147; NEW names another binary) and
# BASE (a directory with main's kiln). Results in $OUT: summary.txt (short table last), tests.log,
# sanitizer.log, sweep.csv, profile.txt, rest.tgz.
set -u
out=${OUT:-/tmp/sk3_out}
mkdir -p "$out"
export KILN_SOURCE_DIR=$PWD
base=${BASE:?BASE: the directory of main\'s kiln}
t0=$(date +%s)
el() { echo "[$(($(date +%s) - t0)) s]"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader >"$out/summary.txt" 2>&1
work=$(mktemp -d)
san=compute-sanitizer
command -v $san >/dev/null 2>&1 || san=/usr/local/cuda/bin/compute-sanitizer
L8=samples/llama3_8b_layer.kiln
SMALL="-D D=1024 -D H=8 -D KV=2 -D F=2048"
NEW=${NEW:-build/variants/kiln-d211} # the options on (the default once this call has passed)
V83=build/variants/kiln-d83
V147=build/variants/kiln-d147
T_A=${T_A:-70}
KC=$work/kc

# 1. correctness
(KILN_MM_FILTER='_o51|_o48|_o35' timeout $T_A build/tests/gpu/test_gpu_matmul >"$work/mm.log" 2>&1
  echo "test_gpu_matmul (configurations 74-81) rc=$?" >"$work/mm.rc") &
(timeout $T_A build/tests/gpu/test_decode_gpu >"$work/decode.log" 2>&1; echo "test_decode_gpu rc=$?" >"$work/decode.rc") &
(KILN_CACHE_DIR=$work/c1 timeout $T_A tests/gpu/qkv_epilogue_gpu.sh $NEW >"$work/qkv.log" 2>&1
  echo "qkv_epilogue_gpu.sh rc=$?" >"$work/qkv.rc") &
(for b in 32 8 17; do
   KILN_CACHE_DIR=$work/c2 timeout 25 $NEW run $L8 --dims B=$b,S=1,T=1024 --random --pos=1000 --check $SMALL 2>&1 | tail -4
   echo "check small dims B=$b rc=${PIPESTATUS[0]}"
 done >"$work/check.log" 2>&1
 KILN_CACHE_DIR=$work/c2 timeout 30 $NEW run $L8 --dims B=32,S=1,T=1024 --random --pos=1000 --check >>"$work/check.log" 2>&1
 echo "check full dims B=32 rc=$?" >>"$work/check.log"; grep rc= "$work/check.log" >"$work/check.rc") &
for tool in racecheck memcheck; do
  (KILN_CACHE_DIR=$work/c3$tool timeout $T_A $san --tool $tool --error-exitcode 9 \
     $NEW run $L8 --dims B=32,S=1,T=256 --random --pos=100 --check $SMALL >"$work/san_${tool}_layer.log" 2>&1
   echo "$tool 8B layer small dims B=32 T=256 --check rc=$?" >"$work/san_${tool}_layer.rc") &
done
(KILN_MM_SMALL=1 KILN_MM_FILTER='biasres_64x128_s6_pp_c1_tma128_sk1_ck2_o51|biasres_64x64_s10_pp_c1_tma64_sk1_ck4_o51|biasres_64x128_s8_pp_c1_tma128_sk1_o51' \
   timeout $T_A $san --tool racecheck --error-exitcode 9 build/tests/gpu/test_gpu_matmul >"$work/san_race_mm.log" 2>&1
 echo "racecheck test_gpu_matmul (3 new configurations, small cases) rc=$?" >"$work/san_race_mm.rc") &
# the kernel cache of step 3 (one plain step per build and shape; little GPU work)
warm() { KILN_CACHE_DIR=$KC timeout 40 "$1" run $L8 --dims "$2" --random --pos="$3" >/dev/null 2>&1; }
(for d in B=32,S=1,T=1024 B=8,S=1,T=1024 B=16,S=1,T=1024; do warm "$base/kiln" $d 1000; warm $NEW $d 1000; done
 echo "warm 1 done" >"$work/warm1.rc") &
(warm $V83 B=32,S=1,T=1024 1000; warm $V147 B=32,S=1,T=1024 1000
 for k in "$base/kiln" $NEW; do warm "$k" B=64,S=1,T=1024 1000; warm "$k" B=1,S=2048,T=2048 0; done
 echo "warm 2 done" >"$work/warm2.rc") &
wait
cat "$work"/*.rc >>"$out/summary.txt"
echo "correctness done $(el)" >>"$out/summary.txt"
{
  echo "==== test_gpu_matmul (74-81)"; grep -vE "^ok " "$work/mm.log" | head -40; echo "ok lines: $(grep -cE '^ok ' "$work/mm.log")"
  echo "==== test_decode_gpu"; tail -15 "$work/decode.log"
  echo "==== qkv_epilogue_gpu.sh"; tail -25 "$work/qkv.log"
  echo "==== checks"; cat "$work/check.log" | tail -30
} >"$out/tests.log" 2>&1
for f in "$work"/san_*.log; do
  echo "==== $(basename "$f")"
  grep -E "ERROR SUMMARY|RACECHECK SUMMARY|passed, |^FAIL|========= (Invalid|Race|Error|Warn)|check|error" "$f" | head -20
done >"$out/sanitizer.log" 2>&1

# 2. the sweep at M = 32 (8B shapes): the cluster split 2, store and bias + residual, options
KILN_BENCH=2 KILN_SWEEP_ONLY=1 KILN_SWEEP_M=32 KILN_SWEEP_SHAPES=8b. KILN_BENCH_CSV="$out/sweep.csv" \
  KILN_MM_FILTER='biasres_64x64_s12_pp_c1_tma64_sk1_ck2|biasres_64x128_s6_pp_c1_tma128_sk1_ck2|store_64x128_s6_pp_c1_tma128_sk1_ck2|store_64x64_s12_pp_c1_tma64_sk1_ck2' \
  timeout ${T_SWEEP:-40} build/tests/gpu/test_gpu_matmul >"$work/sweep.log" 2>&1
echo "sweep rc=$? $(el)" >>"$out/summary.txt"

# 3. the layer, builds interleaved (one kernel cache)
prof() { # label binary dims pos
  echo "==== $1 $3"
  KILN_CACHE_DIR=$KC timeout 30 "$2" run $L8 --dims "$3" --random --pos="$4" --profile --profile-runs=40 2>&1
  echo "rc=$? $(el)"
}
{
  for r in 1 2; do
    prof "base round $r" "$base/kiln" B=32,S=1,T=1024 1000
    prof "new-d211 round $r" $NEW B=32,S=1,T=1024 1000
    prof "d83-regs round $r" $V83 B=32,S=1,T=1024 1000
    prof "d147-tail round $r" $V147 B=32,S=1,T=1024 1000
  done
  for d in B=8,S=1,T=1024 B=16,S=1,T=1024 B=64,S=1,T=1024; do
    prof base "$base/kiln" $d 1000
    prof new-d211 $NEW $d 1000
  done
  prof base "$base/kiln" B=1,S=2048,T=2048 0
  prof new-d211 $NEW B=1,S=2048,T=2048 0
} >"$out/profile.txt" 2>&1
echo "profiles done $(el)" >>"$out/summary.txt"
tar czf "$out/rest.tgz" -C "$work" $(cd "$work" && ls ./*.log 2>/dev/null) 2>/dev/null
# the short table: each profile's layer time and its kernels' medians (k0 norm, k1 QKV, k2
# attention, k3 O, k5 gate/up, k6 down)
{
  echo "---- layers (median us; kernels k0..k6 medians)"
  awk '/^==== /{if (lab != "") print lab ": " lay " |" ks; lab=substr($0,6); lay=""; ks=""}
       /^layer: median/{lay=$3}
       /^kiln_llama3_8b_layer_k[0-9]_/{k=substr($1, length("kiln_llama3_8b_layer_") + 1, 2);
         if (match($0, /[0-9.]+ us/)) ks = ks " " k "=" substr($0, RSTART, RLENGTH - 3)}
       END{print lab ": " lay " |" ks}' "$out/profile.txt"
  echo "---- sweep (us, TB/s)"
  awk -F, 'NR>1{print $1, $5, $6, $10}' "$out/sweep.csv" 2>/dev/null
} >>"$out/summary.txt"
echo "done $(el)" >>"$out/summary.txt"
cat "$out/summary.txt" | tail -60
