#!/usr/bin/env bash
# dot_test.sh KILN — `--emit=dot` of every sample renders with Graphviz
# (scripts/deps.sh installs it; a missing `dot` is a failure, not a skip):
# one cluster per kernel, bytes on the edges into kernels (at the bound dims,
# symbolic without), refused fusions dashed with their rule.
set -u
kiln=$1
pass=0 fail=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $1"; }
command -v dot >/dev/null || { echo "FAIL: Graphviz's dot is not installed (scripts/deps.sh installs it)"; exit 1; }
for s in samples/*.kiln; do
  n=$(basename "$s" .kiln)
  dims="-D B=1 -D S=1"
  grep -q 'dims.*T' "$s" && dims="$dims -D T=1024"
  # shellcheck disable=SC2086
  "$kiln" compile "$s" --emit=dot $dims -o "$tmp/$n.dot" || { bad "$n: --emit=dot"; continue; }
  dot -Tsvg "$tmp/$n.dot" -o "$tmp/$n.svg" 2>"$tmp/$n.err" && [ -s "$tmp/$n.svg" ] && ! [ -s "$tmp/$n.err" ] &&
    ok || bad "$n: dot -Tsvg: $(head -3 "$tmp/$n.err")"
  # shellcheck disable=SC2086
  kernels=$("$kiln" compile "$s" --emit=plan $dims | sed -n 's/^kernels (\([0-9]*\)):$/\1/p')
  clusters=$(grep -c '^  subgraph cluster_k' "$tmp/$n.dot")
  [ "$clusters" = "$kernels" ] && ok || bad "$n: $clusters clusters for $kernels kernels"
  grep -Eq -- '-> n[0-9]+ \[label="[0-9.]+ (B|KiB|MiB|GiB)"\]' "$tmp/$n.dot" && ok || bad "$n: no edge labelled with bytes"
done
grep -q 'style=dashed, color="#b85450".*label="refused residual-norm: the residual add (line 37) is already in' \
  "$tmp/llama3_8b_layer.dot" && ok || bad "the 8B layer's refused residual-norm is not a dashed edge"
"$kiln" compile samples/llama3_8b_layer.kiln --emit=dot -o "$tmp/sym.dot" && grep -q 'label="8192\*B\*S bytes"' "$tmp/sym.dot" &&
  ok || bad "unbound dims: symbolic bytes"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
