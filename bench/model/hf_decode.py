"""bench/model/hf_decode.py — Hugging Face transformers' decode speed on the
same random-weight model shapes as bench/model/run.sh gives Kiln: a
LlamaForCausalLM from the config of Llama-3.2-1B or Llama-3-8B (random weights,
bf16, on the GPU), a static KV cache, and the one-token forward under
torch.compile(mode="reduce-overhead") (CUDA graphs). For each batch size: a
prefill of PROMPT tokens, then NEW greedy decode steps timed as a whole.

    python3 bench/model/hf_decode.py 1b|8b B1,B2,... [PROMPT [NEW]]

Prints one line per batch size: "hf B=... : X tokens/s, Y ms per step"."""
import sys
import time

import torch
import transformers
from transformers import LlamaConfig, LlamaForCausalLM, StaticCache


def config(kind):
    common = dict(vocab_size=128256, num_attention_heads=32, num_key_value_heads=8, rope_theta=500000.0,
                  max_position_embeddings=8192, rms_norm_eps=1e-5, torch_dtype=torch.bfloat16)
    if kind == "8b":
        return LlamaConfig(hidden_size=4096, intermediate_size=14336, num_hidden_layers=32, tie_word_embeddings=False,
                           **common)
    return LlamaConfig(hidden_size=2048, intermediate_size=8192, num_hidden_layers=16, tie_word_embeddings=True,
                       rope_scaling=dict(rope_type="llama3", factor=32.0, low_freq_factor=1.0, high_freq_factor=4.0,
                                         original_max_position_embeddings=8192), **common)


def main():
    kind, bs = sys.argv[1], [int(b) for b in sys.argv[2].split(",")]
    plen = int(sys.argv[3]) if len(sys.argv) > 3 else 32
    nnew = int(sys.argv[4]) if len(sys.argv) > 4 else 128
    cfg = config(kind)
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = LlamaForCausalLM(cfg).to(torch.bfloat16).eval()
    step = torch.compile(model.forward, mode="reduce-overhead", fullgraph=True)
    print(f"transformers {transformers.__version__}, torch {torch.__version__}", flush=True)
    for b in bs:
        cache = StaticCache(config=cfg, max_batch_size=b, max_cache_len=plen + nnew, device="cuda",
                            dtype=torch.bfloat16)
        ids = torch.randint(0, 32000, (b, plen), device="cuda")
        with torch.no_grad():
            pos = torch.arange(plen, device="cuda")
            out = model(ids, cache_position=pos, past_key_values=cache, use_cache=True).logits[:, -1]
            tok = out.argmax(-1, keepdim=True)

            def run(n, start):
                t = tok
                for i in range(n):
                    p = torch.tensor([start + i], device="cuda")
                    lg = step(t, cache_position=p, past_key_values=cache, use_cache=True).logits[:, -1]
                    t = lg.argmax(-1, keepdim=True).clone()
                return t

            run(3, plen)  # compile and capture
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            run(nnew - 4, plen + 3)
            torch.cuda.synchronize()
            dt = time.perf_counter() - t0
        steps = nnew - 4
        print(f"hf-compile B={b} prompt={plen} new={nnew}: {b * steps / dt:.1f} tokens/s, {dt / steps * 1e3:.3f} ms per step",
              flush=True)
        del cache


if __name__ == "__main__":
    main()
