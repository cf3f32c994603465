#!/usr/bin/env bash
# scripts/gpu_stage.sh TREE NAME [BASE_BUILD] — stage a worktree for the GPU machine.
#
# The device tool sends the session's checkout (/work/main) and the ignored paths named in
# `carry`, 64 MiB in all. A second worktree (TREE, built in TREE/build) travels as
# /work/main/build-NAME/: tree/ holds TREE's tracked and untracked files and a slim copy of
# its build (scripts/gpu_pack.sh) at tree/build; with BASE_BUILD, base/ holds a minimal copy
# of that build (kiln, libkiln.so, kiln_sweep) to time the same work before the change on the
# same card. Then call the device with carry ["build-NAME"] and a command that starts with
#   mkdir -p "$(dirname TREE)" && ln -sfn "$PWD/build-NAME/tree" TREE && cd TREE && ...
# (the build's ctest files hold TREE's absolute paths).
set -euo pipefail
tree=$(cd "${1:?usage: gpu_stage.sh TREE NAME [BASE_BUILD]}" && pwd)
name=${2:?usage: gpu_stage.sh TREE NAME [BASE_BUILD]}
base=${3:-}
main=${KILN_MAIN:-/work/main} # the checkout the device tool sends
dst=$main/build-$name
rm -rf "$dst"
mkdir -p "$dst/tree"
(cd "$tree" && git ls-files -co --exclude-standard -z | tar --null -T - -cf -) | tar -C "$dst/tree" -xf -
"$(dirname "$0")/gpu_pack.sh" "$tree/build" "$dst/tree/build" >/dev/null
[ -n "$base" ] && GPU_PACK_MIN=1 "$(dirname "$0")/gpu_pack.sh" "$base" "$dst/base" >/dev/null
du -sh "$dst"
