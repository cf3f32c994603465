#!/usr/bin/env bash
# bench/profile_check.sh — issue 8's GPU check: `kiln run --profile` on the 8B
# layer at decode, and the same kernels under Nsight Compute, side by side.
#
#   bench/profile_check.sh            (on the GPU machine, build/ built)
#
# Writes into $OUT (default: a new directory under /tmp): ceilings.json,
# profile.txt, profile.json, trace.json, roofline.svg, ncu.csv and
# compare.txt (bench/ncu_compare.py: Kiln's median against ncu's per kernel,
# max(10%, 0.5 us); and against ncu's duration less ncu's own estimate of the
# launch overhead in it, from sm__cycles_elapsed.max and sm__cycles_active.max), and the same with -nopdl for the run with --no-pdl;
# then launch-floor.txt: the same comparison for bench/launch_floor.kiln (one
# elementwise kernel over 256 elements), which shows the fixed difference
# between a kernel timed inside a graph replay and the same kernel launched on
# its own under ncu (its share of every row above; not subtracted anywhere).
# Exits with the --no-pdl comparison's status (0: all agree), or 0 after the
# profiles when there is no ncu.
#   KILN_BIN   the kiln command (build/kiln)
#   NCU        ncu (default: on PATH, else the toolkit's or /opt/nvidia's)
#   MODEL, DIMS, POS   what to profile (samples/llama3_8b_layer.kiln, B=1,S=1,T=1024, 1023)
set -u
cd "$(dirname "$0")/.." || exit 1
KILN=${KILN_BIN:-build/kiln}
MODEL=${MODEL:-samples/llama3_8b_layer.kiln}
DIMS=${DIMS:-B=1,S=1,T=1024}
POS=${POS:-1023}
OUT=${OUT:-$(mktemp -d /tmp/kiln-profile.XXXXXX)}
mkdir -p "$OUT"
echo "profile_check: $KILN run $MODEL --dims $DIMS --pos=$POS; files in $OUT"
"$KILN" ceilings --json >"$OUT/ceilings.json" || exit $?
"$KILN" ceilings
ncu=${NCU:-$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)}
# Twice: as the model runs (programmatic dependent launch on: a kernel launches under its predecessor's
# tail, and Kiln times it from the end of the kernels before it), then with --no-pdl. ncu serializes the
# kernels, so each pays its launch there; with --no-pdl the graph still overlaps a launch with the
# kernel before it. The exit status is the second comparison's: only with --no-pdl does each kernel
# run by itself in the replay as it does under ncu (with PDL a kernel's first loads run under its
# predecessor's tail, time that the profile rightly gives to neither and ncu cannot see); the first
# shows what the overlap is worth per kernel.
status=0
for mode in pdl no-pdl; do
    flag=; sfx=
    [ "$mode" = no-pdl ] && flag=--no-pdl sfx=-nopdl
    # shellcheck disable=SC2086
    "$KILN" run "$MODEL" --dims "$DIMS" --pos="$POS" --random $flag --profile --profile-runs=50 \
        --profile-json="$OUT/profile$sfx.json" --trace="$OUT/trace$sfx.json" --roofline="$OUT/roofline$sfx.svg" |
        tee "$OUT/profile$sfx.txt"
    rc=${PIPESTATUS[0]}
    [ "$rc" -eq 0 ] || { echo "profile_check: kiln run --profile $flag failed ($rc)"; exit "$rc"; }
    if [ -z "$ncu" ] || [ ! -x "$ncu" ]; then
        echo "profile_check: no ncu found (set NCU): the profile alone"
        continue
    fi
    # The same run under ncu: 1 + 20 runs of the layer (--bench keeps the positions), the kernels of
    # runs 6..15, each timed with the clocks and caches left as they are.
    nk=$(python3 -c 'import json,sys; print(sum(1 for k in json.load(open(sys.argv[1]))["kernels"] if k["group"] >= 0))' \
        "$OUT/profile$sfx.json")
    # shellcheck disable=SC2086
    "$ncu" --clock-control none --cache-control none --metrics gpu__time_duration.sum,sm__cycles_elapsed.max,sm__cycles_active.max --print-units base --csv \
        -k regex:^kiln_ --launch-skip $((5 * nk)) --launch-count $((10 * nk)) \
        "$KILN" run "$MODEL" --dims "$DIMS" --pos="$POS" --random $flag --bench 20 >"$OUT/ncu$sfx.csv" 2>"$OUT/ncu$sfx.log"
    echo "profile_check ($mode): ncu exited $? ($(grep -c gpu__time_duration "$OUT/ncu$sfx.csv") kernel samples)"
    python3 bench/ncu_compare.py "$OUT/profile$sfx.json" "$OUT/ncu$sfx.csv" | tee "$OUT/compare$sfx.txt"
    st=${PIPESTATUS[0]}
    [ "$mode" = no-pdl ] && status=$st
done
# The fixed cost: the smallest kernel Kiln launches, the same two measurements (informational: its
# status does not count).
if [ -n "$ncu" ] && [ -x "$ncu" ]; then
    lf=bench/launch_floor.kiln
    "$KILN" run "$lf" --dims B=1 --random --no-pdl --profile --profile-runs=50 \
        --profile-json="$OUT/launch-floor.json" >"$OUT/launch-floor-profile.txt" 2>&1 &&
    "$ncu" --clock-control none --cache-control none --metrics gpu__time_duration.sum,sm__cycles_elapsed.max,sm__cycles_active.max --print-units base --csv \
        -k regex:^kiln_ --launch-skip 5 --launch-count 10 \
        "$KILN" run "$lf" --dims B=1 --random --no-pdl --bench 20 >"$OUT/ncu-launch-floor.csv" 2>/dev/null &&
    python3 bench/ncu_compare.py "$OUT/launch-floor.json" "$OUT/ncu-launch-floor.csv" | tee "$OUT/launch-floor.txt"
fi
exit "$status"
