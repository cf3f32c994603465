"""bench/model/kiln_vs_hf.py — Llama-3-8B decode speed, Kiln against Hugging Face
transformers (a static KV cache, the one-token forward under
torch.compile(mode="reduce-overhead")), on the same random weights: one
LlamaForCausalLM is made on the GPU (seeded) and Kiln binds its tensors by
their checkpoint names. For each batch size: B prompts of CTX - NEW random
tokens, then NEW greedy tokens each, so the last step attends to CTX tokens.
Kiln runs kiln_generate (one CUDA graph per decode step; the model's head and
the two-kernel sampler); transformers' steps are timed after its compile and
graph capture.

    python3 bench/model/kiln_vs_hf.py [--bs 1,8,32] [--ctx 1024] [--new 16] [--hf-bs 1,8,32]
                                      [--hf-timeout S] [--warm] [--ckpt DIR]

--ckpt DIR: the random model is saved there with save_pretrained (sharded
safetensors), tests/model/bench_load prints the file-read, pinned
host-to-device and Kiln load bandwidths of that checkpoint, and Kiln loads
its weights from the checkpoint (kiln_model_load_checkpoint) instead of
binding the PyTorch tensors. --ckpt-layers N: only the first N layers
written (with the embedding, norm and head; bench_load with NL=N), and Kiln
binds the tensors.

--warm: compile-only (no GPU, no torch): fills the kernel and plan caches
($KILN_CACHE_DIR) with every shape the run uses. --hf-timeout: skip the
transformers side of the batch sizes left once S seconds have gone since it
began (its compile is the slow part). One line per (side, B):
"kiln B=..: X tokens/s, Y ms per step" / "hf-compile B=..: ...". """
import argparse
import ctypes
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import kiln  # noqa: E402

# the models by their paths from the repository root (the plan cache's key holds the
# model's name as given: the same on every checkout)
ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
MODEL = os.path.join("samples", "models", "llama3_8b.kiln")
LAYER = os.path.join("samples", "llama3_8b_layer.kiln")


class Sampling(ctypes.Structure):
    _fields_ = [("temperature", ctypes.c_float), ("top_k", ctypes.c_int), ("top_p", ctypes.c_float),
                ("seed", ctypes.c_uint64)]


class GenOptions(ctypes.Structure):
    _fields_ = [("sampling", Sampling), ("max_new", ctypes.c_int), ("stop_ids", ctypes.POINTER(ctypes.c_int32)),
                ("nstop", ctypes.c_int), ("prefill_chunk", ctypes.c_int), ("buckets", ctypes.POINTER(ctypes.c_int)),
                ("nbuckets", ctypes.c_int), ("ids_name", ctypes.c_char_p), ("pos_name", ctypes.c_char_p),
                ("logits_name", ctypes.c_char_p)]


class GenStats(ctypes.Structure):
    _fields_ = [("ttft_ms", ctypes.c_double), ("decode_ms", ctypes.c_double), ("new_tokens", ctypes.c_int64),
                ("tokens_per_s", ctypes.c_double), ("batch", ctypes.c_int), ("bucket_miss", ctypes.c_int),
                ("prefill_calls", ctypes.c_int), ("decode_steps", ctypes.c_int)]


def prompts(b, plen):
    rng = 12345
    out = []
    for _ in range(b):
        row = []
        for _ in range(plen):
            rng = (rng * 1664525 + 1013904223) & 0xFFFFFFFF
            row.append((rng >> 8) % 32000)
        out.append(row)
    return out


def kiln_generate(m, rows, nnew):
    lib = kiln.library()
    lib.kiln_generate.restype = ctypes.c_int
    lib.kiln_generate.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.POINTER(ctypes.POINTER(ctypes.c_int32)),
                                  ctypes.POINTER(ctypes.c_int), ctypes.POINTER(GenOptions),
                                  ctypes.POINTER(ctypes.c_int32), ctypes.POINTER(ctypes.c_int), ctypes.POINTER(GenStats)]
    b = len(rows)
    bufs = [(ctypes.c_int32 * len(r))(*r) for r in rows]
    pp = (ctypes.POINTER(ctypes.c_int32) * b)(*[ctypes.cast(x, ctypes.POINTER(ctypes.c_int32)) for x in bufs])
    lens = (ctypes.c_int * b)(*[len(r) for r in rows])
    out = (ctypes.c_int32 * (b * nnew))()
    olen = (ctypes.c_int * b)()
    o = GenOptions(max_new=nnew)
    s = GenStats()
    st = lib.kiln_generate(m._h, b, pp, lens, ctypes.byref(o), out, olen, ctypes.byref(s))
    if st != 0:
        raise RuntimeError("kiln_generate: %s" % lib.kiln_last_error())
    return s, [list(out[i * nnew:i * nnew + olen[i]]) for i in range(b)]


def compile_kiln(ctx, bs, plen, nnew):
    return ctx.compile(MODEL, max_dims={"B": max(bs), "S": plen, "T": plen + nnew}, lazy=True)


def layer_decode_us(ctx, ctxlen, torch, runs=200):
    """Kiln's one-layer decode (B=1, the last of ctxlen positions): CUDA events
    around `runs` graph replays on a torch stream, median of 5 such rounds."""
    m = ctx.compile(LAYER, max_dims={"B": 1, "S": 1, "T": ctxlen}, lazy=True)
    g = torch.Generator(device="cuda").manual_seed(1)
    ws = {t.name: (torch.randn(t.shape, device="cuda", generator=g) * 0.02).to(torch.bfloat16)
          for t in m.tensors("weight")}
    m.bind_weights(ws)
    m.alloc_states()
    x = torch.randn(1, 1, 4096, device="cuda", generator=g).to(torch.bfloat16)
    pos = torch.tensor([ctxlen - 1], dtype=torch.int32, device="cuda")
    s = torch.cuda.Stream()
    torch.cuda.synchronize()
    rounds = []
    dims = {"B": 1, "S": 1, "T": ctxlen}
    with torch.cuda.stream(s):
        outs = m.run({"x": x, "pos": pos}, dims=dims)
        for _ in range(10):
            m.run({"x": x, "pos": pos}, outputs=outs, dims=dims)
        for _ in range(5):
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            e0.record(s)
            for _ in range(runs):
                m.run({"x": x, "pos": pos}, outputs=outs, dims=dims)
            e1.record(s)
            e1.synchronize()
            rounds.append(e0.elapsed_time(e1) * 1e3 / runs)
    m.close()
    return sorted(rounds)[2]


def save_layers(model, path, nl, shard=4 << 30):
    """The checkpoint of the model's first nl layers (with the embedding, the final
    norm and the head) as save_pretrained lays one out: safetensors shards of at most
    `shard` bytes and model.safetensors.index.json."""
    import json
    from safetensors.torch import save_file
    keep = [(k, v) for k, v in model.state_dict().items()
            if not k.startswith("model.layers.") or int(k.split(".")[2]) < nl]
    shards, cur, size = [], [], 0
    for k, v in keep:
        b = v.numel() * v.element_size()
        if cur and size + b > shard:
            shards.append(cur)
            cur, size = [], 0
        cur.append((k, v))
        size += b
    shards.append(cur)
    os.makedirs(path, exist_ok=True)
    wmap, total = {}, 0
    for i, sh in enumerate(shards):
        name = f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors"
        save_file({k: v.contiguous().cpu() for k, v in sh}, os.path.join(path, name), metadata={"format": "pt"})
        for k, v in sh:
            wmap[k] = name
            total += v.numel() * v.element_size()
    with open(os.path.join(path, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": wmap}, f)


def warm(bs, plen, nnew):
    ctx = kiln.Context(compile_only=True)
    lm = ctx.compile(LAYER, max_dims={"B": 1, "S": 1, "T": plen + nnew}, lazy=True)
    d, nd = kiln._dims({"B": 1, "S": 1, "T": plen + nnew})
    print(f"prepare layer: {kiln.library().kiln_model_prepare(lm._h, d, nd)}", flush=True)
    lm.close()
    m = compile_kiln(ctx, bs, plen, nnew)
    lib = kiln.library()
    for b in bs:
        for s in (1, plen):
            d, nd = kiln._dims({"B": b, "S": s, "T": plen + nnew})
            st = lib.kiln_model_prepare(m._h, d, nd)
            print(f"prepare B={b} S={s}: {'ok' if st == 0 else lib.kiln_last_error()}", flush=True)
    lib.kiln_sampler_create.argtypes = [ctypes.c_void_p, ctypes.POINTER(Sampling), ctypes.c_int, ctypes.POINTER(ctypes.c_void_p)]
    ks = ctypes.c_void_p()
    st = lib.kiln_sampler_create(m._h, ctypes.byref(Sampling()), 1, ctypes.byref(ks))
    print(f"sampler: {'compiled' if st in (0, 9) else lib.kiln_last_error()}", flush=True)
    m.close()
    ctx.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bs", default="1,8,32")
    ap.add_argument("--hf-bs", default=None)
    ap.add_argument("--ctx", type=int, default=1024)
    ap.add_argument("--new", type=int, default=16)
    ap.add_argument("--hf-timeout", type=float, default=1e9)
    ap.add_argument("--warm", action="store_true")
    ap.add_argument("--ckpt", default=None)
    ap.add_argument("--ckpt-layers", type=int, default=0)
    a = ap.parse_args()
    os.chdir(ROOT)
    bs = [int(x) for x in a.bs.split(",")]
    hf_bs = [int(x) for x in (a.hf_bs or a.bs).split(",")]
    nnew = a.new
    plen = a.ctx - nnew
    if a.warm:
        warm(bs, plen, nnew)
        return
    import torch
    import transformers
    from transformers import LlamaConfig, LlamaForCausalLM, StaticCache
    cfg = LlamaConfig(hidden_size=4096, intermediate_size=14336, num_hidden_layers=32, tie_word_embeddings=False,
                      vocab_size=128256, num_attention_heads=32, num_key_value_heads=8, rope_theta=500000.0,
                      max_position_embeddings=8192, rms_norm_eps=1e-5, torch_dtype=torch.bfloat16)
    t0 = time.perf_counter()
    torch.manual_seed(0)
    torch.set_default_dtype(torch.bfloat16)
    with torch.device("cuda"):
        model = LlamaForCausalLM(cfg).eval()
    torch.set_default_dtype(torch.float32)
    torch.cuda.synchronize()
    print(f"transformers {transformers.__version__}, torch {torch.__version__}; random 8B weights made in "
          f"{time.perf_counter() - t0:.1f} s", flush=True)

    if a.ckpt:
        t0 = time.perf_counter()
        if a.ckpt_layers:
            save_layers(model, a.ckpt, a.ckpt_layers)
        else:
            model.save_pretrained(a.ckpt, max_shard_size="5GB")
        os.sync()
        print(f"checkpoint written to {a.ckpt} in {time.perf_counter() - t0:.1f} s: "
              f"{sorted(os.listdir(a.ckpt))}", flush=True)
        nl = [f"NL={a.ckpt_layers}"] if a.ckpt_layers else []
        r = subprocess.run([os.path.join("build", "tests", "model", "bench_load"), MODEL, a.ckpt] + nl,
                           capture_output=True, text=True, timeout=120)
        print(f"bench_load {' '.join(nl)} (rc {r.returncode}):\n{r.stdout}{r.stderr}", flush=True)
        if a.ckpt_layers:  # Kiln binds the whole model's tensors below
            a.ckpt = None

    # Kiln on the same weights
    ctx = kiln.Context()
    t0 = time.perf_counter()
    m = compile_kiln(ctx, bs, plen, nnew)
    print(f"kiln compile (warm start, lazy kernels): {(time.perf_counter() - t0) * 1e3:.1f} ms", flush=True)
    names = [t.name for t in m.tensors("weight")]
    t0 = time.perf_counter()
    if a.ckpt:
        lib = kiln.library()
        lib.kiln_model_load_checkpoint.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_uint]
        if lib.kiln_model_load_checkpoint(m._h, a.ckpt.encode(), 0) != 0:
            raise RuntimeError("load: %s" % lib.kiln_last_error())
        how = "loaded from the checkpoint"
    else:
        sd = model.state_dict()
        m.bind_weights({n: sd[n] for n in names})
        how = "bound"
    m.alloc_states()
    print(f"kiln: {len(names)} weights {how}, states allocated in {time.perf_counter() - t0:.1f} s", flush=True)
    for b in bs:
        rows = prompts(b, plen)
        for rep in range(2):  # the first packs the weights (once), loads the variants and captures the graphs
            t0 = time.perf_counter()
            s, toks = kiln_generate(m, rows, nnew)
            if rep == 0:
                c = m.counters
                print(f"kiln B={b}: first generation {time.perf_counter() - t0:.1f} s (packed on the device "
                      f"{c['packed_bytes_device'] / 1e9:.2f} GB, on the host {c['packed_bytes_host'] / 1e9:.2f} GB; "
                      f"loaded weights released once packed {c['weight_bytes_released'] / 1e9:.2f} GB)", flush=True)
        steps = max(s.decode_steps, 1)
        print(f"kiln B={b} ctx={a.ctx} prompt={plen} new={nnew}: ttft {s.ttft_ms:.1f} ms, {s.tokens_per_s:.1f} tokens/s, "
              f"{s.decode_ms / steps:.3f} ms per step ({s.decode_steps} steps)", flush=True)
    m.close()
    lay = layer_decode_us(ctx, a.ctx, torch)
    buf = torch.empty(1 << 30, dtype=torch.float32, device="cuda").fill_(1)  # 4 GiB streamed: the read bandwidth
    bw = []
    for _ in range(5):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        buf.sum()
        e1.record()
        e1.synchronize()
        bw.append(buf.numel() * 4 / (e0.elapsed_time(e1) * 1e-3))
    del buf
    head_floor = 2 * 128256 * 4096 / max(bw) * 1e6  # the LM head's weight bytes at that bandwidth
    print(f"read bandwidth {max(bw) / 1e12:.2f} TB/s; kiln one-layer decode (B=1, ctx {a.ctx}): {lay:.1f} us; "
          f"1.1 x (32 x layer + head floor {head_floor:.0f} us) "
          f"= {1.1 * (32 * lay + head_floor) / 1e3:.3f} ms per token", flush=True)
    ctx.close()

    # transformers: static cache + torch.compile(mode="reduce-overhead")
    step = torch.compile(model.forward, mode="reduce-overhead", fullgraph=True)
    t_hf = time.perf_counter()
    for b in hf_bs:
        if time.perf_counter() - t_hf > a.hf_timeout:
            print(f"hf-compile B={b}: not run (--hf-timeout {a.hf_timeout:.0f} s reached)", flush=True)
            continue
        try:
            cache = StaticCache(config=cfg, max_batch_size=b, max_cache_len=plen + nnew, device="cuda",
                                dtype=torch.bfloat16)
        except TypeError:  # newer transformers: the batch, device and dtype come with the first update
            cache = StaticCache(config=cfg, max_cache_len=plen + nnew)
        ids = torch.tensor(prompts(b, plen), device="cuda")
        with torch.no_grad():
            pos = torch.arange(plen, device="cuda")
            tok = model(ids, cache_position=pos, past_key_values=cache, use_cache=True).logits[:, -1].argmax(-1, keepdim=True)

            def run(n, start, t):
                for i in range(n):
                    p = torch.tensor([start + i], device="cuda")
                    t = step(t, cache_position=p, past_key_values=cache, use_cache=True).logits[:, -1].argmax(-1, keepdim=True).clone()
                return t

            tc = time.perf_counter()
            tok = run(3, plen, tok)  # compile and capture
            torch.cuda.synchronize()
            tc = time.perf_counter() - tc
            n = nnew - 4
            t0 = time.perf_counter()
            run(n, plen + 3, tok)
            torch.cuda.synchronize()
            dt = time.perf_counter() - t0
        print(f"hf-compile B={b} ctx={a.ctx} prompt={plen} new={nnew}: {b * n / dt:.1f} tokens/s, "
              f"{dt / n * 1e3:.3f} ms per step ({n} steps; compile+capture {tc:.1f} s)", flush=True)
        del cache


if __name__ == "__main__":
    main()
