#!/usr/bin/env bash
# golden.sh KILN EXPECTED ARGS... — runs KILN ARGS and diffs stdout with EXPECTED.
# KILN_UPDATE_GOLDEN=1 rewrites EXPECTED instead.
set -u
kiln=$1 expected=$2
shift 2
out=$(mktemp)
trap 'rm -f "$out"' EXIT
"$kiln" "$@" >"$out"
rc=$?
if [ $rc -ne 0 ]; then echo "kiln $* exited $rc"; exit 1; fi
if [ "${KILN_UPDATE_GOLDEN:-}" = 1 ]; then cp "$out" "$expected"; echo "updated $expected"; exit 0; fi
if [ ! -f "$expected" ]; then echo "missing $expected (run with KILN_UPDATE_GOLDEN=1)"; exit 1; fi
diff -u "$expected" "$out" && echo "1 passed, 0 failed"
