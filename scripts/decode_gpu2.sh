#!/usr/bin/env bash
set -u
export KILN_CACHE_DIR=/tmp/kiln-cache-decode
O=${OUT:-/tmp/out}; mkdir -p "$O"
S=$O/summary.txt
prof() { # model mode extra
  if [ "$2" = off ]; then unset KILN_EXP_PDL_MODE; x=--no-pdl; else export KILN_EXP_PDL_MODE=$2; x=; fi
  timeout 60 build/kiln run samples/llama3_$1_layer.kiln --dims B=1,S=1,T=1024 --random --pos=1023 --profile --profile-runs=200 $x > "$O/p_$1_$2_$3.txt" 2>&1
  echo "$1 mode=$2 run$3: $(grep -E '^layer' "$O/p_$1_$2_$3.txt" | cut -c1-60) $(grep -E '^bubbles' "$O/p_$1_$2_$3.txt" | cut -c1-40)" >> "$S"
}
for r in 1 2; do for m in 1b 8b; do for mode in off 0 1 2 3; do prof $m $mode $r; done; done; done
unset KILN_EXP_PDL_MODE
for x in "" --no-pdl; do
( timeout 60 compute-sanitizer --tool memcheck build/kiln run samples/llama3_1b_layer.kiln -D D=1024 -D H=16 -D KV=4 -D F=2048 --dims B=2,S=1,T=64 --random --steps 2 $x 2>&1 | head -c 20000 ) > "$O/memcheck$x.txt" 2>&1
echo "memcheck $x: $(grep -E 'ERROR SUMMARY' "$O/memcheck$x.txt")" >> "$S"
done
tar czf "$O/profiles.tgz" -C "$O" $(cd "$O" && ls p_*.txt) && rm -f "$O"/p_*.txt
cat "$S"
