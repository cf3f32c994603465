#!/usr/bin/env bash
# bench/gemv/gv3_device2.sh — the second GPU call: where the GEMV lets the next kernel launch,
# in the decode layers (1B and 8B, B=1, T=1024, pos 1023, 40 runs), interleaved rounds of
#   base  main's kiln ($BASE/kiln): the CTA-wide reduction, launch after the last epilogue
#   new   build/kiln: the deferred reduction, launch once the last block's weights are read
#   l2    KILN_CG_GEMV_LAUNCH=2: launch when the CTA's last block starts
#   old1  KILN_CG_GEMV_DEFER=0: the CTA-wide reduction, launch once the last block is read
#   pf    KILN_CG_GEMV_PREFETCH=1: new + the first block's rows into L2 before the wait
# then `kiln run --check` of the l2 variant. Results under $OUT. DEADLINE (s, default 60).
set -u
out=${OUT:-/tmp/gv3_out2}
mkdir -p "$out"
export KILN_CACHE_DIR=${KILN_CACHE_DIR:-$(mktemp -d)}
export KILN_SOURCE_DIR=$PWD
BASEK=${BASE:?BASE: the baseline build, main}/kiln
t0=$(date +%s)
DL=${DEADLINE:-60}
el() { echo "$(($(date +%s) - t0))"; }
left() { echo $((DL - $(el))); }
tl() { local c=$1 l=$(($(left) - $2)); [ $l -lt $c ] && c=$l; [ $c -lt 1 ] && c=1; echo $c; }
S=$out/summary.txt
P=$out/profiles.txt
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw --format=csv,noheader > "$S" 2>&1
timeout $(tl 15 20) build/kiln ceilings > "$out/ceilings.txt" 2>&1
echo "ceilings rc=$? [$(el) s] $(grep -iE 'read' "$out/ceilings.txt" | head -1)" >> "$S"
bin() { case $1 in base) echo "$BASEK" ;; new) echo build/kiln ;; *) echo "build/variants/kiln-$1" ;; esac; }
prof() { # LABEL BIN MODEL
    echo "== $1" >> "$P"
    timeout $(tl 25 2) "$2" run "$3" --dims B=1,S=1,T=1024 --random --pos=1023 --profile --profile-runs=40 >> "$P" 2>&1
    echo "rc=$?" >> "$P"
    echo "$1: $(grep -E '^layer: median' "$P" | tail -1 | cut -c1-60) [$(el) s]" >> "$S"
}
round() { # NEED the variants in order
    local need=$1
    shift
    for m in 1b 8b; do
        for v in "$@"; do
            [ "$(left)" -gt "$need" ] || return
            prof "$m-$v" "$(bin "$v")" samples/llama3_${m}_layer.kiln
        done
    done
}
round 10 base new l2 old1 pf
round 14 pf old1 l2 new base
for d in B=1,S=1,T=64 B=2,S=1,T=64; do
    for m in 1b 8b; do
        [ "$(left)" -gt 5 ] || break
        timeout $(tl 15 1) build/variants/kiln-l2 run samples/llama3_${m}_layer.kiln --dims $d --steps 2 --random --check >> "$out/checks.txt" 2>&1
        echo "check l2 $m $d rc=$? [$(el) s] $(grep -E '^check step' "$out/checks.txt" | tail -1)" >> "$S"
    done
done
{
    echo "--- kernels (median us, p10, p90; each profile in order)"
    awk '/^== /{l=$2} /^kiln_llama3/{for(i=1;i<=NF;i++) if($i=="us"){print l, $1, $(i-1), $(i+1), $(i+3); break}}' "$P"
    grep -E 'bubbles: median' "$P" | cut -c1-60
} >> "$S"
echo "done [$(el) s]" >> "$S"
cat "$S"
