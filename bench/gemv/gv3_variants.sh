#!/usr/bin/env bash
# bench/gemv/gv3_variants.sh BUILD NAME 'DEFINES' [TARGET...] — binaries that differ from BUILD's
# only in codegen/cg_family.c's build-time knobs (e.g. '-DKILN_CG_GEMV_WIDE=1'), for one GPU
# call to compare: BUILD/variants/TARGET-NAME (default target: kiln), each linked from BUILD's
# objects with cg_family.c compiled again with DEFINES. Run after scripts/build.sh BUILD.
set -eu
bd=$1 name=$2 defs=$3
shift 3
[ $# -gt 0 ] || set -- kiln
mkdir -p "$bd/variants"
w=$(mktemp -d)
cmd=$(ninja -C "$bd" -t commands kiln | grep -F -- '-c ' | grep -F 'codegen/cg_family.c' | head -1)
[ -n "$cmd" ] || { echo "gv3_variants.sh: no compile command for cg_family.c in $bd" >&2; exit 1; }
c=${cmd/ -c / $defs -c }
c=$(printf '%s' "$c" | sed -e "s# -o [^ ]*cg_family.c.o # -o $w/cg_family.c.o #" -e "s# -MF [^ ]*cg_family.c.o.d # -MF $w/d #")
(cd "$bd" && eval "$c")
cp "$bd/libkiln.a" "$w/libkiln.a"
(cd "$w" && ar r libkiln.a cg_family.c.o)
for t in "$@"; do
    link=$(ninja -C "$bd" -t commands "$t" | tail -1)
    out=$(printf '%s' "$link" | sed -e 's#.* -o \([^ ]*\) .*#\1#')
    l=${link/ libkiln.a / $w/libkiln.a }
    l=${l/-o $out /-o variants/$(basename "$out")-$name }
    (cd "$bd" && eval "${l#: && }")
    echo "built $bd/variants/$(basename "$out")-$name"
done
rm -rf "$w"
