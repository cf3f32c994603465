#!/usr/bin/env bash
# Configures and builds Kiln into DIR (default build/). Extra arguments go to cmake.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build}
shift || true
cmake -S . -B "$dir" -G Ninja -DCUDAToolkit_ROOT="${CUDAToolkit_ROOT:-/usr/local/cuda}" "$@" >/dev/null
cmake --build "$dir" -j "$(nproc)"
