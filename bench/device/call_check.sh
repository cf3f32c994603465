#!/usr/bin/env bash
# bench/device/call_check.sh — the tree's GPU checks and issue 8's ncu comparison in one device
# call over the slim build with the tests (scripts/gpu_pack.sh build build-gpu; carry build-gpu):
# bench/device/final_tests.sh (ctest -L gpu, racecheck and memcheck; LIMIT 400) into $OUT/tests,
# then bench/profile_check.sh (the 8B decode profile against ncu, with and without PDL, and the
# launch floor; PC=0: not) into $OUT/pc; everything packed into $OUT/all.tgz.
set -u
cd "$(dirname "$0")/../.." || exit 1
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT/tests" "$OUT/pc"
KILN_OUT_PACKER=none OUT="$OUT/tests" LIMIT=${LIMIT:-400} bash bench/device/final_tests.sh
if [ "${PC:-1}" = 1 ]; then
[ -e build ] || ln -sfn build-gpu build
OUT="$OUT/pc" timeout 150 bash bench/profile_check.sh > "$OUT/pc/stdout.txt" 2>&1
echo "profile_check rc=$?"
tail -30 "$OUT/pc/stdout.txt"
fi
tar czf /tmp/kiln_all.tgz -C "$OUT" tests pc && rm -rf "${OUT:?}/tests" "${OUT:?}/pc" && mv /tmp/kiln_all.tgz "$OUT/all.tgz"
