set -u; OUT=${OUT:-/tmp/o}; mkdir -p $OUT; t0=$(date +%s)
KILN_CASES=46-61 KILN_BENCH=1 KILN_DEC_SWEEP=1 timeout 30 build/tests/gpu/test_gpu_attention > $OUT/sweep.log 2>&1; echo "rc=$? $(( $(date +%s) - t0 )) s" >> $OUT/sweep.log
KILN_CASES=46-61 timeout 25 compute-sanitizer --tool memcheck build/tests/gpu/test_gpu_attention > $OUT/memcheck2.log 2>&1; echo "rc=$? $(( $(date +%s) - t0 )) s" >> $OUT/memcheck2.log
