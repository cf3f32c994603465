#!/usr/bin/env bash
# bench/gemv/decode_opts_device.sh — one GPU call for matmul_wgmma's decode-sized options
# (codegen/cg_family.c KILN_CG_WG_DECODE; bench/gemv/build_variants.sh builds build/variants/kiln-dMASK):
#  1. correctness, in parallel: test_gpu_matmul's configurations with the options (KILN_MM_FILTER=_o:
#     f64 / cuBLAS reference, poisoned outputs, M = 1..4099, N and K off the tiles, split-K run twice)
#     and one without them (the skinny 64x128 split 2), `kiln run --check` of the 8B layer at decode
#     B = 4, 8, 32 (T = 1024, positions 1000 + b), tests/gpu/qkv_epilogue_gpu.sh;
#  2. the M = 32 sweep of the bias + residual skinny configurations with and without the options
#     (standalone: no kernel before, so W early cannot show there);
#  3. `kiln run --profile --profile-runs=40` of the 8B layer at B = 32, 8, 4 with each variant.
# Run from the repository root with a built tree. Results in $OUT: summary.txt, tests.log,
# sweep.csv, profiles.txt, rest.tgz. Limits (seconds): T_MM, T_CHECK, T_QKV, T_SWEEP, T_PROF, T_TOTAL. VARIANTS: the masks profiled at B = 32 (default "0 15 7 1"; 15 is build/kiln).
set -u
out=${OUT:-/tmp/dopt_out}
mkdir -p "$out"
export KILN_SOURCE_DIR=$PWD
t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 )) s]"; }
work=$(mktemp -d)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader > "$out/summary.txt" 2>&1
L8=samples/llama3_8b_layer.kiln
V=build/variants
bin() { [ "$1" = 15 ] && echo build/kiln || echo "$V/kiln-d$1"; }

( KILN_MM_FILTER=_o timeout ${T_MM:-70} build/tests/gpu/test_gpu_matmul > "$work/mm_o.log" 2>&1
  echo "test_gpu_matmul KILN_MM_FILTER=_o rc=$?" > "$work/mm_o.rc" ) &
( KILN_MM_FILTER=wgmma_bf16_nk_biasres_64x128_s8_pp_c1_tma128_sk2 timeout ${T_MM:-70} build/tests/gpu/test_gpu_matmul \
      > "$work/mm_44.log" 2>&1
  echo "test_gpu_matmul 64x128 sk2 (no options) rc=$?" > "$work/mm_44.rc" ) &
( for b in 32 8 4; do
      KILN_CACHE_DIR=$work/c1 timeout ${T_CHECK:-40} build/kiln run $L8 --dims B=$b,S=1,T=1024 --random --pos=1000 --check \
          > "$work/check_b$b.log" 2>&1
      echo "kiln run 8B B=$b --check rc=$? $(grep -c '^check' "$work/check_b$b.log") check lines"
  done > "$work/check.rc" ) &
( KILN_CACHE_DIR=$work/c2 timeout ${T_QKV:-70} tests/gpu/qkv_epilogue_gpu.sh build/kiln > "$work/qkv.log" 2>&1
  echo "qkv_epilogue_gpu.sh rc=$?" > "$work/qkv.rc" ) &
wait
cat "$work"/*.rc >> "$out/summary.txt"
echo "correctness done $(el)" >> "$out/summary.txt"
{ for f in mm_o mm_44; do echo "==== $f"; grep -vE "^ok " "$work/$f.log"; echo "ok lines: $(grep -cE '^ok ' "$work/$f.log")"; done
  for b in 4 8 32; do echo "==== check B=$b"; tail -12 "$work/check_b$b.log"; done
  echo "==== qkv_epilogue_gpu.sh"; cat "$work/qkv.log"; } > "$out/tests.log" 2>&1

KILN_BENCH=2 KILN_SWEEP_ONLY=1 KILN_SWEEP_M=32 KILN_MM_FILTER=nk_biasres_64 KILN_BENCH_CSV="$out/sweep.csv" \
    timeout ${T_SWEEP:-30} build/tests/gpu/test_gpu_matmul > "$work/sweep.log" 2>&1
echo "sweep rc=$? $(el)" >> "$out/summary.txt"

prof() {
    # T_TOTAL: no profile starts after that many seconds of the call
    [ $(( $(date +%s) - t0 )) -lt ${T_TOTAL:-200} ] || { echo "==== kiln-d$1 B=$2 skipped (T_TOTAL)"; return; }
    echo "==== kiln-d$1 B=$2"
    KILN_CACHE_DIR=$work/c3 timeout ${T_PROF:-40} "$(bin "$1")" run $L8 --dims B=$2,S=1,T=1024 --random --pos=1000 \
        --profile --profile-runs=40 2>&1
    echo "rc=$? $(el)"
}
{
    for m in ${VARIANTS:-0 15 7 1}; do prof "$m" 32; done
    for b in 8 4; do prof 0 $b; prof 15 $b; done
} > "$out/profiles.txt" 2>&1
echo "profiles done $(el)" >> "$out/summary.txt"
tar czf "$out/rest.tgz" -C "$work" $(cd "$work" && ls *.log 2>/dev/null) 2>/dev/null
echo "done $(el)" >> "$out/summary.txt"
