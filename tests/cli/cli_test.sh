#!/usr/bin/env bash
# cli_test.sh KILN — the command line's contract: exit codes and messages.
set -u
kiln=$1
pass=0 fail=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

. "$(dirname "$0")/expect.sh"

expect 0 'usage: kiln <command>' --help
expect 0 'usage: kiln <command>' help
expect 0 '^kiln [0-9]+\.[0-9]+\.[0-9]+ \(NVRTC [0-9]+\.[0-9]+' --version
expect 64 'no command given' 
expect 64 "unknown command 'frobnicate'" frobnicate samples/llama3_8b_layer.kiln
expect 64 "'check' needs a model file" check
expect 64 "unknown option '--bogus'" check --bogus samples/llama3_8b_layer.kiln
expect 64 "--emit must be ast, ir, fused-ir, plan, dot, cuda, ptx or cubin, not 'cuda2'" compile samples/llama3_8b_layer.kiln --emit=cuda2
expect 64 -- "-D expects NAME=VALUE, got 'B'" check samples/llama3_8b_layer.kiln -D B
expect 64 "-o needs a file name" compile samples/llama3_8b_layer.kiln -o
expect 66 "no/such/file.kiln" check no/such/file.kiln
expect 0 '' check samples/llama3_8b_layer.kiln
expect 0 '^model llama3' compile samples/llama3_8b_layer.kiln
expect 0 'input x : bf16\[1, 1, 4096\]' compile samples/llama3_8b_layer.kiln -D B=1 -DS=1
expect 0 'model' compile samples/gpt2_block.kiln --emit=ast
expect 1 'error' check samples/llama3_8b_layer.kiln -D NOPE=3
expect 73 'cannot write' compile samples/llama3_1b_layer.kiln -o "$tmp/no/dir/out.ir"

# warnings: printed without failing; -Werror fails check and compile; -Wno-NAME silences one
expect 0 "warning: 'y' is computed but never used.*\[-Wunused-value\]" check tests/diag/091_warn_forgotten_output.kiln
expect 1 "error: 'y' is computed but never used.*\[-Werror=unused-value\]" check tests/diag/091_warn_forgotten_output.kiln -Werror
expect 1 "\[-Werror=unused-param\]" compile tests/diag/093_warn_unused_params.kiln -Werror -o /dev/null
expect 1 "\[-Werror=stale-state\]" compile tests/diag/095_warn_stale_state.kiln -Werror -o /dev/null
expect 1 "\[-Werror=attention-layout\]" compile tests/diag/097_warn_attention_layout_q.kiln -Werror -D B=1 -D S=8 -D T=64 --emit=plan
expect 0 "\[-Wattention-layout\]" compile tests/diag/097_warn_attention_layout_q.kiln -o /dev/null
expect 0 '^$' check tests/diag/091_warn_forgotten_output.kiln -Wno-unused-value
expect 0 '^$' check tests/diag/093_warn_unused_params.kiln -Werror -Wno-unused-param
expect 0 '^$' check tests/diag/095_warn_stale_state.kiln -Wno-all
expect 64 "unknown warning option '-Wno-bogus'" check tests/diag/091_warn_forgotten_output.kiln -Wno-bogus
for s in samples/*.kiln; do
  expect 0 '^$' check "$s" -Werror
done

# passes, fusion report, plan, verification
# a kernel on the generic template is a warning in the plan and in --explain, with the reason
# (head dim 16 at prefill; at decode the template takes it)
expect 0 'attention_decode' compile tests/cli/attention_hd16.kiln --emit=plan -D B=1 -D S=2 -D T=8
expect 0 "warning: kernel k0 \(attention, attention 'a' \(line 10\)\) runs the generic elementwise template, not the attention one: attention: the templates take head dimension 64 or 128" compile tests/cli/attention_hd16.kiln --emit=plan -D B=1 -D S=40 -D T=64
expect 0 "warning: kernel k0 \(attention.*generic elementwise template" compile tests/cli/attention_hd16.kiln --explain -o /dev/null
# the plan counts every weight copy made at bind time (an interleaved gate_up weight too)
expect 0 'packed weights 96.0 MiB' compile tests/cli/phi3_gate_up.kiln --emit=plan -D B=1 -D S=1
expect 0 "bind-time copy: mul 'wgu\*ln2' \(line 8\) with its rows interleaved .*, 96.0 MiB" compile tests/cli/phi3_gate_up.kiln --emit=plan -D B=1 -D S=1
# every kernel not fused into a neighbour says why (the gathers of a partial rotary)
# (issue 18: the slice + rope + concat spelling is raised to one rope(dims=32) per q and k, which says why it
# stays out of attention)
expect 0 "taken +raise-partial-rotary \(lines 25, 27\): raise concat\(\[rope\(slice\(q, 0, 32\)\), slice\(q, 32, 128\)\]\)" compile tests/cli/pythia_partial_rotary.kiln --explain -o /dev/null
# the QKV epilogue rotates the partial rotary rope (epilogue-rope); with that rule off, attention refuses it
expect 0 "taken +epilogue-rope \(lines 23, 27\): fuse rope 'q2' \(line 27\) into the epilogue of linear \(line 23\)" compile tests/cli/pythia_partial_rotary.kiln --explain -o /dev/null
expect 0 "k2 +rope 'q2' \(line 27\): a rope is not elementwise.*it is a partial rotary rope \(dims=32\), which the attention templates do not apply \(attention-rope refuses it\)" compile tests/cli/pythia_partial_rotary.kiln --explain -o /dev/null --disable=epilogue-rope
expect 0 "k0 +rmsnorm 'h' \(line 31\): a rmsnorm is a reduction over rows; read by k1, linear \(line 32\), which reads its operands from memory" compile samples/llama3_8b_layer.kiln --explain -o /dev/null
expect 0 'fuse-epilogue' passes
expect 0 'rule epilogue-swiglu' passes
expect 0 'kernels \(7\)' compile samples/llama3_8b_layer.kiln --explain -o /dev/null
expect 0 'refused +residual-norm \(lines 37, 40\)' compile samples/llama3_8b_layer.kiln --explain -o /dev/null
expect 0 'k5 +matmul +linear \(line 41\) \+ slice, slice, silu, mul' compile samples/llama3_8b_layer.kiln -D B=1 -D S=1 -D T=64 --emit=plan
# the template of each kernel: the Hopper matmul at prefill dims, the GEMV at decode, mma.sync elsewhere
# (k1 rotates Q/K and writes the caches in its epilogue, through shared memory and TMA stores at prefill:
# the cooperative 128x256 tile where its tiles fill two waves (384 tiles at M = 2048, N = 6144), else
# ping-pong 128x128 (M = 256: 48 tiles); attention then reads rotated q and the caches and takes the
# Hopper template; at B*S <= 256 through shared memory too, on the skinny 64-row tiles)
expect 0 'k1 +matmul \(wgmma 128x256 s4 tma-store\), mma.sync fallback' compile samples/llama3_8b_layer.kiln -D B=1 -D S=2048 -D T=2048 --emit=plan
expect 0 'k1 +matmul \(wgmma 128x128 s5 ping-pong tma-store\), mma.sync fallback' compile samples/llama3_8b_layer.kiln -D B=1 -D S=257 -D T=512 --emit=plan
expect 0 'k2 +attention_prefill \(wgmma 2x64x128 s2\), mma.sync fallback' compile samples/llama3_8b_layer.kiln -D B=1 -D S=2048 -D T=2048 --emit=plan
expect 0 'k1 +matmul \(wgmma 64x128 s8 ping-pong tma-store\), mma.sync fallback' compile samples/llama3_8b_layer.kiln -D B=2 -D S=100 -D T=128 --emit=plan
# k3 reads the attention output through a reshape with B=1 bound: a unit axis does not stop the template;
# its residual comes by TMA into the epilogue's staging (the plan says so)
expect 0 'k3 +matmul \(wgmma 128x256 s4 tma-store, residual by TMA\), mma.sync fallback' compile samples/llama3_8b_layer.kiln -D B=1 -D S=2048 -D T=2048 --emit=plan
expect 0 'k5 +gemv \(gemv 8 cols' compile samples/llama3_8b_layer.kiln -D B=1 -D S=1 -D T=64 --emit=plan
expect 0 'k1 +matmul \(mma.sync 128x128x32 s3\)' compile samples/llama3_8b_layer.kiln -D B=1 -D S=2048 -D T=2048 --emit=plan --arch=sm_80
expect 0 'memory plan: [0-9]+ intermediate buffers, peak' compile samples/llama3_1b_layer.kiln -D B=1 -D S=1 -D T=64 --emit=plan
expect 64 'the memory plan needs a value for every dim: bind -D B=N -D S=N -D T=N' compile samples/llama3_1b_layer.kiln --emit=plan
expect 64 "--disable: no pass or rule named 'bogus'" compile samples/llama3_1b_layer.kiln --disable=bogus
expect 64 "pass 'plan-kernels' is required" compile samples/llama3_1b_layer.kiln --disable=plan-kernels
expect 64 "no pass named 'nope'" compile samples/llama3_1b_layer.kiln --print-ir-after=nope
expect 0 'IR after raise' compile samples/gpt2_block.kiln --print-ir-after=raise -o /dev/null
expect 0 'IR before fuse-epilogue' compile samples/gpt2_block.kiln --print-ir-before=fuse-epilogue -o /dev/null
expect 0 'IR after plan-kernels' compile samples/gpt2_block.kiln --print-ir-after-all -o /dev/null
expect 0 'kernels \(8\)' compile samples/llama3_1b_layer.kiln --disable=epilogue-swiglu --explain -o /dev/null
expect 0 'verify: ok: 1 outputs' compile samples/gpt2_block.kiln -D D=96 -D B=1 -D S=4 --verify -o /dev/null
expect 0 'checks the passes on the CPU interpreter .*not the generated kernels: `kiln run samples/gpt2_block.kiln --check`' compile samples/gpt2_block.kiln -D D=96 -D B=1 -D S=4 --verify -o /dev/null
expect 0 'verify: ok: 3 outputs and states' compile samples/llama3_1b_layer.kiln -D D=256 -D F=512 --verify -o /dev/null
"$kiln" compile samples/llama3_8b_layer.kiln -D B=1 -D S=1 -D T=64 --report="$tmp/r.json" -o /dev/null
if python3 -c "import json,sys; r=json.load(open(sys.argv[1])); assert len(r['kernels'])==7 and r['memory']['peak_bytes']>0 and any(d['rule']=='epilogue-swiglu' and d['taken'] for d in r['decisions']); assert r['memory']['packed_weight_bytes']==272*2**20; assert 'reduction over rows' in r['kernels'][0]['why_not_fused'] and 'why_not_fused' not in r['kernels'][1]" "$tmp/r.json"; then
  pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: --report JSON"; fi
expect 73 'cannot write the report' compile samples/llama3_1b_layer.kiln --report="$tmp/no/dir/r.json" -o /dev/null

# kernels: CUDA sources, PTX and cubins, through the kernel cache
export KILN_CACHE_DIR="$tmp/cache"
expect 64 'give a directory with -o DIR' compile samples/llama3_1b_layer.kiln --emit=cubin
expect 64 "--arch must look like sm_90a, not 'volta'" compile samples/llama3_1b_layer.kiln --emit=cubin -o "$tmp/k" --arch=volta
expect 64 "'cache' needs ls, verify, clear or why FILE" cache frob
expect 0 '' compile samples/llama3_1b_layer.kiln --emit=cuda -o "$tmp/cu"
# 7 kernels, the attention_prefill fallback of the wgmma attention (k2), and the mma.sync fallback of each
# wgmma matmul (k1, k3, k5, k6 on sm_90a)
if [ "$(ls "$tmp/cu"/*.cu | grep -vc '_mma\.cu$')" -eq 8 ] && [ "$(ls "$tmp/cu"/*_mma.cu | wc -l)" -eq 4 ] &&
   grep -q 'kiln_llama3_1b_layer_k5_matmul' "$tmp/cu/kernels.txt" &&
   grep -q 'template matmul_wgmma.cuh (wgmma 128x128 s5 ping-pong tma-store)' "$tmp/cu/kernels.txt"; then
  pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: --emit=cuda wrote $(ls "$tmp/cu")"; fi
expect 0 '7 kernels in .* \(0 from the cache\)' compile samples/llama3_1b_layer.kiln --emit=cubin -o "$tmp/k" --timings
expect 0 '7 kernels in .* \(7 from the cache\)' compile samples/llama3_1b_layer.kiln --emit=cubin -o "$tmp/k" --timings
expect 0 '7 kernels in .* \(0 from the cache\)' compile samples/llama3_1b_layer.kiln --emit=cubin -o "$tmp/k" --timings --no-cache
if [ "$(ls "$tmp/k"/*.cubin | wc -l)" -eq 7 ] && head -c 4 "$tmp/k/kiln_llama3_1b_layer_k0_row.cubin" | grep -q ELF; then
  pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: --emit=cubin did not write 7 ELF cubins"; fi
expect 0 '^7 entries in' cache ls
expect 0 '^7 entries ok' cache verify
# a truncated entry is found, deleted, and rebuilt by the next compile
victim=$(ls "$KILN_CACHE_DIR"/v1/sm_90a/*.cubin | head -1)
head -c 100 "$victim" >"$victim.tmp" && mv "$victim.tmp" "$victim"
expect 1 '6 entries ok .* 1 corrupt removed' cache verify
expect 0 '7 kernels in .* \(6 from the cache\)' compile samples/llama3_1b_layer.kiln --emit=cubin -o "$tmp/k" --timings
# each entry's manifest, and why a kernel misses
expect 0 'kiln_llama3_1b_layer_k5_matmul  Kiln .*, NVRTC .*, options ' cache ls
expect 0 'k5 +kiln_llama3_1b_layer_k5_matmul: hit' cache why samples/llama3_1b_layer.kiln
expect 0 "k0 +kiln_llama3_1b_layer_k0_row: miss: the nearest entry sm_90a/[0-9a-f]{32} .* differs in the source: the code generated from the model changed" cache why samples/llama3_1b_layer.kiln -D EPS=1e-6
expect 64 "'cache why' needs a model file" cache why
# the cache trusts only directories nobody else can write
chmod 0770 "$KILN_CACHE_DIR"
expect 0 'writable by its group .*caching in memory only' compile samples/gpt2_block.kiln --emit=cubin -o "$tmp/k3"
chmod 0700 "$KILN_CACHE_DIR"
# clear deletes Kiln's files only
echo mine >"$KILN_CACHE_DIR/v1/sm_90a/notes.txt"
expect 0 "removed 7 files .*not Kiln's" cache clear
if [ -f "$KILN_CACHE_DIR/v1/sm_90a/notes.txt" ]; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: cache clear deleted a file that is not Kiln's"; fi
expect 0 '^0 entries in' cache ls
# autotuned choices: export (none yet) and import; a damaged file is refused whole
expect 0 '^0 choices written to' tune export "$tmp/tune.json"
expect 0 '^0 choices imported from' tune import "$tmp/tune.json"
echo '{"kiln_tune": 1, "entries": [], "checksum": "0"}' >"$tmp/bad_tune.json"
expect 1 'checksum does not match' tune import "$tmp/bad_tune.json"
expect 66 'tune import' tune import "$tmp/no_such_tune.json"
expect 64 "'tune' needs export FILE or import FILE" tune
expect 64 "'tune' needs export FILE or import FILE, not 'list'" tune list "$tmp/x.json"
# an unusable cache directory: one warning, and the compiler still works
KILN_CACHE_DIR="$tmp/a_file/cache"; : >"$tmp/a_file"
expect 0 'warning' compile samples/gpt2_block.kiln --emit=cubin -o "$tmp/k2"
expect 73 'not usable' cache ls
unset KILN_CACHE_DIR
expect 0 '' compile samples/gpt2_block.kiln --emit=ptx -o "$tmp/p" --arch=sm_90a
if grep -q '\.target sm_90a' "$tmp/p"/*.ptx; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: PTX target"; fi

# kiln run: usage errors anywhere; without a GPU it says so and exits 69
expect 64 "'run' needs --dims" run samples/llama3_1b_layer.kiln --random
expect 64 'missing T' run samples/llama3_1b_layer.kiln --dims B=1,S=1 --random
expect 64 "no dim 'Q'" run samples/llama3_1b_layer.kiln --dims B=1,S=1,T=8,Q=2 --random
expect 64 'NAME=N,... with N >= 1' run samples/llama3_1b_layer.kiln --dims B=0,S=1,T=8 --random
expect 64 '--weights FILE.safetensors, or --random' run samples/llama3_1b_layer.kiln --dims B=1,S=1,T=8
expect 64 'exclude each other' run samples/llama3_1b_layer.kiln --dims B=1,S=1,T=8 --random --weights w.st
expect 66 'nonexistent' run samples/llama3_1b_layer.kiln --dims B=1,S=1,T=8 --weights "$tmp/nonexistent.safetensors"
printf 'garbage' >"$tmp/bad.safetensors"
expect 66 'bad.safetensors' run samples/llama3_1b_layer.kiln --dims B=1,S=1,T=8 --weights "$tmp/bad.safetensors"
expect 64 '--profile-runs expects 1..100000' run samples/llama3_1b_layer.kiln --dims B=1,S=1,T=8 --random --profile-runs=0
expect 64 "expected a positive number, got 'fast'" run samples/llama3_1b_layer.kiln --dims B=1,S=1,T=8 --random --peak-bw=fast
expect 64 "unexpected argument 'now'" ceilings now
expect 64 "--pos expects a position >= 0, got '-1'" run samples/llama3_1b_layer.kiln --dims B=1,S=1,T=8 --random --pos=-1
if ! "$kiln" run samples/llama3_1b_layer.kiln --dims B=1,S=1,T=8 --random >/dev/null 2>&1; then
  # no device here (CI): a clear message and exit 69
  expect 69 'kiln run needs a CUDA device' run samples/llama3_1b_layer.kiln --dims B=1,S=1,T=8 --random
  expect 69 'kiln run needs a CUDA device' run samples/llama3_1b_layer.kiln --dims B=1,S=1,T=8 --random --profile
  expect 69 'kiln ceilings needs a CUDA device' ceilings --json
fi

# -o writes the same text as stdout
"$kiln" compile samples/llama3_1b_layer.kiln -o "$tmp/a.ir" && "$kiln" compile samples/llama3_1b_layer.kiln >"$tmp/b.ir"
if cmp -s "$tmp/a.ir" "$tmp/b.ir" && [ -s "$tmp/a.ir" ]; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: -o differs from stdout"; fi

# a malformed model: located diagnostic and exit 1
printf 'model m {\n  dims B\n  input x : f32[B, 4]\n  output y = x + nope\n}\n' >"$tmp/bad.kiln"
expect 1 "bad.kiln:4:[0-9]+: error: .*nope" check "$tmp/bad.kiln"
# an empty file and a binary file are errors, not crashes
: >"$tmp/empty.kiln"
expect 1 'error' check "$tmp/empty.kiln"
head -c 2000 /dev/urandom >"$tmp/noise.kiln" 2>/dev/null || printf '\001\002\377' >"$tmp/noise.kiln"
expect 1 'error' check "$tmp/noise.kiln"
# a directory is not a model file
expect 66 'samples' check samples

# never linked against the driver: kiln starts on machines without one
if command -v ldd >/dev/null && ldd "$kiln" | grep -q 'libcuda\.so'; then
  fail=$((fail + 1)); echo "FAIL: kiln links libcuda:"; ldd "$kiln" | grep libcuda
else
  pass=$((pass + 1))
fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
