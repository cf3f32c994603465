#!/usr/bin/env bash
# bench/row/device.sh — one device call: the row-kernel variants of bench/row/build.sh (carried in
# build-gpu/rowbench) at the 8B layer's prefill and decode row counts, with misaligned pointers
# (the unaligned path) for the checksums, then the 8B prefill layer's profiles and `kiln run
# --check` on layers whose norms take the new path, `ctest -L gpu` (GPU_TESTS=0: not) and the
# sanitizers on a prefill layer (slim build: carry build-gpu). TESTS: a ctest -R regex.
DEFAULT_LIMIT=${LIMIT:-300}
. "$(dirname "$0")/../device/common.sh"
for b in build/rowbench/*; do
  for a in "16384 4096 0" "2048 4096 0" "32 4096 0" "2048 4096 1"; do echo "$(basename "$b") $("$b" $a 2>&1)"; done
done | tee "$OUT/rowbench.txt"
echo "rowbench $(el) s" | tee -a "$OUT/times.txt"
[ "${CHECKS:-1}" = 1 ] && {
  kchk l8pf samples/llama3_8b_layer.kiln -D D=1024 -D H=8 -D KV=2 -D F=2048 --dims B=2,S=300,T=512 --pos=0
  kchk mxpf samples/mixtral_8x7b_layer.kiln -D D=1024 -D H=8 -D KV=2 -D F=1024 --dims B=1,S=64,T=128 --pos=0
  kchk g2 bench/attn/gemma_2b_layer.kiln --dims B=1,S=1,T=256 --pos=200
  kchk g2pf bench/attn/gemma_2b_layer.kiln --dims B=1,S=100,T=256 --pos=0
  kchk phi3 samples/phi3_mini_layer.kiln --dims B=2,S=40,T=128 --pos=0
  kchk gpt2 samples/gpt2_block.kiln --dims B=2,S=64 2>/dev/null
} | tee -a "$OUT/checks.txt"
prof build/kiln pf2k samples/llama3_8b_layer.kiln B=1,S=2048,T=2048 1 0
prof build/kiln pf4k samples/llama3_8b_layer.kiln B=4,S=4096,T=4096 1 0
prof build/kiln b32 samples/llama3_8b_layer.kiln B=32,S=1,T=1024 1 1000
prof build/kiln 1b samples/llama3_1b_layer.kiln B=1,S=1,T=1024 1 1023
prof build/kiln 8b samples/llama3_8b_layer.kiln B=1,S=1,T=1024 1 1023
for tool in memcheck racecheck; do
  left || break
  timeout 60 $san --tool $tool build/kiln run samples/llama3_8b_layer.kiln -D D=1024 -D H=8 -D KV=2 -D F=2048 \
    --dims B=2,S=300,T=512 --pos=0 --random --check > /tmp/san_$tool.txt 2>&1
  echo "$tool s300 rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' /tmp/san_$tool.txt | tail -1)" | tee -a "$OUT/times.txt"
done
if [ "${GPU_TESTS:-1}" = 1 ]; then
  (cd build && timeout $((LIMIT - 20 - $(el))) ctest -L gpu ${TESTS:+-R "$TESTS"} -j 3 --output-on-failure --timeout 300) > "$OUT/gpu_tests.log" 2>&1
  echo "ctest -L gpu rc=$? $(el) s" | tee -a "$OUT/times.txt"
  grep -E "tests passed|Failed|\*\*\*" "$OUT/gpu_tests.log" | tail -30
fi
cat "$OUT/times.txt"
