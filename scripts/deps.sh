#!/usr/bin/env bash
# Installs the Debian 12 packages Kiln needs to build, if any are missing.
# The CUDA toolkit is expected at /usr/local/cuda (or $CUDAToolkit_ROOT).
set -euo pipefail
# clang + libclang-rt-14-dev: the libFuzzer harnesses (tests/fuzz/, scripts/fuzz.sh)
pkgs=(build-essential cmake ninja-build flex bison pkg-config libxxhash-dev libjansson-dev libdlpack-dev graphviz python3 python3-pip python3-venv clang libclang-rt-14-dev)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "kiln: installing ${missing[*]}"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo=sudo
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
cuda=${CUDAToolkit_ROOT:-/usr/local/cuda}
if [ ! -f "$cuda/include/nvrtc.h" ]; then
  echo "kiln: the CUDA toolkit was not found at $cuda (set CUDAToolkit_ROOT)" >&2
  exit 1
fi
