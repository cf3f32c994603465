#!/usr/bin/env bash
# bench/attn/push_variants.sh BUILD NAME "DEFINES" — a `kiln` that differs only in codegen/cg_family.c
# compiled with DEFINES (e.g. "-DKILN_CG_DEC_CLUSTER_MAX=16 -DKILN_CG_DEC_CLUSTER_WARPS=4": the
# decode attention's clusters of 16 CTAs of four warps), as BUILD/variants/kiln_NAME, linked from
# BUILD's objects (as bench/gemv/build_variants.sh does), and the same as BUILD/variants/libkiln_NAME.so
# (for bench/bench.py --lib), and bench/kiln_sweep linked with it as BUILD/variants/kiln_sweep_NAME.
# Run after scripts/build.sh BUILD.
set -eu
bd=$1 name=$2 defs=$3
cmd=$(ninja -C "$bd" -t commands kiln | grep -F -- '-c ' | grep -F 'codegen/cg_family.c' | head -1)
link=$(ninja -C "$bd" -t commands kiln | grep -F -- '-o kiln ' | head -1)
[ -n "$cmd" ] && [ -n "$link" ] || { echo "push_variants.sh: no compile or link command for kiln in $bd" >&2; exit 1; }
mkdir -p "$bd/variants"
w=$(mktemp -d)
c=${cmd/ -c / $defs -c }
c=$(printf '%s' "$c" | sed -e "s# -o [^ ]*cg_family.c.o # -o $w/cg_family.c.o #" -e "s# -MF [^ ]*cg_family.c.o.d # -MF $w/d #")
(cd "$bd" && eval "$c")
cp "$bd/libkiln.a" "$w/libkiln.a"
(cd "$w" && ar r libkiln.a cg_family.c.o)
l=${link/ libkiln.a / $w/libkiln.a }
l=${l/-o kiln /-o variants/kiln_$name }
(cd "$bd" && eval "${l#: && }")
so=$(ninja -C "$bd" -t commands kiln_shared | grep -F -- ' -shared ' | head -1)
if [ -n "$so" ]; then
  so=${so%%&& :*}
  so=${so#: && }
  so=$(printf '%s' "$so" | sed -e "s# [^ ]*cg_family.c.o # $w/cg_family.c.o #" -e "s# -o libkiln.so[^ ]* # -o variants/libkiln_$name.so #")
  (cd "$bd" && eval "$so")
fi
sw=$(ninja -C "$bd" -t commands bench/kiln_sweep 2>/dev/null | grep -F -- '-o bench/kiln_sweep ' | head -1)
if [ -n "$sw" ]; then
  sw=${sw/ libkiln.a / $w/libkiln.a }
  sw=${sw/-o bench\/kiln_sweep /-o variants/kiln_sweep_$name }
  (cd "$bd" && eval "${sw#: && }")
fi
rm -rf "$w"
echo "built $bd/variants/kiln_$name"
