#!/usr/bin/env bash
# bench/device/call_q3.sh — Qwen3's decode variants with the QKV weight's rotation pairs kept side by
# side through the per-head q/k norm (codegen KILN_CG_PAIR_HEAD_NORM, on by default since 2026-12-06: one QKV copy
# instead of two once a decode variant is planned), checked against the interpreter in one call,
# over the slim build (carry build-gpu with build-gpu/variants/kiln_q3pair from
# `bash bench/attn/push_variants.sh build q3pair "-DKILN_CG_PAIR_HEAD_NORM=1"`):
#   1. `kiln run --check` of samples/qwen3_8b_layer.kiln with kiln_q3pair: decode B = 1, 2, 8 (and
#      B = 2 S = 5), prefill B = 2 S = 300; racecheck and memcheck at B = 8;
#   2. layer profiles at B = 1 and 8, the default and kiln_q3pair interleaved.
# It passed on an H100 on 2026-12-06 and the knob is on; with it on, kiln_q3pair is the default build.
# LIMIT (200)
DEFAULT_LIMIT=200
. "$(dirname "$0")/common.sh"
Q3=samples/qwen3_8b_layer.kiln V=build/variants/kiln_q3pair
( for d in "B=1,S=1" "B=2,S=1" "B=8,S=1" "B=2,S=5"; do
    timeout 90 $V run $Q3 --dims $d,T=1024 --pos=900 --random --check > /tmp/c.txt 2>&1
    echo "check q3pair $d rc=$? $(grep -E 'check step' /tmp/c.txt | tail -1 | cut -c1-100)"
  done
  timeout 90 $V run $Q3 --dims B=2,S=300,T=512 --pos=0 --random --check > /tmp/c.txt 2>&1
  echo "check q3pair prefill rc=$? $(grep -E 'check step' /tmp/c.txt | tail -1 | cut -c1-100)" ) > /tmp/ck.txt 2>&1 &
for tool in racecheck memcheck; do
  ( timeout 150 $san --tool $tool --error-exitcode 9 $V run $Q3 -D D=1024 -D H=8 -D KV=2 -D F=2048 \
      --dims B=8,S=1,T=512 --pos=400 --random --check > "/tmp/san_$tool.txt" 2>&1
    echo "$tool q3pair B=8 rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "/tmp/san_$tool.txt" | tail -1)" ) \
    > "/tmp/sanrc_$tool.txt" &
done
wait
cat /tmp/ck.txt /tmp/sanrc_*.txt | tee "$OUT/checks.txt"
for r in 1 2; do
  for bb in 1 8; do for b in build/kiln $V; do prof $b q3-b$bb $Q3 B=$bb,S=1,T=1024 $r 1000; done; done
done
sort "$OUT/table.txt"
