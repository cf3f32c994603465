#!/usr/bin/env bash
# run_gpu.sh KILN — `kiln run` on a GPU: every sample against the reference
# interpreter (--check), decode steps with graph replays, outputs written,
# bad weight files refused. Exits 77 (skipped) without a CUDA device.
set -u
kiln=$1
pass=0 fail=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export KILN_CACHE_DIR="$tmp/cache"

"$kiln" run samples/llama3_1b_layer.kiln -D D=64 -D F=128 --dims B=1,S=1,T=4 --random >/dev/null 2>&1
if [ $? -eq 69 ]; then echo "no CUDA device: skipped"; exit 77; fi

. "$(dirname "$0")/expect.sh"

expect 0 'check step 0: state +vc' run samples/llama3_1b_layer.kiln -D D=256 -D F=512 --dims B=2,S=5,T=16 --random --check
expect 0 'check step 0: output y' run samples/llama3_8b_layer.kiln -D D=256 -D F=512 --dims B=2,S=3,T=8 --random --check
expect 0 'check step 0: output y' run samples/gpt2_block.kiln -D D=96 --dims B=2,S=7 --random --check
expect 0 'check step 5: output y' run samples/llama3_1b_layer.kiln -D D=256 -D F=512 --dims B=2,S=1,T=8 --random --steps 6 --check
# scaled RoPE (llama3) in the attention template, past the original context
# (ROPE_ORIG=4 while positions run to T - 1; D stays 2048 / 4096 so HD is 64 / 128)
expect 0 'check step 0: output y' run samples/llama3_1b_layer.kiln -D F=256 -D ROPE_ORIG=4 --dims B=2,S=5,T=16 --random --check
expect 0 'check step 5: output y' run samples/llama3_1b_layer.kiln -D F=256 -D ROPE_ORIG=4 --dims B=2,S=1,T=16 --random --steps 6 --check
expect 0 'check step 0: output y' run samples/llama3_1_8b_layer.kiln -D F=256 -D ROPE_ORIG=4 --dims B=2,S=3,T=16 --random --check
expect 0 'replays [1-9]' run samples/llama3_1b_layer.kiln -D D=256 -D F=512 --dims B=1,S=1,T=16 --random --steps 8 --stats
expect 0 'eager runs [1-9]' run samples/llama3_1b_layer.kiln -D D=256 -D F=512 --dims B=1,S=1,T=16 --random --steps 3 --stats --no-graphs
expect 0 'bench: 20 runs, median' run samples/llama3_1b_layer.kiln -D D=256 -D F=512 --dims B=1,S=1,T=16 --random --bench 20
expect 0 'ok: 1 step' run samples/llama3_1b_layer.kiln -D D=256 -D F=512 --dims B=1,S=2,T=16 --random --outputs "$tmp/out.safetensors"
if [ -s "$tmp/out.safetensors" ]; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: no outputs file"; fi
# the outputs file is not a weights file: its missing tensors are named
expect 66 "has no tensor 'ln1'" run samples/llama3_1b_layer.kiln -D D=256 -D F=512 --dims B=1,S=2,T=16 --weights "$tmp/out.safetensors"
# a file truncated in its data section
head -c 40 "$tmp/out.safetensors" >"$tmp/trunc.safetensors"
expect 66 'trunc.safetensors' run samples/llama3_1b_layer.kiln -D D=256 -D F=512 --dims B=1,S=2,T=16 --weights "$tmp/trunc.safetensors"
# an inputs file must hold the model's inputs by name
expect 66 "has no tensor 'x'" run samples/llama3_1b_layer.kiln -D D=256 -D F=512 --dims B=1,S=2,T=16 --random --inputs "$tmp/out.safetensors"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
