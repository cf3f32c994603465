#!/usr/bin/env bash
# nrm: the folded RMSNorm in the Hopper matmul (decode 3..64 rows) on the H200
set -u
export OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
export KILN_CACHE_DIR=$(mktemp -d)
t0=$(date +%s)
el() { echo $(( $(date +%s) - t0 )); }
( KILN_MM_FILTER=_norm timeout 100 build/tests/gpu/test_gpu_matmul ) > "$OUT/matmul_norm.log" 2>&1
echo "matmul norm rc=$? $(el) s" | tee -a "$OUT/times.txt"
( timeout 100 build/tests/gpu/test_decode_gpu ) > "$OUT/decode.log" 2>&1
echo "decode rc=$? $(el) s" | tee -a "$OUT/times.txt"
for b in 3 8 32; do
  echo "== B=$b check" >> "$OUT/rows.txt"
  timeout 25 build/kiln run samples/llama3_8b_layer.kiln --dims B=$b,S=1,T=1024 --random --pos=1000 --check >> "$OUT/rows.txt" 2>&1; echo "check rc=$?" >> "$OUT/rows.txt"
done
timeout 25 build/kiln run samples/llama3_1b_layer.kiln --dims B=16,S=1,T=1024 --random --pos=1000 --check >> "$OUT/rows.txt" 2>&1; echo "1b B=16 check rc=$?" >> "$OUT/rows.txt"
echo "checks $(el) s" | tee -a "$OUT/times.txt"
for b in 4 8 32; do
  for d in "" "--disable=norm-gemv"; do
    echo "== B=$b $d" >> "$OUT/prof.txt"
    timeout 25 build/kiln run samples/llama3_8b_layer.kiln --dims B=$b,S=1,T=1024 --random --pos=1000 $d --profile --profile-runs=40 >> "$OUT/prof.txt" 2>&1; echo "profile rc=$?" >> "$OUT/prof.txt"
  done
done
echo "profiles $(el) s" | tee -a "$OUT/times.txt"
timeout 60 compute-sanitizer --tool memcheck build/kiln run samples/llama3_8b_layer.kiln --dims B=8,S=1,T=256 --random --pos=100 --check > "$OUT/memcheck.txt" 2>&1; echo "memcheck rc=$? $(el) s" | tee -a "$OUT/times.txt"
ls "$OUT"
