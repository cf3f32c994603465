#!/usr/bin/env bash
# scripts/gpu_pack.sh SRC DST — a slim copy of the build folder SRC for the GPU machine: what
# `ctest -L gpu`, `kiln`, libkiln.so, bench/run.sh and the bench programs need, debug info
# stripped, no objects or static libraries (the whole build is over the carried tree's limit).
# The copy keeps SRC's layout (CTestTestfile.cmake files with SRC's absolute paths: on the GPU
# machine, link SRC's path to DST, as scripts/gpu.sh does for /work/main/build).
#   GPU_PACK_ALL=1   every executable, not only the GPU tests' and the tools'
#   GPU_PACK_MIN=1   only kiln, libkiln.so and bench/kiln_sweep (a second build to compare, ~7 MB)
set -euo pipefail
src=${1:?usage: gpu_pack.sh SRC DST}
dst=${2:?usage: gpu_pack.sh SRC DST}
rm -rf "$dst"
mkdir -p "$dst"
(cd "$src" && find . -path ./CMakeFiles -prune -o -name CMakeFiles -prune -o -type f \
   \( -name 'CTestTestfile.cmake' -o -name '*.json' -o -name '*.safetensors' -o -name '*.kiln' \) -print) |
  while read -r f; do mkdir -p "$dst/$(dirname "$f")"; cp -p "$src/$f" "$dst/$f"; done
want() { # executables the GPU route runs
  if [ "${GPU_PACK_MIN:-0}" = 1 ]; then
    case "$1" in ./kiln | ./libkiln.so* | ./bench/kiln_sweep) return 0 ;; *) return 1 ;; esac
  fi
  case "$1" in
    ./kiln | ./libkiln.so* | ./bench/* | ./samples/embed/kiln_embed | *gpu* | ./tests/gpu/*) return 0 ;;
  esac
  [ "${GPU_PACK_ALL:-0}" = 1 ]
}
(cd "$src" && find . -path '*/CMakeFiles' -prune -o \( -type f -o -type l \) \( -perm -u+x -o -name 'libkiln.so*' \) -print) |
  while read -r f; do
    want "$f" || continue
    mkdir -p "$dst/$(dirname "$f")"
    if [ -L "$src/$f" ]; then cp -P "$src/$f" "$dst/$f"; else cp -p "$src/$f" "$dst/$f"; strip --strip-debug "$dst/$f" 2>/dev/null || true; fi
  done
du -sh "$dst"
