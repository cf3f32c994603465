#!/usr/bin/env bash
# The first README command: install what is missing, build, and compile the
# Llama-3-8B layer sample to IR.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
scripts/build.sh build
./build/kiln compile samples/llama3_8b_layer.kiln --emit=ir
