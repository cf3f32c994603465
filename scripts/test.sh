#!/usr/bin/env bash
# The second README command: the whole test suite, twice — a normal build and
# one under AddressSanitizer + UndefinedBehaviorSanitizer (the fault sweep,
# test_fault_cpu, sweeps every N in the normal build and every
# KILN_FAULT_ASAN_STRIDE-th N, default 5, under LeakSanitizer; the NVRTC compile tests,
# label nvrtc, run in the normal build only) — then a smoke run of each
# libFuzzer harness (scripts/fuzz.sh, 60 s each). GPU tests (ctest label
# `gpu`) skip themselves when there is no device.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
jobs=$(nproc)

echo "== build/ (RelWithDebInfo)"
scripts/build.sh build
ctest --test-dir build -j "$jobs" --output-on-failure

echo "== build-asan/ (AddressSanitizer + UndefinedBehaviorSanitizer)"
scripts/build.sh build-asan -DKILN_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug
ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1 \
  KILN_FAULT_STRIDE="${KILN_FAULT_ASAN_STRIDE:-5}" ctest --test-dir build-asan -j "$jobs" --output-on-failure -LE nvrtc

echo "== build-fuzz/ (libFuzzer smoke runs)"
scripts/fuzz.sh --time "${KILN_FUZZ_SMOKE_SECONDS:-60}"
