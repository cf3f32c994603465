#!/usr/bin/env bash
# bench/device/call_tune.sh — the 8B layer's prefill projections: what `--autotune` picks against
# the rule (wg_choose; the QKV epilogue's ping-pong 128x128 in particular), in one device call over
# the slim build (carry build-gpu). For B=4 S=4096 and B=1 S=2048: the default's profile, then
# `--autotune` (a fresh cache directory: every candidate timed) and its profile, then the default
# again. Results under $OUT.
#   LIMIT (400)
DEFAULT_LIMIT=400
. "$(dirname "$0")/common.sh"
L8=samples/llama3_8b_layer.kiln
run() { # label dims extra...
  left || return
  local l=$1 d=$2; shift 2
  timeout 240 build/kiln run $L8 --dims "$d" --random --pos=0 --profile --profile-runs=10 "$@" > "/tmp/tune_$l.txt" 2>&1
  { echo "== $l ($d $*) rc=$? $(el) s"; grep -E "^autotune|^kiln_|^layer" "/tmp/tune_$l.txt"; } >> "$OUT/tune.txt"
  echo "$l: $(grep -E '^layer' /tmp/tune_$l.txt | cut -c1-60)" | tee -a "$OUT/times.txt"
}
for s in "b4s4096 B=4,S=4096,T=4096" "b1s2048 B=1,S=2048,T=2048"; do
  set -- $s
  run "$1-default" "$2"
  KILN_CACHE_DIR=$(mktemp -d) run "$1-autotune" "$2" --autotune
  run "$1-default2" "$2"
done
cat "$OUT/times.txt"
grep -E "^==|^autotune" "$OUT/tune.txt"
