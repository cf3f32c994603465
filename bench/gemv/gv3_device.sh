#!/usr/bin/env bash
# bench/gemv/gv3_device.sh — one GPU call for the M = 1 GEMV at bandwidth (issues 9 and 11):
# the deferred reduction (gemv.cuh KILN_GEMV_DEFER) against the CTA-wide reduction after every
# column block, standalone and in the decode layers, with main's kiln ($BASE/kiln) as the
# baseline on the same card, interleaved.
#   1. test_gpu_matmul's GEMV cases (KILN_MM_FILTER=gemv_: every epilogue, M 1..16, odd N/K)
#   2. the standalone sweep (KILN_BENCH=2, CUPTI, weights rotated through 180 MB; _dfr configs
#      at M = 1 and 2 over the 1B and 8B projections) -> sweep.csv
#   3. the layer profiles, round 1: 1B and 8B at B=1 (T=1024, pos 1023, 40 runs): base, new
#      (build/kiln), wide (build/variants/kiln-wide: KILN_CG_GEMV_WIDE=1)
#   4. test_decode_gpu; `kiln run --check` 1B/8B at B=1 and B=2 (new), B=1 (wide)
#   5. the profiles, round 2 (reverse order), while time is left
#   6. compute-sanitizer memcheck on the 1B decode layer (new), while time is left
# Run from the repository root of the staged tree. Results under $OUT. DEADLINE (s, default 150).
set -u
out=${OUT:-/tmp/gv3_out}
mkdir -p "$out"
export KILN_CACHE_DIR=${KILN_CACHE_DIR:-$(mktemp -d)}
export KILN_SOURCE_DIR=$PWD
NEW=build/kiln
WIDE=build/variants/kiln-wide
BASEK=${BASE:?BASE: the baseline build, main}/kiln
t0=$(date +%s)
DL=${DEADLINE:-150}
el() { echo "$(($(date +%s) - t0))"; }
left() { echo $((DL - $(el))); }
tl() { local c=$1 l=$(($(left) - $2)); [ $l -lt $c ] && c=$l; [ $c -lt 1 ] && c=1; echo $c; } # CAP RESERVE
S=$out/summary.txt
P=$out/profiles.txt
C=$out/checks.txt
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw --format=csv,noheader > "$S" 2>&1
timeout $(tl 20 120) "$NEW" ceilings > "$out/ceilings.txt" 2>&1
echo "ceilings rc=$? [$(el) s] $(grep -iE 'read' "$out/ceilings.txt" | head -1)" >> "$S"

# 1. GEMV cases
KILN_MM_FILTER=gemv_ timeout $(tl 35 95) build/tests/gpu/test_gpu_matmul > "$out/matmul.log" 2>&1
echo "test_gpu_matmul gemv_ rc=$? [$(el) s] $(grep -E 'passed, .* failed' "$out/matmul.log" | tail -1)" >> "$S"
grep -E '^FAIL|SPILLS' "$out/matmul.log" | head -20 >> "$S"

# 2. the standalone sweep
KILN_BENCH=2 KILN_SWEEP_ONLY=1 KILN_MM_FILTER=_dfr KILN_SWEEP_M=1,2 KILN_BENCH_CSV="$out/sweep.csv" \
    timeout $(tl 25 75) build/tests/gpu/test_gpu_matmul > "$out/sweep.log" 2>&1
echo "sweep rc=$? [$(el) s] $(wc -l < "$out/sweep.csv") rows" >> "$S"

prof() { # LABEL BIN MODEL
    echo "== $1" >> "$P"
    timeout $(tl 25 3) "$2" run "$3" --dims B=1,S=1,T=1024 --random --pos=1023 --profile --profile-runs=40 >> "$P" 2>&1
    echo "rc=$?" >> "$P"
    echo "$1: $(grep -E '^layer: median' "$P" | tail -1) [$(el) s]" >> "$S"
}
round() { # the order of the binaries
    for m in 1b 8b; do
        for v in "$@"; do
            [ "$(left)" -gt 12 ] || return
            case $v in base) b=$BASEK ;; new) b=$NEW ;; wide) b=$WIDE ;; esac
            prof "$m-$v" "$b" samples/llama3_${m}_layer.kiln
        done
    done
}
# 3. profiles, round 1
round base new wide

# 4. correctness of the new defaults (and the wide variant) against the interpreter
timeout $(tl 20 25) build/tests/gpu/test_decode_gpu > "$out/decode.log" 2>&1
echo "test_decode_gpu rc=$? [$(el) s] $(tail -1 "$out/decode.log")" >> "$S"
chk() { # LABEL BIN MODEL DIMS [args]
    local l=$1 b=$2 m=$3 d=$4
    shift 4
    [ "$(left)" -gt 8 ] || { echo "check $l: skipped (time)" >> "$S"; return; }
    echo "== check $l" >> "$C"
    timeout $(tl 20 3) "$b" run "samples/llama3_${m}_layer.kiln" --dims "$d" --steps 2 --random --check "$@" >> "$C" 2>&1
    echo "check $l rc=$? [$(el) s] $(grep -E '^check step' "$C" | tail -1)" >> "$S"
}
chk 1b-b1 "$NEW" 1b B=1,S=1,T=64
chk 8b-b1 "$NEW" 8b B=1,S=1,T=64
chk 1b-b2 "$NEW" 1b B=2,S=1,T=64
chk 8b-b2-nopdl "$NEW" 8b B=2,S=1,T=64 --no-pdl
chk 1b-b1-wide "$WIDE" 1b B=1,S=1,T=64
chk 8b-b1-wide "$WIDE" 8b B=1,S=1,T=64

# 5. profiles, round 2 (reverse order)
[ "$(left)" -gt 40 ] && round wide new base

# 6. memcheck on one decode layer
if [ "$(left)" -gt 15 ]; then
    timeout $(($(left) - 3)) compute-sanitizer --tool memcheck --error-exitcode 3 "$NEW" run samples/llama3_1b_layer.kiln \
        --dims B=1,S=1,T=64 --random --check > "$out/memcheck.txt" 2>&1
    echo "memcheck 1b-b1 rc=$? [$(el) s] $(grep -E 'ERROR SUMMARY' "$out/memcheck.txt" | tail -1)" >> "$S"
else
    echo "memcheck: skipped (time)" >> "$S"
fi

# the table: per kernel, base / new / wide medians (every round)
{
    echo "--- kernels (median us; each profile in order)"
    awk '/^== /{l=$2} /^kiln_llama3/{for(i=1;i<=NF;i++) if($i=="us"){print l, $1, $(i-1); break}}' "$P"
    grep -E 'GEMV_COLS=[0-9]+' -o "$P" | sort | uniq -c
    grep -E 'bubbles: median' "$P"
} >> "$S"
echo "done [$(el) s]" >> "$S"
cat "$S"
