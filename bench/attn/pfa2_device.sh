#!/usr/bin/env bash
# bench/attn/pfa2_device.sh — one GPU call for the prefill-attention sweep (issue 10, helper
# pfa2). Run from the worktree root with a built build/; KILN_BASE_SOURCE_DIR = a checkout of
# the code before the change (its codegen/kernels: variant "base", timed in the same process).
# Steps, in order of priority, each cut to what is left of a deadline (PFA2_DEADLINE seconds,
# default 170: the first call, on an H100 with a 40 s cap on step 1 and single-threaded
# references, ran out in step 1's checks; bench/attn/pfa2_h100_call1.txt):
#   1. tests/gpu/test_gpu_attention_wgmma KILN_BENCH=2: the 22 cases, every variant of the
#      template's knobs checked on its group's cases (f64 reference), then the table rows
#      (template defaults) and the sweep (variants interleaved on each shape)
#   2. bench/attn/sdpa.py: PyTorch SDPA's flash / cuDNN / efficient backends on the table's rows,
#      and the cuBLAS 8192^3 ceiling; bench/attn/table.py joins them (attn_table.md)
#   3. one prefill layer through codegen's default (kiln run ... --check)
#   4. under compute-sanitizer, as long as time is left: racecheck on the test's cases 16 and 20
#      and the sweep checks of variant $PFA2_SAN_VARIANT, memcheck on the layer, memcheck on the
#      cases, racecheck on the layer
# Results in $OUT: device.txt, kiln_attn.log, sdpa.jsonl, sdpa.err, attn_table.md, layer.log,
# san.log, times.txt.
set -u
OUT=${OUT:-/tmp/pfa2-out}
mkdir -p "$OUT"
deadline=${PFA2_DEADLINE:-170}
t0=$(date +%s)
left() { echo $((deadline - ($(date +%s) - t0))); }
lim() { local l; l=$(left); [ "$l" -gt "$1" ] && echo "$1" || echo "$l"; }
step() { echo "$1 at $(($(date +%s) - t0))s" >> "$OUT/times.txt"; }
export KILN_CACHE_DIR=${TMPDIR:-/tmp}/pfa2-kcache
san=compute-sanitizer
command -v $san > /dev/null || san=/usr/local/cuda/bin/compute-sanitizer
{ nvidia-smi -L; nvidia-smi --query-gpu=name,clocks.max.sm,power.limit,memory.total --format=csv; } > "$OUT/device.txt" 2>&1

step "test+sweep"
KILN_BENCH=2 timeout "$(lim 90)" build/tests/gpu/test_gpu_attention_wgmma > "$OUT/kiln_attn.log" 2>&1
echo "rc=$?" >> "$OUT/kiln_attn.log"
step "sdpa"
[ "$(left)" -gt 12 ] && timeout "$(lim 40)" python3 bench/attn/sdpa.py > "$OUT/sdpa.jsonl" 2> "$OUT/sdpa.err"
python3 bench/attn/table.py "$OUT/kiln_attn.log" "$OUT/sdpa.jsonl" > "$OUT/attn_table.md" 2>> "$OUT/sdpa.err"
step "layer"
L="build/kiln run samples/llama3_8b_layer.kiln -D D=1024 -D H=8 -D KV=2 -D F=2048 --dims B=2,S=300,T=512 --random --pos=0 --check"
[ "$(left)" -gt 5 ] && { timeout "$(lim 30)" $L > "$OUT/layer.log" 2>&1; echo "rc=$?" >> "$OUT/layer.log"; }
san_cases() {
  KILN_CASES=16,20 KILN_SWEEP=1 KILN_VARIANT=${PFA2_SAN_VARIANT:-combo-qpf} timeout "$(lim 25)" \
    $san --tool "$1" build/tests/gpu/test_gpu_attention_wgmma >> "$OUT/san.log" 2>&1
  echo "== $1 cases rc=$?" >> "$OUT/san.log"
}
san_layer() {
  timeout "$(lim 25)" $san --tool "$1" $L >> "$OUT/san.log" 2>&1
  echo "== $1 layer rc=$?" >> "$OUT/san.log"
}
for s in "cases racecheck" "layer memcheck" "cases memcheck" "layer racecheck"; do
  set -- $s
  step "$s"
  [ "$(left)" -gt 8 ] || break
  san_$1 "$2"
done
step "done"
tail -2 "$OUT/kiln_attn.log"
grep -E "passed|failed|NOT ZERO" "$OUT/kiln_attn.log" | tail -3
grep -A12 "Sweep table B=4 S=4096" "$OUT/attn_table.md" | head -14
grep -E "^== |ERROR SUMMARY|RACECHECK SUMMARY" "$OUT/san.log"
tail -3 "$OUT/layer.log"
cat "$OUT/times.txt"
