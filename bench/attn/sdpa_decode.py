"""bench/attn/sdpa_decode.py — PyTorch's scaled_dot_product_attention on the rows of the decode
table (bench/attn/run.sh): one query row per sequence over a cache of T keys, 32 query and 8 KV
heads of 128, each backend tried (flash, cuDNN, efficient, math; with enable_gqa, else K/V
expanded), plus the read-bandwidth ceiling (a streaming read of 2 GiB, 20 calls). CUDA events,
median of 30 calls after warm-up (sdpa.timed), input sets rotated so that the caches are not all in L2.
Writes one JSON object per line to stdout."""
import json

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
import torch.nn.functional as F

from sdpa import timed  # bench/attn/sdpa.py: CUDA events, median, p10, p90

ROWS = [(b, t) for b in (1, 8, 32) for t in (1024, 8192, 32768)]  # B, T; H 32, KV 8, HD 128
H, KV, HD = 32, 8, 128
BACKENDS = [("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION),
            ("efficient", SDPBackend.EFFICIENT_ATTENTION), ("math", SDPBackend.MATH)]


def bandwidth():
    x = torch.empty(2 << 30, dtype=torch.uint8, device="cuda").view(torch.float32)
    x.uniform_()
    med, _, _ = timed(lambda i=0: x.sum(), 20)
    return x.numel() * 4 / (med * 1e-3) / 1e12


def main():
    torch.manual_seed(0)
    print(json.dumps({"ceiling_tbps": bandwidth()}), flush=True)
    for B, T in ROWS:
        kv_bytes = 2 * B * KV * T * HD * 2
        nsets = max(1, min(8, (180 << 20) // kv_bytes + 1))
        sets = []
        for _ in range(nsets):
            q = torch.randn(B, H, 1, HD, device="cuda", dtype=torch.bfloat16)
            k = torch.randn(B, KV, T, HD, device="cuda", dtype=torch.bfloat16)
            v = torch.randn(B, KV, T, HD, device="cuda", dtype=torch.bfloat16)
            sets.append((q, k, v))
        for name, be in BACKENDS:
            for gqa in (True, False):
                row = {"B": B, "T": T, "H": H, "KV": KV, "HD": HD, "backend": name, "gqa": gqa}
                try:
                    if gqa:
                        fn = lambda i=0: F.scaled_dot_product_attention(*sets[i % nsets], enable_gqa=True)
                    else:  # expanded once, outside the timing: the read is still of the KV bytes per head
                        ex = [(q, k.repeat_interleave(H // KV, 1), v.repeat_interleave(H // KV, 1)) for q, k, v in sets]
                        fn = lambda i=0: F.scaled_dot_product_attention(*ex[i % nsets])
                    with sdpa_kernel([be]):
                        med, p10, p90 = timed(fn, 30)
                    row.update(us=med * 1e3, p10_us=p10 * 1e3, p90_us=p90 * 1e3,
                               tbps=kv_bytes / (med * 1e-3) / 1e12)
                except Exception as e:  # a backend that refuses the shape
                    row["error"] = str(e).split("\n")[0][:200]
                print(json.dumps(row), flush=True)
                if not gqa:
                    del ex
        del sets
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
