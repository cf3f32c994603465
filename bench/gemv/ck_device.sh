#!/usr/bin/env bash
# bench/gemv/ck_device.sh — one GPU call for the split-K in a cluster (matmul_wgmma.cuh
# KILN_WGMMA_CLUSTER_K; codegen/cg_family.c KILN_CG_WG_DECODE bit 4) at issue 9's M = 32:
#  1. correctness, in parallel (no timing yet): test_gpu_matmul's cluster-split configurations
#     (KILN_MM_FILTER=_ck: f64 / cuBLAS reference, poisoned outputs, M 17..64, N and K off the
#     tiles, K slices of one step or none, the folded norm, cooperative tiles, launched twice)
#     and the earlier skinny ones; test_decode_gpu; tests/gpu/qkv_epilogue_gpu.sh; `kiln run
#     --check` of the 8B layer at B=8 and (under compute-sanitizer memcheck and racecheck) at
#     B=32; the sanitizers on two cluster-split matmul configurations (KILN_MM_SMALL=1); and one
#     plain run of each build variant below, which fills the kernel cache for step 3;
#  2. the sweep at M = 17, 32, 64 of the 8B projections (the cluster splits and the earlier
#     configurations codegen picked; CUPTI kernel durations);
#  3. the 8B layer at B=32 (and B=8): `kiln run --profile --profile-runs=40`, the builds
#     interleaved to cancel clock drift: kiln-d3 (W early + evict-first, the split through the
#     workspace: the earlier codegen), build/kiln (the default: + the cluster split), kiln-d51
#     (+ the norm folded into the QKV epilogue's tiles).
# Needs build/variants/kiln-d3 and kiln-d51 (bench/gemv/build_variants.sh build 3 51). Run from
# the repository root with a built tree. Results in $OUT (default /tmp/ck_out): summary.txt,
# tests.log, sanitizer.log, sweep.csv, profile.txt, rest.tgz.
set -u
out=${OUT:-/tmp/ck_out}
mkdir -p "$out"
export KILN_SOURCE_DIR=$PWD
t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 )) s]"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader > "$out/summary.txt" 2>&1
work=$(mktemp -d)
san=compute-sanitizer
command -v $san >/dev/null 2>&1 || san=/usr/local/cuda/bin/compute-sanitizer
L8=samples/llama3_8b_layer.kiln
V3=build/variants/kiln-d3
V51=build/variants/kiln-d51
T_A=${T_A:-75}

# 1. correctness
( KILN_MM_FILTER=_ck timeout $T_A build/tests/gpu/test_gpu_matmul > "$work/mm_ck.log" 2>&1
  echo "test_gpu_matmul (_ck) rc=$?" > "$work/mm_ck.rc" ) &
( KILN_MM_FILTER='wgmma_bf16_nk_biasres_64x|wgmma_bf16_nk_store_64x128_s8|wgmma_f16_nk_biasres_64x64' \
      timeout $T_A build/tests/gpu/test_gpu_matmul > "$work/mm_old.log" 2>&1
  echo "test_gpu_matmul (earlier skinny) rc=$?" > "$work/mm_old.rc" ) &
( timeout $T_A build/tests/gpu/test_decode_gpu > "$work/decode.log" 2>&1; echo "test_decode_gpu rc=$?" > "$work/decode.rc" ) &
( KILN_CACHE_DIR=$work/c1 timeout $T_A tests/gpu/qkv_epilogue_gpu.sh build/kiln > "$work/qkv.log" 2>&1
  echo "qkv_epilogue_gpu.sh rc=$?" > "$work/qkv.rc" ) &
( KILN_CACHE_DIR=$work/c2 timeout $T_A build/kiln run $L8 --dims B=8,S=1,T=1024 --random --pos=1000 --check > "$work/check_b8.log" 2>&1
  echo "check B=8 rc=$?" > "$work/check_b8.rc" ) &
( KILN_CACHE_DIR=$work/c4 timeout $T_A $V51 run $L8 --dims B=32,S=1,T=256 --random --pos=100 --check > "$work/check_d51.log" 2>&1
  echo "check B=32 T=256 kiln-d51 (the QKV norm folded) rc=$?" > "$work/check_d51.rc" ) &
for tool in memcheck racecheck; do
  ( KILN_CACHE_DIR=$work/c3$tool timeout $T_A $san --tool $tool --error-exitcode 9 \
        build/kiln run $L8 --dims B=32,S=1,T=256 --random --pos=100 --check > "$work/san_${tool}_layer.log" 2>&1
    echo "$tool 8B layer B=32 T=256 --check rc=$?" >> "$work/san_$tool.rc" ) &
  ( KILN_MM_SMALL=1 KILN_MM_FILTER='wgmma_bf16_nk_biasres_64x128_s6_pp_c1_tma128_sk1_ck2_o7|wgmma_bf16_nk_biasres_64x64_s10_pp_c1_tma0_sk1_ck4_norm|wgmma_bf16_nk_biasres_128x128_s4_c1_tma128_sk1_ck2' \
        timeout $T_A $san --tool $tool --error-exitcode 9 build/tests/gpu/test_gpu_matmul > "$work/san_${tool}_mm.log" 2>&1
    echo "$tool test_gpu_matmul (3 cluster-split configurations, small cases) rc=$?" >> "$work/san_mm_$tool.rc" ) &
done
# the kernel cache for step 3 (one plain run per build; the same sources compile once)
( for k in build/kiln $V3 $V51; do
    KILN_CACHE_DIR=$work/kc timeout $T_A $k run $L8 --dims B=32,S=1,T=1024 --random --pos=1000 > /dev/null 2>&1
    KILN_CACHE_DIR=$work/kc timeout $T_A $k run $L8 --dims B=8,S=1,T=1024 --random --pos=1000 > /dev/null 2>&1
  done; echo "warm-up done" > "$work/warm.rc" ) &
wait
cat "$work"/*.rc >> "$out/summary.txt"
echo "correctness done $(el)" >> "$out/summary.txt"
{ for f in mm_ck mm_old; do echo "==== test_gpu_matmul $f"; grep -vE "^ok " "$work/$f.log" | grep -v "^kernel " | head -60
    grep -E "^kernel .*(ck|SPILLS)" "$work/$f.log"; grep -cE "^ok " "$work/$f.log"; done
  echo "==== test_decode_gpu"; tail -30 "$work/decode.log"
  echo "==== qkv_epilogue_gpu.sh"; tail -30 "$work/qkv.log"
  echo "==== check B=8"; tail -15 "$work/check_b8.log"
  echo "==== check d51 B=32"; tail -15 "$work/check_d51.log"; } > "$out/tests.log" 2>&1
for f in "$work"/san_*.log; do
  echo "==== $(basename "$f")"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|passed, |^FAIL|========= (Invalid|Race|Error|Warn)|check|error" "$f" | head -20
done > "$out/sanitizer.log" 2>&1

# 2. the sweep
KILN_BENCH=2 KILN_SWEEP_ONLY=1 KILN_SWEEP_M=17,32,64 KILN_SWEEP_SHAPES=8b. KILN_BENCH_CSV="$out/sweep.csv" \
    KILN_MM_FILTER='_ck|wgmma_bf16_nk_store_64x128_s8_pp_c1_tma128_sk1|wgmma_bf16_nk_biasres_64x64_s12_pp_c1_tma64_sk1_o3|wgmma_bf16_nk_biasres_64x64_s12_pp_c1_tma64_sk2_o3|wgmma_bf16_nk_store_64x64_s12_pp_c1_tma64_sk1|wgmma_bf16_nk_store_64x64_s12_pp_c1_tma64_sk2' \
    timeout ${T_SWEEP:-50} build/tests/gpu/test_gpu_matmul > "$work/sweep.log" 2>&1
echo "sweep rc=$? $(el)" >> "$out/summary.txt"

# 3. the layer, interleaved builds
prof() { # label binary dims
  echo "==== $1 $3"
  KILN_CACHE_DIR=$work/kc timeout 30 $2 run $L8 --dims $3 --random --pos=1000 --profile --profile-runs=40 2>&1
  echo "rc=$? $(el)"
}
{
  for r in 1 2; do
    prof "d3-earlier round $r" $V3 B=32,S=1,T=1024
    prof "default round $r" build/kiln B=32,S=1,T=1024
    prof "d51-qkv-norm round $r" $V51 B=32,S=1,T=1024
  done
  prof "d3-earlier" $V3 B=8,S=1,T=1024
  prof "default" build/kiln B=8,S=1,T=1024
  echo "==== default plan B=32"
  build/kiln compile $L8 -D B=32 -D S=1 -D T=1024 --emit=plan 2>&1 | sed -n 1,24p
} > "$out/profile.txt" 2>&1
echo "profiles done $(el)" >> "$out/summary.txt"
tar czf "$out/rest.tgz" -C "$work" $(cd "$work" && ls *.log 2>/dev/null) 2>/dev/null
echo "done $(el)" >> "$out/summary.txt"
