#!/usr/bin/env bash
# qkv_epilogue_gpu.sh KILN — the QKV matmul's epilogue (passes/fuse_qkv_epilogue.c) on a GPU:
# q rotated and the new K/V rows written into the caches by the projection, checked (outputs and
# every state) against the reference interpreter by `kiln run --check`, through each matmul
# template: GEMV (decode, M <= 16), the wgmma kernel (M > 16: through shared memory and TMA stores,
# matmul_wgmma.cuh KILN_WGMMA_QKV, skinny M on 64-row tiles with split-K, 64-row blocks that straddle
# batch rows (batched decode: every row) stored element by element); a different
# random position per batch row, GQA, head dims 64 and 128, scaled RoPE, partial rotary with a
# bias and a per-head split, and the attention fallback with the epilogue rules off.
# Exits 77 (skipped) without a CUDA device.
set -u
kiln=$1
pass=0 fail=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export KILN_CACHE_DIR=${KILN_CACHE_DIR:-$tmp/cache}

"$kiln" run samples/llama3_1b_layer.kiln -D D=64 -D F=128 --dims B=1,S=1,T=4 --random >/dev/null 2>&1
if [ $? -eq 69 ]; then echo "no CUDA device: skipped"; exit 77; fi

. "$(dirname "$0")/../cli/expect.sh"

L8='samples/llama3_8b_layer.kiln -D D=512 -D H=4 -D KV=2 -D F=512' # head dim 128, 2 query heads per KV head
L1='samples/llama3_1b_layer.kiln -D D=256 -D H=4 -D KV=1 -D F=512' # head dim 64, 4 query heads per KV head
# prefill through the skinny wgmma variant (B*S = 80) and the large-shape kernel (B*S = 600), then decode steps (GEMV)
expect 0 'check step 0: state +vc' run $L8 --dims B=2,S=40,T=64 --random --check
expect 0 'check step 0: state +vc' run $L8 --dims B=2,S=300,T=512 --random --check
expect 0 'check step 3: state +vc' run $L8 --dims B=3,S=1,T=64 --random --steps 4 --check
expect 0 'check step 0: state +vc' run $L1 --dims B=2,S=300,T=512 --random --check
expect 0 'check step 3: state +vc' run $L1 --dims B=2,S=1,T=32 --random --steps 4 --check
# the TMA epilogue: S below a tile (tiles over four batch rows), S not a multiple of 64 with an odd
# batch count, head dim 64 at one position offset for every batch row
expect 0 'check step 0: state +vc' run $L8 --dims B=4,S=100,T=128 --random --check
expect 0 'check step 0: state +vc' run $L8 --dims B=3,S=257,T=300 --random --check --seed=7
expect 0 'check step 0: state +vc' run $L1 --dims B=1,S=1000,T=1024 --random --check --pos=24
# f16 (the sample with every bf16 made f16): the TMA epilogue's f16 staging and element stores
sed 's/bf16/f16/g' samples/llama3_8b_layer.kiln >"$tmp/llama3_8b_f16.kiln"
expect 0 'check step 0: state +vc' run "$tmp/llama3_8b_f16.kiln" -D D=512 -D H=4 -D KV=2 -D F=512 --dims B=2,S=300,T=512 --random --check
# the real 1B and 8B widths at decode: the 1B QKV GEMV on 6 columns per CTA, the 8B one's CTAs
# walking three column blocks each (the next block's loads issued before the epilogue)
expect 0 'check step 1: state +vc' run samples/llama3_1b_layer.kiln --dims B=1,S=1,T=64 --random --steps 2 --check
expect 0 'check step 1: state +vc' run samples/llama3_8b_layer.kiln --dims B=1,S=1,T=64 --random --steps 2 --check
# batched decode on the skinny wgmma kernel (M = B = 32, 17; split-K at D = 2048), every row element by element
# into its own cache row, head dims 128 and 64; 3 new tokens per row across a tile (M = 51)
expect 0 'check step 2: state +vc' run $L8 --dims B=32,S=1,T=64 --random --steps 3 --check
expect 0 'check step 1: state +vc' run samples/llama3_8b_layer.kiln -D D=2048 -D H=16 -D KV=4 -D F=512 --dims B=32,S=1,T=64 --random --steps 2 --check --pos=40
expect 0 'check step 2: state +vc' run $L1 --dims B=17,S=1,T=32 --random --steps 3 --check
expect 0 'check step 0: state +vc' run $L8 --dims B=17,S=3,T=64 --random --check --pos=5
# the attention fallback (epilogue rules off) on the same shape
expect 0 'check step 0: state +vc' run $L8 --dims B=2,S=300,T=512 --random --check --disable=epilogue-rope
# scaled RoPE (llama3, past the original context), partial rotary + bias + per-head split, MoE layer
expect 0 'check step 0: state +vc' run samples/llama3_1_8b_layer.kiln -D D=512 -D H=4 -D KV=2 -D F=256 -D ROPE_ORIG=4 --dims B=2,S=300,T=512 --random --check
expect 0 'check step 0: state +vc' run samples/pythia_1_4b_layer.kiln -D D=256 -D H=2 -D F=512 --dims B=2,S=300,T=512 --random --check
expect 0 'check step 3: state +vc' run samples/pythia_1_4b_layer.kiln -D D=256 -D H=2 -D F=512 --dims B=2,S=1,T=16 --random --steps 4 --check
expect 0 'check step 0: state +vc' run samples/qwen_moe_layer.kiln -D D=256 -D H=2 -D FE=64 -D FS=128 -D E=8 --dims B=2,S=40,T=64 --random --check
# a long prefill: attention_wgmma reads the cache the epilogue wrote
expect 0 'check step 0: state +vc' run $L8 --dims B=1,S=2048,T=2048 --random --check

expect_done
