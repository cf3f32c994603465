#!/usr/bin/env bash
# Runs the GPU tests (and, with `bench`, the kernel timings) on the lent GPU
# machine, over a build/ folder built on the development machine and carried
# along (the GPU machine has no flex/bison/-dev headers). Usage, from the repo
# root on the GPU machine:
#   scripts/gpu.sh tests        ctest -L gpu
#   scripts/gpu.sh bench        tests, then KILN_BENCH=1 timings of the kernel families
# Logs go to $OUT (or /tmp/kiln-gpu) as well as to the terminal.
set -u
here=$(pwd)
out=${OUT:-/tmp/kiln-gpu}
mkdir -p "$out"
# The build was configured at /work/main: make that path lead here.
if [ ! -e /work/main/CMakeLists.txt ]; then
  mkdir -p /work && ln -sfn "$here" /work/main
fi
export KILN_CACHE_DIR=${KILN_CACHE_DIR:-$(mktemp -d)}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.draw \
  --format=csv 2>&1 | tee "$out/gpu.txt"
set -o pipefail
rc=0
(cd /work/main/build && ctest -L gpu --output-on-failure --timeout 300) 2>&1 | tee "$out/gpu_tests.log" || rc=1
if [ "${1:-tests}" = bench ]; then
  for t in /work/main/build/tests/gpu/test_gpu_matmul /work/main/build/tests/gpu/test_gpu_attention; do
    [ -x "$t" ] && (cd /work/main && KILN_BENCH=1 "$t") 2>&1 | grep -Ei 'bench|GB/s|TFLOP|median|us' | tee -a "$out/bench.log"
  done
fi
exit $rc
