#!/usr/bin/env bash
# gemv_mma_gpu.sh KILN — variants of 17..64 rows (batched decode) inside whole layers on a GPU,
# checked (outputs and every state) against the reference interpreter by `kiln run --check`, through
# the template codegen routes them to (codegen/cg.h CG_GEMV_MMA_MAX_ROWS: 64, the tensor-core GEMV
# gemv_mma.cuh, as in the H200 run that passed these; 16, the skinny wgmma split-K): the QKV epilogue
# (RoPE + KV-cache writes through kiln_epilogue2), the RMSNorms folded (rule norm-gemv, when routed)
# or as kernels, SwiGLU on interleaved gate/up,
# residual adds, bias, f16 with GELU (Pythia); rows 17 (prime), 20, 32, 48 (B=2, S=24) and 64, head
# dims 64 and 128. (The full-size Llama-3-8B layer at B=32 is checked against a float32 reference
# by bench/run.sh's case 8b-decode-b32.)
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
expect 0 'check step 2: state +vc' run $L8 --dims B=32,S=1,T=64 --random --steps 3 --check
expect 0 'check step 1: state +vc' run $L8 --dims B=17,S=1,T=64 --random --steps 2 --check
expect 0 'check step 0: state +vc' run $L8 --dims B=2,S=24,T=64 --random --check
expect 0 'check step 1: state +vc' run $L1 --dims B=64,S=1,T=32 --random --steps 2 --check
expect 0 'check step 1: state +vc' run $L8 --dims B=32,S=1,T=64 --random --steps 2 --check --disable=norm-gemv
expect 0 'check step 1: state +vc' run samples/pythia_1_4b_layer.kiln -D D=256 -D H=2 -D F=512 --dims B=20,S=1,T=16 --random --steps 2 --check

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
