#!/usr/bin/env bash
# bench/gemv/build_variants.sh BUILD MASK... — `kiln` binaries that differ only in the decode-sized
# matmul_wgmma options codegen turns on at skinny M (codegen/cg_family.c KILN_CG_WG_DECODE: bit 0
# W early, bit 1 W evict-first, bit 2 the epilogue's operands early), for one GPU call to compare:
# BUILD/variants/kiln-dMASK, each linked from BUILD's objects with cg_family.c compiled again with
# -DKILN_CG_WG_DECODE=MASK. Run after scripts/build.sh BUILD.
set -eu
bd=$1
shift
cmd=$(ninja -C "$bd" -t commands kiln | grep -F -- '-c ' | grep -F 'codegen/cg_family.c' | head -1)
link=$(ninja -C "$bd" -t commands kiln | grep -F -- '-o kiln ' | head -1)
[ -n "$cmd" ] && [ -n "$link" ] || { echo "build_variants.sh: no compile or link command for kiln in $bd" >&2; exit 1; }
mkdir -p "$bd/variants"
for mask in "$@"; do
    w=$(mktemp -d)
    obj=$w/cg_family.c.o
    # the same compile line with the define added and the object elsewhere
    c=${cmd/ -c / -DKILN_CG_WG_DECODE=$mask -c }
    c=$(printf '%s' "$c" | sed -e "s# -o [^ ]*cg_family.c.o # -o $obj #" -e "s# -MF [^ ]*cg_family.c.o.d # -MF $w/d #")
    (cd "$bd" && eval "$c")
    cp "$bd/libkiln.a" "$w/libkiln.a"
    # the archive member keeps its name (cg_family.c.o): replace it
    (cd "$w" && ar r libkiln.a cg_family.c.o)
    l=${link/ libkiln.a / $w/libkiln.a }
    l=${l/-o kiln /-o variants/kiln-d$mask }
    (cd "$bd" && eval "${l#: && }" )
    rm -rf "$w"
    echo "built $bd/variants/kiln-d$mask"
done
