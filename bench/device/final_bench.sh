#!/usr/bin/env bash
# bench/device/final_bench.sh — the merged tree's numbers in one device call, over the slim
# build (carry build-gpu): the layer table (bench/run.sh: Kiln, PyTorch eager+graph and
# torch.compile+graph), the decode profiles of the Llama, Gemma-2B and Phi-3-mini layers, and
# the graph launch's head and tail (bench/graph/graph_gap.cu). Each step started only while
# the elapsed time is under LIMIT seconds. Results under $OUT.
#   LIMIT (520), CASES (bench/run.sh's cases), BENCH_TOTAL (300)
DEFAULT_LIMIT=520
. "$(dirname "$0")/common.sh"
prof() { # label model dims pos
  left || return
  echo "== $1 ($(el) s)" >> "$OUT/profiles.txt"
  timeout 60 build/kiln run "$2" --dims "$3" --random --pos="$4" --profile --profile-runs=40 >> "$OUT/profiles.txt" 2>&1
  echo "rc=$?" >> "$OUT/profiles.txt"
}
prof 1b-b1 samples/llama3_1b_layer.kiln B=1,S=1,T=1024 1023
prof 8b-b1 samples/llama3_8b_layer.kiln B=1,S=1,T=1024 1023
prof 8b-b32 samples/llama3_8b_layer.kiln B=32,S=1,T=1024 1023
prof gemma2b-b1 bench/attn/gemma_2b_layer.kiln B=1,S=1,T=1024 1023
prof phi3-b1 samples/phi3_mini_layer.kiln B=1,S=1,T=1024 1023
if left; then
  nvcc -O2 -gencode=arch=compute_90,code=sm_90 -o /tmp/graph_gap bench/graph/graph_gap.cu &&
    timeout 60 /tmp/graph_gap 5 8 200 > "$OUT/graph_gap.txt" 2>&1
  echo "graph_gap rc=$? $(el) s" >> "$OUT/times.txt"
fi
if left; then
  BENCH_CASES=${CASES:-1b-decode,8b-decode,8b-decode-b32,8b-prefill-2k,8b-prefill-b4-4k} \
    BENCH_VARIANTS=${VARIANTS:-kiln,graph,compile-graph} BENCH_PROFILE=0 \
    BENCH_TOTAL=${BENCH_TOTAL:-$((LIMIT - $(el)))} timeout $((LIMIT - $(el) + 30)) bench/run.sh > /dev/null 2>&1
  echo "bench rc=$? $(el) s" >> "$OUT/times.txt"
fi
grep -E "^== |^layer|^bubbles|attention" "$OUT/profiles.txt"
cat "$OUT/graph_gap.txt" "$OUT/times.txt" 2>/dev/null
sed -n '/---- all cases/,$p' "$OUT/bench.log" 2>/dev/null | head -30
