#!/usr/bin/env bash
# options_test.sh KILN — option parsing (getopt_long): per-command help, both
# value spellings, '-' for standard input, '--', nvcc's arch spellings, the
# archs Kiln targets, --dims range and duplicate errors, write failures of
# --emit=cubin (exit 73, the path and the reason, no partial files), and model
# names that cannot name kernel files.
set -u
kiln=$(readlink -f "$1")
pass=0 fail=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export KILN_CACHE_DIR=$tmp/cache
. "$(dirname "$0")/expect.sh"
printf 'model tiny {\n  dims N\n  input x : f32[N, 64]\n  output y = x * 2.0 + 1.0\n}\n' >"$tmp/tiny.kiln"

# per-command help: each command's own options, nothing of the others
expect 0 'usage: kiln compile FILE' compile --help
expect 0 'usage: kiln compile FILE' help compile
expect 0 '--emit=KIND' compile -h
expect 0 '--dims=NAME=N' help run
expect 0 '  ls +list the entries' cache --help
expect 0 '--remeasure' ceilings --help
for c in check passes cache ceilings; do
  if "$kiln" help "$c" | grep -q -- '--emit'; then fail=$((fail + 1)); echo "FAIL: help $c lists --emit"; else pass=$((pass + 1)); fi
done
if "$kiln" help compile | grep -q -- '--dims'; then fail=$((fail + 1)); echo "FAIL: help compile lists --dims"; else pass=$((pass + 1)); fi
expect 64 "unknown command 'bogus'" help bogus
expect 64 "'--emit' is not an option of 'kiln check'" check --emit=ir "$tmp/tiny.kiln"
expect 64 "'--dims' is not an option of 'kiln compile'" compile --dims B=1 "$tmp/tiny.kiln"
expect 64 "unknown option '-q'" compile -q "$tmp/tiny.kiln"
expect 64 "--emit needs a value" compile "$tmp/tiny.kiln" --emit
expect 64 "the command comes first" --emit=ir compile "$tmp/tiny.kiln"

# --opt value and --opt=value; options before or after the file
expect 0 'input x : f32\[N, 64\]' compile --emit ir "$tmp/tiny.kiln"
expect 0 'input x : f32\[N, 64\]' compile "$tmp/tiny.kiln" --emit=ir
expect 0 'input x : f32\[3, 64\]' compile --define N=3 "$tmp/tiny.kiln" --emit=ir
expect 0 'input x : f32\[3, 64\]' compile "$tmp/tiny.kiln" -DN=3 --emit=ir
"$kiln" compile "$tmp/tiny.kiln" --output "$tmp/a.ir" && "$kiln" compile "$tmp/tiny.kiln" -o"$tmp/b.ir" &&
  cmp -s "$tmp/a.ir" "$tmp/b.ir" && pass=$((pass + 1)) || { fail=$((fail + 1)); echo "FAIL: --output FILE / -oFILE"; }
# '-' reads the model from standard input; '--' ends the options
out=$("$kiln" compile - --emit=ir <"$tmp/tiny.kiln" 2>&1)
grep -q 'input x : f32' <<<"$out" && pass=$((pass + 1)) || { fail=$((fail + 1)); echo "FAIL: compile - : $out"; }
out=$(printf 'model m {\n  dims B\n  input x : f32[B, 4]\n  output y = x + nope\n}\n' | "$kiln" check - 2>&1)
[ $? -eq 1 ] && grep -q '^<stdin>:4:' <<<"$out" && pass=$((pass + 1)) || { fail=$((fail + 1)); echo "FAIL: check - : $out"; }
cp "$tmp/tiny.kiln" "$tmp/-dash.kiln"
(cd "$tmp" && "$kiln" check -- -dash.kiln) && pass=$((pass + 1)) || { fail=$((fail + 1)); echo "FAIL: check -- -dash.kiln"; }
expect 64 "unknown option '-d'" check "$tmp/-dash.kiln" -dash

# the arch: nvcc's spellings; an arch Kiln does not target gets one line
for spelling in "-arch=sm_80" "-arch sm_80" "--arch sm_80" "--arch=sm_80"; do
  # shellcheck disable=SC2086
  expect 0 'k1 +matmul \(mma.sync 128x128x32 s3\)' compile samples/llama3_8b_layer.kiln -D B=1 -D S=2048 -D T=2048 --emit=plan $spelling
done
out=$("$kiln" compile "$tmp/tiny.kiln" --emit=cubin -o "$tmp/k75" --arch=sm_75 2>&1)
rc=$?
if [ $rc -eq 64 ] && [ "$(grep -c . <<<"$out")" -eq 2 ] &&
   grep -q "^kiln: --arch=sm_75: Kiln's kernels target sm_80, sm_86, sm_87, sm_89, sm_90, sm_90a, not sm_75$" <<<"$out" &&
   ! grep -qi ptxas <<<"$out"; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: --arch=sm_75 -> $rc: $out"; fi
"$kiln" help compile | tr -s ' \n' ' ' | grep -q 'Kiln targets sm_80, sm_86, sm_87, sm_89, sm_90, sm_90a' &&
  pass=$((pass + 1)) || { fail=$((fail + 1)); echo "FAIL: help compile lists the archs"; }

# kiln run --dims: out of range and duplicates are errors (before any device work)
expect 64 "'B=99999999999999999999' is out of range" run samples/llama3_1b_layer.kiln --dims B=99999999999999999999,S=1,T=8 --random
expect 64 "'T=9223372036854775807' is out of range" run samples/llama3_1b_layer.kiln --dims B=1,S=1,T=9223372036854775807 --random
expect 64 '--dims gives B twice' run samples/llama3_1b_layer.kiln --dims B=1,B=2,S=1,T=8 --random
expect 64 'NAME=N,... with N >= 1' run samples/llama3_1b_layer.kiln --dims B=-1,S=1,T=8 --random
expect 64 "'run' needs --dims" run - --random </dev/null

# --emit=cubin: a file that cannot be written exits 73 with the path and the
# reason and leaves no files (a file-size limit stands in for a full disk)
out=$(trap '' XFSZ; ulimit -f 2; "$kiln" compile "$tmp/tiny.kiln" --emit=cubin --no-cache -o "$tmp/full" 2>&1)
rc=$?
if [ $rc -eq 73 ] && grep -q "^kiln: cannot write $tmp/full/kiln_tiny_k0_elementwise.cubin: File too large$" <<<"$out" &&
   [ -z "$(ls -A "$tmp/full")" ]; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: cubin on a full disk -> $rc: $out; $(ls -A "$tmp/full")"; fi
long=$tmp/$(printf 'd%.0s' $(seq 300))
expect 73 "File name too long" compile "$tmp/tiny.kiln" --emit=cubin -o "$long"
expect 0 '' compile "$tmp/tiny.kiln" --emit=cubin -o "$tmp/k"
[ -s "$tmp/k/kiln_tiny_k0_elementwise.cubin" ] && [ -s "$tmp/k/kernels.txt" ] && [ "$(ls -A "$tmp/k" | wc -l)" -eq 2 ] &&
  pass=$((pass + 1)) || { fail=$((fail + 1)); echo "FAIL: cubin files: $(ls -A "$tmp/k")"; }

# a model name that cannot name its kernel files is refused by check
name=$(printf 'm%.0s' $(seq 201))
printf 'model %s {\n  dims N\n  input x : f32[N, 4]\n  output y = x + 1.0\n}\n' "$name" >"$tmp/long.kiln"
expect 1 "long.kiln:1:7: error: the model name is 201 bytes long; at most 200 fit in the names of its kernel files" check "$tmp/long.kiln"
name=$(printf 'm%.0s' $(seq 200))
printf 'model %s {\n  dims N\n  input x : f32[N, 4]\n  output y = x + 1.0\n}\n' "$name" >"$tmp/ok.kiln"
expect 0 '' check "$tmp/ok.kiln"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
