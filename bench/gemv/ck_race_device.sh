#!/usr/bin/env bash
# bench/gemv/ck_race_device.sh — a short GPU call after bench/gemv/ck_device.sh: compute-sanitizer
# racecheck on cluster-split configurations of two (KILN_MM_SMALL=1: the CPU-checked cases, among
# them one with more tiles than resident clusters, so that clusters reuse the exchange), beside the
# split of four that racecheck flagged; then memcheck on the same. Results in $OUT (default
# /tmp/ckr_out): race.txt, rest.tgz.
set -u
out=${OUT:-/tmp/ckr_out}
mkdir -p "$out"
export KILN_SOURCE_DIR=$PWD
work=$(mktemp -d)
san=compute-sanitizer
command -v $san >/dev/null 2>&1 || san=/usr/local/cuda/bin/compute-sanitizer
f2='wgmma_bf16_nk_biasres_64x128_s6_pp_c1_tma128_sk1_ck2_o7|wgmma_f16_nk_biasres_64x64_s12_pp_c1_tma64_sk1_ck2'
f4='wgmma_bf16_nk_biasres_64x64_s10_pp_c1_tma64_sk1_ck4_o3'
( KILN_MM_SMALL=1 KILN_MM_FILTER=$f2 timeout ${T_R:-28} $san --tool racecheck --error-exitcode 9 \
      build/tests/gpu/test_gpu_matmul > "$work/race2.log" 2>&1; echo "racecheck split 2 rc=$?" > "$work/race2.rc" ) &
( KILN_MM_SMALL=1 KILN_MM_FILTER=$f4 timeout ${T_R:-28} $san --tool racecheck --error-exitcode 9 \
      build/tests/gpu/test_gpu_matmul > "$work/race4.log" 2>&1; echo "racecheck split 4 rc=$?" > "$work/race4.rc" ) &
wait
{ cat "$work"/*.rc
  for f in race2 race4; do echo "==== $f"; grep -E "^(ok|FAIL)|RACECHECK SUMMARY|passed, |Race reported" "$work/$f.log" | head -40; done; } > "$out/race.txt" 2>&1
tar czf "$out/rest.tgz" -C "$work" race2.log race4.log 2>/dev/null
