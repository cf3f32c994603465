#!/usr/bin/env bash
# bench/run.sh — Kiln vs PyTorch on one Llama-3 layer, on the GPU machine.
#
#   bench/run.sh                 every case, every variant (about 5-7 minutes)
#
# Needs the built library (build/libkiln.so, the kiln_shared target) and a
# python3 with PyTorch and CUDA. Runs one process per case, each under its
# own timeout, so that a crash or a hang costs one row and not the table;
# the floors are measured once first. Prints the merged table last; with
# $OUT set, writes $OUT/results.md, $OUT/results.json and $OUT/bench.log.
#
# Knobs (environment):
#   BENCH_CASES          comma list (default: all five; see bench.py --help)
#   BENCH_VARIANTS       comma list of kiln,eager,graph,compile,compile-graph
#   BENCH_CASE_TIMEOUT   seconds per case (default 120)
#   BENCH_TOTAL          seconds for all the cases together (default 450); a
#                        case gets what is left if that is less, and is
#                        skipped under 30 s; inside a case torch.compile is
#                        skipped when less than 45 s are left of its time
#   BENCH_ARGS           more arguments for bench.py (e.g. --iters-decode 500)
#   BENCH_PROFILE        1 (default): after the table, each case's per-kernel
#                        profile (`kiln run --profile`, same dims and positions);
#                        0: none
#   KILN_LIB             the library (default build/libkiln.so)
#   KILN_BIN             the kiln command (default build/kiln): its ceilings
#                        (`kiln ceilings --json`) are the floors' rates
#   KILN_CACHE_DIR       Kiln's kernel cache (default: a new empty directory
#                        under /tmp, so that the compile times are cold)
#   PYTHON               default python3
set -u
cd "$(dirname "$0")/.." || exit 1

LIB=${KILN_LIB:-build/libkiln.so}
PY=${PYTHON:-python3}
CASES=${BENCH_CASES:-1b-decode,8b-decode,8b-decode-b32,8b-prefill-2k,8b-prefill-b4-4k}
VARIANTS=${BENCH_VARIANTS:-kiln,eager,graph,compile,compile-graph}
CASE_TIMEOUT=${BENCH_CASE_TIMEOUT:-120}
TOTAL=${BENCH_TOTAL:-450}
EXTRA=${BENCH_ARGS:-}
KILN=${KILN_BIN:-build/kiln}
PROFILE=${BENCH_PROFILE:-1}

export PYTHONUNBUFFERED=1
export KILN_CACHE_DIR=${KILN_CACHE_DIR:-$(mktemp -d /tmp/kiln-cache.XXXXXX)}
WORK=$(mktemp -d /tmp/kiln-bench.XXXXXX)

main() {
start=$(date +%s)
echo "bench/run.sh: $(date -u '+%Y-%m-%d %H:%M:%S UTC'), commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
echo "library $LIB; KILN_CACHE_DIR=$KILN_CACHE_DIR; cases $CASES; variants $VARIANTS"
if [ ! -f "$LIB" ]; then
    echo "bench/run.sh: no $LIB: build the kiln_shared target first (cmake -G Ninja -B build && ninja -C build)"
    return 1
fi
nvidia-smi --query-gpu=name,driver_version,memory.used,memory.total,clocks.sm,clocks.mem,temperature.gpu --format=csv 2>/dev/null || true

echo
echo "---- floors ----"
if [ -x "$KILN" ]; then
    # Kiln's ceilings, the one source of them (measured once per device, then read from the cache)
    timeout -k 5 120 "$PY" bench/bench.py --lib "$LIB" --floors-only --ceilings "$KILN" --json "$WORK/floors.json" ||
        echo "bench/run.sh: floors failed (rc $?): each case measures its own"
else
    timeout -k 5 90 "$PY" bench/bench.py --lib "$LIB" --floors-only --json "$WORK/floors.json" ||
        echo "bench/run.sh: floors failed (rc $?): each case measures its own"
fi

for c in ${CASES//,/ }; do
    now=$(date +%s)
    left=$((TOTAL - (now - start)))
    t=$CASE_TIMEOUT
    [ "$left" -lt "$t" ] && t=$left
    echo
    if [ "$t" -lt 30 ]; then
        echo "---- $c: skipped, ${left}s left of ${TOTAL}s ----"
        continue
    fi
    echo "---- $c (timeout ${t}s) ----"
    # shellcheck disable=SC2086
    timeout -k 5 "$t" "$PY" bench/bench.py --lib "$LIB" --cases "$c" --variants "$VARIANTS" \
        --floors "$WORK/floors.json" --json "$WORK/case-$c.json" --deadline "$t" $EXTRA
    rc=$?
    case $rc in
        0) ;;
        124 | 137) echo "bench/run.sh: case $c timed out after ${t}s (what it measured before is kept)" ;;
        *) echo "bench/run.sh: case $c exited with status $rc (what it measured before is kept)" ;;
    esac
done

echo
echo "---- all cases ($(( $(date +%s) - start ))s) ----"
shopt -s nullglob
"$PY" bench/bench.py --cases "$CASES" --table "$WORK"/case-*.json

if [ "$PROFILE" = 1 ] && [ -x "$KILN" ]; then
    for c in ${CASES//,/ }; do
        case $c in
            1b-decode) m=llama3_1b_layer d=B=1,S=1,T=1024 p=1023 r=50 ;;
            8b-decode) m=llama3_8b_layer d=B=1,S=1,T=1024 p=1023 r=50 ;;
            8b-decode-b32) m=llama3_8b_layer d=B=32,S=1,T=1024 p=1023 r=50 ;;
            8b-prefill-2k) m=llama3_8b_layer d=B=1,S=2048,T=2048 p=0 r=20 ;;
            8b-prefill-b4-4k) m=llama3_8b_layer d=B=4,S=4096,T=4096 p=0 r=10 ;;
            *) continue ;;
        esac
        echo
        echo "---- $c: per kernel (kiln run samples/$m.kiln --dims $d --pos=$p --random --profile --profile-runs=$r) ----"
        files=()
        [ -n "${OUT:-}" ] && files=(--profile-json="$OUT/profile-$c.json" --trace="$OUT/trace-$c.json" --roofline="$OUT/roofline-$c.svg")
        timeout -k 5 90 "$KILN" run "samples/$m.kiln" --dims "$d" --pos="$p" --random --profile --profile-runs="$r" \
            "${files[@]}" || echo "bench/run.sh: the profile of $c failed (rc $?)"
    done
fi
}

if [ -n "${OUT:-}" ]; then
    mkdir -p "$OUT"
    main 2>&1 | tee -a "$OUT/bench.log"
else
    main 2>&1
fi
