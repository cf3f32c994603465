#!/usr/bin/env bash
# run_gpu.sh KILN — `kiln run` on a GPU: every sample against the reference
# interpreter (--check), decode steps with graph replays, outputs written,
# bad weight files refused. Exits 77 (skipped) without a CUDA device.
# PART (1 or 2; default both) runs half of the cases, so that ctest can run the halves side by side
# (tests/cli/CMakeLists.txt: cli_run_gpu_1 and cli_run_gpu_2).
set -u
kiln=$1
part=${2:-all}
case $part in all | 1 | 2) ;; *) echo "run_gpu.sh: PART must be 1 or 2, not '$part'" >&2; exit 2 ;; esac
in_part() { [ "$part" = all ] || [ "$part" = "$1" ]; }
pass=0 fail=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export KILN_CACHE_DIR="$tmp/cache"

"$kiln" run samples/llama3_1b_layer.kiln -D D=64 -D F=128 --dims B=1,S=1,T=4 --random >/dev/null 2>&1
if [ $? -eq 69 ]; then echo "no CUDA device: skipped"; exit 77; fi

. "$(dirname "$0")/expect.sh"

if in_part 1; then
expect 0 'check step 0: state +vc' run samples/llama3_1b_layer.kiln -D D=256 -D F=512 --dims B=2,S=5,T=16 --random --check
expect 0 'check step 0: output y' run samples/llama3_8b_layer.kiln -D D=256 -D F=512 --dims B=2,S=3,T=8 --random --check
expect 0 'check step 0: output y' run samples/gpt2_block.kiln -D D=96 --dims B=2,S=7 --random --check
expect 0 'check step 5: output y' run samples/llama3_1b_layer.kiln -D D=256 -D F=512 --dims B=2,S=1,T=8 --random --steps 6 --check
# --pos: any position the cache can hold (past the 16 that random positions stay under), and not one more
expect 0 'check step 0: output y' run samples/llama3_1b_layer.kiln -D D=256 -D F=512 --dims B=1,S=1,T=64 --random --pos=63 --check
expect 64 "--pos=64: 'pos' must stay below 64 at these dims" run samples/llama3_1b_layer.kiln -D D=256 -D F=512 --dims B=1,S=1,T=64 --random --pos=64
# scaled RoPE (llama3) in the attention template, past the original context
# (ROPE_ORIG=4 while positions run to T - 1; D stays 2048 / 4096 so HD is 64 / 128)
expect 0 'check step 0: output y' run samples/llama3_1b_layer.kiln -D F=256 -D ROPE_ORIG=4 --dims B=2,S=5,T=16 --random --check
# issue 18's samples against the interpreter (shrunk: D 256, the head dims as the checkpoints have them),
# prefill then decode steps: partial rotary; window (3 keys, so decode steps slide it) + soft-cap + f32
# (1 + w) norms; q/k norms; top-2 and top-4 MoE with a shared expert
expect 0 'check step 0: output y' run samples/pythia_1_4b_layer.kiln -D D=256 -D H=2 -D F=512 --dims B=2,S=5,T=16 --random --check
expect 0 'check step 5: output y' run samples/pythia_1_4b_layer.kiln -D D=256 -D H=2 -D F=512 --dims B=2,S=1,T=16 --random --steps 6 --check
expect 0 'check step 0: output y' run samples/gemma2_2b_layer.kiln -D D=256 -D F=512 -D WINDOW=3 --dims B=2,S=5,T=16 --random --check
expect 0 'check step 5: output y' run samples/gemma2_2b_layer.kiln -D D=256 -D F=512 -D WINDOW=3 --dims B=2,S=1,T=16 --random --steps 6 --check
expect 0 'check step 0: output y' run samples/qwen3_8b_layer.kiln -D D=256 -D H=2 -D KV=1 -D F=512 --dims B=2,S=5,T=16 --random --check
expect 0 'check step 0: output y' run samples/mixtral_8x7b_layer.kiln -D D=256 -D H=2 -D KV=1 -D F=512 --dims B=2,S=5,T=16 --random --check
expect 0 'check step 3: output y' run samples/mixtral_8x7b_layer.kiln -D D=256 -D H=2 -D KV=1 -D F=512 --dims B=1,S=1,T=16 --random --steps 4 --check
expect 0 'check step 0: output y' run samples/qwen_moe_layer.kiln -D D=256 -D H=2 -D FE=64 -D FS=128 -D E=8 --dims B=2,S=5,T=16 --random --check
# a kernel of the run's variant on the generic template is a warning, with the reason (the large-shape variant at 40 rows; at 1 row the decode template takes head dim 16)
expect 0 "warning: kernel k0 \\(attention, attention 'a' \\(line 10\\)\\) runs the generic elementwise template.*head dimension 64 or 128" run tests/cli/attention_hd16.kiln --dims B=1,S=40,T=64 --random --check
expect 0 'check step 0: output a' run tests/cli/attention_hd16.kiln --dims B=1,S=1,T=8 --random --check
expect 0 'check step 5: output y' run samples/llama3_1b_layer.kiln -D F=256 -D ROPE_ORIG=4 --dims B=2,S=1,T=16 --random --steps 6 --check
fi
if in_part 2; then
# decode attention (attention_decode.cuh) against the reference past its tiles: head dim 256 with one
# KV head, 96 with as many KV heads as query heads, Gemma-2's sliding window and soft-cap, and the
# unfused form (RoPE and the cache write in their own kernels: the attention only reads)
expect 0 'check step 2: state +vc' run bench/attn/gemma_2b_layer.kiln -D D=256 -D F=512 --dims B=2,S=1,T=1100 --random --pos=1040 --steps 3 --check
expect 0 'check step 2: state +vc' run samples/phi3_mini_layer.kiln -D D=384 -D H=4 -D KV=4 -D F=512 --dims B=2,S=1,T=1100 --random --pos=1040 --steps 3 --check
expect 0 'check step 2: output y' run samples/gemma2_2b_layer.kiln -D D=256 -D F=512 -D WINDOW=100 --dims B=2,S=1,T=400 --random --pos=300 --steps 3 --check
expect 0 'check step 2: output y' run samples/gemma2_2b_layer.kiln -D D=256 -D F=512 -D WINDOW=100 --dims B=2,S=1,T=400 --random --pos=300 --steps 3 --check --disable=attention-rope,attention-cache-write
expect 0 'check step 2: state +vc' run samples/llama3_1b_layer.kiln -D D=256 -D F=512 --dims B=2,S=1,T=1100 --random --pos=1040 --steps 3 --check --disable=attention-rope,attention-cache-write
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

# the ceilings: measured once into the cache directory, then read from it; --json for bench/
expect 0 'read bandwidth: [0-9.]+ TB/s' ceilings
expect 0 'read from .*/ceilings/' ceilings
expect 0 '"bf16_rate"' ceilings --json
# --profile: the table, the trace, the roofline and the JSON, one row per kernel timed in every replay
expect 0 'bubbles: median' run samples/llama3_1b_layer.kiln -D D=256 -D F=512 --dims B=1,S=1,T=16 --random --profile \
  --profile-runs=12 --trace="$tmp/t.json" --roofline="$tmp/r.svg" --profile-json="$tmp/p.json"
if python3 - "$tmp/p.json" "$tmp/t.json" "$tmp/r.svg" <<'PY'
import json, sys, xml.etree.ElementTree as E
p = json.load(open(sys.argv[1])); t = json.load(open(sys.argv[2]))
ks = [k for k in p["kernels"] if k["group"] >= 0]
assert p["runs"] == 12 and len(ks) >= 5, p["runs"]
assert all(k["samples"] == 12 and k["median_us"] > 0 and k["cost"]["bytes"] > 0 for k in ks), ks
assert p["layer"]["median_us"] >= sum(k["median_us"] for k in p["kernels"]) * 0.9
assert sum(1 for e in t["traceEvents"] if e.get("cat") == "replay") == 12
svg = E.parse(sys.argv[3]).getroot()
pts = [c for c in svg.iter("{http://www.w3.org/2000/svg}circle") if c.get("class") == "kernel"]
assert len(pts) == len(p["kernels"]), (len(pts), len(p["kernels"]))
PY
then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: the profile's files"; fi
expect 0 'ceilings: read 2.00 TB/s, tensor 500 TFLOP/s' run samples/llama3_1b_layer.kiln -D D=256 -D F=512 \
  --dims B=1,S=1,T=16 --random --profile --profile-runs=5 --peak-bw=2 --peak-flops=500
fi

expect_done
