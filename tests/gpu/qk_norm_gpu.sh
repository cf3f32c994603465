#!/usr/bin/env bash
# qk_norm_gpu.sh KILN — Qwen3's per-head q/k RMSNorm on a GPU: outputs and every state (the caches,
# normed and rotated) against the reference interpreter by `kiln run --check`, in each form: the
# default per variant (prefill: the QKV matmul's epilogue, rule epilogue-head-norm,
# passes/fuse_qkv_epilogue.c; decode: the decode variants' graph, row kernels, src/compile.c),
# --disable (row kernels everywhere) and --enable (the QKV epilogue in every variant). The epilogue's
# ways: the Hopper QKV epilogue's in-register norm (a quad of lanes holds a head's row; large M on
# 128x128 tiles, skinny M on 64-row tiles, S not a multiple of a tile, head dims 128 and 64, f16)
# and the per-head counters of the register epilogue (the decode GEMV at B = 1 and 2, the wgmma
# register epilogue at head dim 32).
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

Q='samples/qwen3_8b_layer.kiln -D D=512 -D H=4 -D KV=2 -D F=512' # head dim 128, 2 query heads per KV head
# the default, per variant: prefill (the large-shape variant, and an exact one of 20 rows per
# sequence) takes the QKV-epilogue head norm; decode (at most 16 rows per sequence) the decode
# variants' graph (row kernels, attention applies RoPE and the cache writes)
expect 0 'check step 0: state +vc' run $Q --dims B=2,S=300,T=512 --random --check
expect 0 'check step 0: state +vc' run $Q --dims B=1,S=20,T=64 --random --check --pos=7
expect 0 'check step 3: state +vc' run $Q --dims B=1,S=1,T=64 --random --steps 4 --check
expect 0 'check step 2: state +vc' run $Q --dims B=4,S=1,T=64 --random --steps 3 --check
expect 0 'check step 1: state +vc' run samples/qwen3_8b_layer.kiln --dims B=1,S=1,T=64 --random --steps 2 --check
# --disable: row kernels in every variant
expect 0 'check step 0: state +vc' run $Q --dims B=2,S=100,T=128 --random --check --disable=epilogue-head-norm
expect 0 'check step 1: state +vc' run $Q --dims B=2,S=1,T=64 --random --steps 2 --check --disable=epilogue-head-norm
# --enable: the QKV-epilogue head norm in every variant, decode too: the skinny tiles at prefill
# (B*S = 80), head dim 64 at a position offset; at decode the GEMV's per-head counters (B = 1, 2),
# the skinny wgmma tiles (B = 3), the real widths
expect 0 'check step 0: state +vc' run $Q --dims B=2,S=40,T=64 --random --check --seed=3 --enable=epilogue-head-norm
expect 0 'check step 0: state +vc' run samples/qwen3_8b_layer.kiln -D D=512 -D H=8 -D KV=2 -D HD=64 -D F=512 --dims B=1,S=200,T=256 --random --check --pos=24
expect 0 'check step 3: state +vc' run $Q --dims B=1,S=1,T=64 --random --steps 4 --check --enable=epilogue-head-norm
expect 0 'check step 2: state +vc' run $Q --dims B=2,S=1,T=64 --random --steps 3 --check --enable=epilogue-head-norm
expect 0 'check step 2: state +vc' run $Q --dims B=3,S=1,T=64 --random --steps 3 --check --enable=epilogue-head-norm
expect 0 'check step 1: state +vc' run samples/qwen3_8b_layer.kiln --dims B=1,S=1,T=64 --random --steps 2 --check --enable=epilogue-head-norm
# head dim 32: no Hopper QKV epilogue, the register epilogue counts each head's columns
expect 0 'check step 0: state +vc' run samples/qwen3_8b_layer.kiln -D D=512 -D H=16 -D KV=4 -D HD=32 -D F=512 --dims B=2,S=100,T=128 --random --check
# f16
sed 's/bf16/f16/g' samples/qwen3_8b_layer.kiln >"$tmp/qwen3_f16.kiln"
expect 0 'check step 0: state +vc' run "$tmp/qwen3_f16.kiln" -D D=512 -D H=4 -D KV=2 -D F=512 --dims B=2,S=100,T=128 --random --check

expect_done
