#!/usr/bin/env bash
# bench/device/call_probe.sh — how fast one SM streams W, against how many SMs stream at once
# (issue 9's M = 32 target). call_krot.sh (2026-12-08, H100) found neither the K walk's order nor a
# box-major W layout to matter much, and the H200 sweeps fit a cap of ~32 GB/s per SM for the skinny
# wgmma tiles (132 x 32 GB/s = 4.2 TB/s < 4.49: a skinny product would then reach the H200's
# bandwidth only with every SM streaming to the end). The probes (test_gpu_matmul's sweep, shapes
# "probe.nX": X column blocks of 128 over K = 16384, one 4 MB tile per SM up to 132): at M = 32 the
# 64x128 tile at 8 and 4 stages and 64x256 at 4, at M = 1 the GEMVs, cuBLAS beside; two rounds.
# Then the widths that spread the 8B layer's column blocks over the SMs (matmul_wgmma.cuh's new
# kwg_mma widths; test_gpu_matmul configurations 98-103 checked first, memcheck and racecheck of
# two): at M = 32 and 64, QKV 64x48, gate/up 64x224 and 64x112, O and down 64x32, against the
# configurations codegen picks today; two rounds.
# Then codegen's rule for them (KILN_CG_WG_EVEN=1, build-gpu/variants/kiln_even: the 8B layer at
# B = 32 takes QKV 64x48 and gate/up 64x224, the 1B O and down 64x16; =3, kiln_even3: also the
# unsplit widths where they tie with a split, the 8B O and down 64x32, the 1B QKV 64x32):
# `kiln run --check` of the 8B layer at B = 17 and 32 and the 1B at B = 32 with each, then the
# layers' profiles at B = 32 interleaved with the default build, two rounds; on an H200 then the
# B = 32 bench row.
# Pack with bench/device/pack_probe.sh; results in $OUT.
DEFAULT_LIMIT=540
. "$(dirname "$0")/common.sh"
clocks_bg
mm_sweep probe 1,32 probe \
  'store_64x128_s8_pp_c1_tma128_sk1|store_64x128_s4_pp_c1_tma128_sk1|store_64x256_s4_pp_c1_tma128_sk1|c8_sk1_m1_grid264'
mm_cases 'biasres_64x48_|store_64x224_|f16_nk_biasres_64x192|biasres_64x32_s12_pp_c1_tma0_sk2|64x112_s6|biasres_64x16_'
mm_sweep width 32,64 8b. \
  'tma0_sk1_o3|store_64x128_s6_pp_c1_tma128_sk1_ck2_o35|biasres_64x64_s12_pp_c1_tma64_sk1_ck2_o51|store_64x128_s8_pp_c1_tma128_sk1_o3'
mm_san 'biasres_64x48_|64x112_s6'
E=build/variants/kiln_even E3=build/variants/kiln_even3
for e in $E $E3; do for a in "8b-b32 samples/llama3_8b_layer.kiln --dims B=32,S=1,T=1024 --pos=1000" \
         "8b-b17 samples/llama3_8b_layer.kiln --dims B=17,S=1,T=256 --pos=100" \
         "1b-b32 samples/llama3_1b_layer.kiln --dims B=32,S=1,T=1024 --pos=1000"; do
  left && bchk $e $a | tee -a "$OUT/times.txt"
done; done
for r in 1 2; do
  for b in build/kiln $E $E3; do
    prof $b 8b-b32 samples/llama3_8b_layer.kiln B=32,S=1,T=1024 $r 1000
    prof $b 1b-b32 samples/llama3_1b_layer.kiln B=32,S=1,T=1024 $r 1000
  done
done
cat "$OUT/table.txt" 2>/dev/null
# on an H200, the B = 32 row (PyTorch eager in a CUDA graph beside) with what time is left
CASES=8b-decode-b32 VARIANTS=kiln,graph rows_on_h200
python3 bench/device/clocks_summary.py "$OUT/clocks.csv" > "$OUT/clocks_summary.txt" 2>&1
python3 bench/device/sweep_table.py --probe "$OUT"/probe_r*.csv | tee "$OUT/probe_summary.txt"
python3 bench/device/sweep_table.py "$OUT"/width_r*.csv | tee "$OUT/width_summary.txt"
cat "$OUT/times.txt" 2>/dev/null
