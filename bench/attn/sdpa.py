"""bench/attn/sdpa.py — PyTorch's scaled_dot_product_attention on the rows of the attention
table (bench/attn/run.sh), each backend tried (flash, cuDNN, efficient), plus the bf16 matmul
ceiling (cuBLAS 8192^3 sustained >= 100 ms). CUDA events, median of 20 calls after warm-up,
3 input sets in rotation. Writes one JSON object per line to stdout."""
import json
import sys

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
import torch.nn.functional as F

ROWS = [  # label, B, S, H, KV, HD, causal
    ("table", 1, 512, 32, 8, 128, True),
    ("table", 1, 2048, 32, 8, 128, True),
    ("table", 1, 4096, 32, 8, 128, True),
    ("table", 1, 8192, 32, 8, 128, True),
    ("table", 4, 4096, 32, 8, 128, True),
    ("table-hd96", 4, 4096, 42, 6, 96, True),
    ("table-hd256", 4, 4096, 16, 4, 256, True),
    ("table-noncausal", 1, 4096, 32, 8, 128, False),
]
BACKENDS = [("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION),
            ("efficient", SDPBackend.EFFICIENT_ATTENTION)]


def timed(fn, reps=20):
    fn()
    torch.cuda.synchronize()
    ts = []
    for i in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn(i)
        b.record()
        b.synchronize()
        ts.append(a.elapsed_time(b))
    ts.sort()
    return ts[len(ts) // 2], ts[len(ts) // 10], ts[(len(ts) * 9) // 10]


def ceiling():
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    for _ in range(3):
        a @ b
    torch.cuda.synchronize()
    n = 100
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(n):
        a @ b
    e.record()
    e.synchronize()
    ms = s.elapsed_time(e) / n
    return 2 * 8192 ** 3 / (ms * 1e-3) / 1e12, ms * n


def main():
    torch.manual_seed(0)
    tf, total_ms = ceiling()
    print(json.dumps({"ceiling_tflops": tf, "ceiling_ms": total_ms}), flush=True)
    for label, B, S, H, KV, HD, causal in ROWS:
        sets = []
        for _ in range(3):
            q = torch.randn(B, H, S, HD, device="cuda", dtype=torch.bfloat16)
            k = torch.randn(B, KV, S, HD, device="cuda", dtype=torch.bfloat16)
            v = torch.randn(B, KV, S, HD, device="cuda", dtype=torch.bfloat16)
            sets.append((q, k, v))
        pairs = S * (S + 1) / 2 if causal else S * S
        flops = 4.0 * HD * pairs * H * B
        for name, be in BACKENDS:
            res = {"label": label, "B": B, "S": S, "H": H, "KV": KV, "HD": HD, "causal": causal, "backend": name}
            for gqa in (True, False):
                try:
                    with sdpa_kernel([be]):
                        if gqa:
                            def fn(i=0):
                                q, k, v = sets[i % 3]
                                return F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)
                        else:  # K/V expanded to the query heads (outside the timing)
                            ex = [(q, k.repeat_interleave(H // KV, 1), v.repeat_interleave(H // KV, 1)) for q, k, v in sets]

                            def fn(i=0):
                                q, k, v = ex[i % 3]
                                return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                        med, p10, p90 = timed(fn)
                    res.update({"gqa": gqa, "ms": med, "p10": p10, "p90": p90, "tflops": flops / (med * 1e-3) / 1e12})
                    break
                except Exception as ex_:  # backend does not take this shape
                    res.update({"error": str(ex_).splitlines()[0][:160] if str(ex_) else type(ex_).__name__})
            print(json.dumps(res), flush=True)
        del sets
        torch.cuda.empty_cache()


if __name__ == "__main__":
    sys.exit(main())
