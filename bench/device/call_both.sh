#!/usr/bin/env bash
# bench/device/call_both.sh — one device call for a round whose device time is short: the 8B
# layer's batched-decode variants (call_b32.sh, LIMIT_B32 s, default 230) and then what the last
# round owes (call_next.sh with the rest of 560 s), each into its own folder under $OUT (each
# packed into its all.tgz by common.sh when it has more than 8 files).
set -u
cd "$(dirname "$0")/../.." || exit 1
out=${OUT:-/tmp/out}
t0=$(date +%s)
OUT=$out/b32 LIMIT=${LIMIT_B32:-230} bash bench/device/call_b32.sh > "$out/b32.log" 2>&1
echo "call_b32 rc=$? $(($(date +%s) - t0)) s"
OUT=$out/next LIMIT=$((560 - ($(date +%s) - t0))) bash bench/device/call_next.sh > "$out/next.log" 2>&1
echo "call_next rc=$? $(($(date +%s) - t0)) s"
tail -40 "$out/b32.log"
tail -30 "$out/next.log"
