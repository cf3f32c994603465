# bench/device/common.sh — sourced by the final_* and variants scripts with DEFAULT_LIMIT set: the
# tree's root as the working folder, the slim build as build/, /work/main pointing here (the
# CTestTestfile.cmake files name /work/main/build), a fresh kernel cache, $OUT, the clock (el: seconds
# since the start; left: still under LIMIT) and the GPU's name, driver, clock and power in $OUT/gpu.txt.
set -u
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1
export OUT=${OUT:-/tmp/out}
mkdir -p "$OUT" /work
[ -e /work/main/CMakeLists.txt ] || ln -sfn "$PWD" /work/main
[ -e build ] || ln -sfn build-gpu build
export KILN_CACHE_DIR=${KILN_CACHE_DIR:-$(mktemp -d)}
LIMIT=${LIMIT:-$DEFAULT_LIMIT}
t0=$(date +%s)
el() { echo $(($(date +%s) - t0)); }
left() { [ "$(el)" -lt "$LIMIT" ]; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw --format=csv | tee -a "$OUT/gpu.txt"
