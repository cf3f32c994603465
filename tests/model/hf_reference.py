#!/usr/bin/env python3
"""tests/model/hf_reference.py ARCH:OUT_DIR:REF.json... — random-weight
transformers models and their references for tests/model/test_model_gpu.c
(one process for several, to import torch once).

ARCH: llama (LlamaForCausalLM shaped like Llama-3.2-1B: tied embeddings, llama3
RoPE scaling) or qwen2 (Qwen2ForCausalLM: Q/K/V biases, tied). Two layers,
hidden 256, 4 query and 2 KV heads of 64, FFN 512, vocabulary 512. Every
parameter random (norm gains 1 + 0.1 N(0,1), biases 0.02 N(0,1)), bf16, saved
with save_pretrained in shards of at most 300 kB (an index and several shards).
REF.json: a prompt of 8 tokens; the logits of transformers' forward over the
prompt and its own 33 greedy tokens (teacher forcing: the last prompt position,
then 32 steps); per step the tolerance (3e-2 of the largest |logit|) and the
top-2 margin; and for three prompts (8, 5 and 11 tokens) transformers' greedy
continuation of 33 tokens with its margins and tolerances."""
import json
import math
import sys

import torch
import transformers

STEPS = 33


def llama3_inv_freq(hd, theta, factor, low, high, orig):
    inv = [theta ** (-2.0 * i / hd) for i in range(hd // 2)]
    out = []
    for f in inv:
        w = 2 * math.pi / f
        if w < orig / high:
            out.append(f)
        elif w > orig / low:
            out.append(f / factor)
        else:
            s = (orig / w - low) / (high - low)
            out.append((1 - s) * f / factor + s * f)
    return torch.tensor(out, dtype=torch.float32)


def build(arch):
    common = dict(vocab_size=512, hidden_size=256, intermediate_size=512, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=True,
                  max_position_embeddings=4096)
    if arch == "llama":
        rp = {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 32.0, "low_freq_factor": 1.0,
              "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}
        cfg = transformers.LlamaConfig(rms_norm_eps=1e-5, rope_parameters=rp, **common)
        model = transformers.LlamaForCausalLM(cfg)
        want = llama3_inv_freq(64, 500000.0, 32.0, 1.0, 4.0, 8192)
    else:
        cfg = transformers.Qwen2Config(rms_norm_eps=1e-6, rope_parameters={"rope_type": "default", "rope_theta": 1e6},
                                       use_sliding_window=False, **common)
        model = transformers.Qwen2ForCausalLM(cfg)
        want = torch.tensor([1e6 ** (-2.0 * i / 64) for i in range(32)], dtype=torch.float32)
    rot = model.model.rotary_emb
    if not torch.allclose(rot.inv_freq.float().cpu(), want, rtol=1e-5):
        print(f"{arch}: the config's RoPE frequencies differ from the model file's; setting them", flush=True)
        rot.inv_freq.copy_(want)
        if hasattr(rot, "original_inv_freq"):
            rot.original_inv_freq = want.clone()
    g = torch.Generator().manual_seed(1 if arch == "llama" else 2)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.copy_(1 + 0.1 * torch.randn(p.shape, generator=g))
            elif name.endswith("bias"):
                p.copy_(0.02 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(0.05 * torch.randn(p.shape, generator=g))
    return model.to(torch.bfloat16).cuda().eval()


def greedy_with_margins(model, prompt):
    """transformers' greedy continuation (its full forward's argmax fed back) and,
    per step, the logits, tolerance and top-2 margin."""
    ids = list(prompt)
    rows = []
    with torch.no_grad():
        for _ in range(STEPS):
            out = model(torch.tensor([ids], device="cuda")).logits[0, -1].float()
            rows.append(out.cpu())
            ids.append(int(out.argmax()))
    gen = ids[len(prompt):]
    full = torch.tensor([prompt + gen[:STEPS - 1]], device="cuda")
    with torch.no_grad():
        tf = model(full).logits[0, len(prompt) - 1:].float().cpu()  # teacher forcing in one forward
    top2 = tf.topk(2, dim=-1).values
    margin = (top2[:, 0] - top2[:, 1]).tolist()
    atol = (3e-2 * tf.abs().max(dim=-1).values).tolist()
    return gen, tf, margin, atol


def ckpt_random(out_dir, kind="1b"):
    """A random checkpoint shaped like Llama-3.2-1B (16 layers, tied; 2 shards)
    or Llama-3-8B (32 layers, its own lm_head; 4 shards), with an index, for
    tests/model/bench_load.c and bench/model/run.sh; prints the page-cache read
    and pinned host-to-device bandwidths measured here."""
    import os
    import time
    from safetensors.torch import save_file
    if kind == "8b":
        V, D, KV, F, NL, nshards = 128256, 4096, 1024, 14336, 32, 4
    else:
        V, D, KV, F, NL, nshards = 128256, 2048, 512, 8192, 16, 2
    shapes = {"model.embed_tokens.weight": (V, D), "model.norm.weight": (D,)}
    if kind == "8b":
        shapes["lm_head.weight"] = (V, D)
    for i in range(NL):
        p = f"model.layers.{i}."
        shapes.update({p + "input_layernorm.weight": (D,), p + "post_attention_layernorm.weight": (D,),
                       p + "self_attn.q_proj.weight": (D, D), p + "self_attn.k_proj.weight": (KV, D),
                       p + "self_attn.v_proj.weight": (KV, D), p + "self_attn.o_proj.weight": (D, D),
                       p + "mlp.gate_proj.weight": (F, D), p + "mlp.up_proj.weight": (F, D),
                       p + "mlp.down_proj.weight": (D, F)})
    os.makedirs(out_dir, exist_ok=True)
    names = list(shapes)
    per = (len(names) + nshards - 1) // nshards
    wmap, total, files = {}, 0, []
    for k in range(nshards):
        part = names[k * per:(k + 1) * per]
        fn = f"model-{k + 1:05d}-of-{nshards:05d}.safetensors"
        ts = {n: (torch.randn(shapes[n], device="cuda", dtype=torch.bfloat16) * 0.02).cpu() for n in part}
        save_file(ts, os.path.join(out_dir, fn))
        files.append(fn)
        for n in part:
            wmap[n] = fn
            total += ts[n].numel() * 2
        del ts
    with open(os.path.join(out_dir, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": wmap}, f)
    t = time.perf_counter()
    n = 0
    for fn in files:
        with open(os.path.join(out_dir, fn), "rb") as f:
            while True:
                b = f.read(1 << 28)
                if not b:
                    break
                n += len(b)
    read = n / (time.perf_counter() - t)
    h = torch.empty(1 << 30, dtype=torch.uint8).pin_memory()
    d = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
    d.copy_(h, non_blocking=True)
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(4):
        d.copy_(h, non_blocking=True)
    torch.cuda.synchronize()
    h2d = 4 * (1 << 30) / (time.perf_counter() - t)
    print(f"ckpt_{kind}: {total / 1e9:.3f} GB in {nshards} shards; file read (page cache) {read / 1e9:.2f} GB/s, "
          f"pinned host-to-device {h2d / 1e9:.2f} GB/s", flush=True)


def main():
    for spec in sys.argv[1:]:
        if spec.startswith("ckpt1b:") or spec.startswith("ckpt8b:"):
            ckpt_random(spec.split(":", 1)[1], spec[4:6])
        else:
            one(*spec.split(":"))


def one(arch, out_dir, ref_path):
    torch.manual_seed(0)
    model = build(arch)
    model.save_pretrained(out_dir, max_shard_size="300KB")
    g = torch.Generator().manual_seed(3)
    p0 = torch.randint(0, 512, (8,), generator=g).tolist()
    prompts = [p0, torch.randint(0, 512, (5,), generator=g).tolist(), torch.randint(0, 512, (11,), generator=g).tolist()]
    ref = {"vocab": 512, "prompt": p0, "prompts": []}
    for i, p in enumerate(prompts):
        gen, tf, margin, atol = greedy_with_margins(model, p)
        if i == 0:
            ref.update(greedy=gen, logits=tf.tolist(), margin=margin, atol=atol)
        ref["prompts"].append({"prompt": p, "greedy": gen, "margin": margin, "atol": atol})
    with open(ref_path, "w") as f:
        json.dump(ref, f)
    near = sum(1 for m, a in zip(ref["margin"], ref["atol"]) if m <= 2 * a)
    print(f"{arch}: transformers {transformers.__version__}, saved to {out_dir}; {near} of {STEPS} steps are near-ties")


if __name__ == "__main__":
    main()
