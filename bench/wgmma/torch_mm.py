"""bench/wgmma/torch_mm.py — cuBLAS through torch.matmul (x @ w.T, bf16) on the GEMMs of the
wgmma harness's table: the 8B and 1B layers' projections at M in {1, 8, 32, 64, 128, 2048,
16384}. Same protocol as wgmma_bench.cu: W rotated over copies until they hold 200 MB (each
call reads W from HBM), CUDA events around each call, median of 40 (15 above 2 TFLOP) after 3
warm-ups. Writes CSV to argv[1] (default stdout)."""
import math
import sys

import torch

GEMMS = [("8B", "QKV", 6144, 4096), ("8B", "O", 4096, 4096), ("8B", "gate/up", 28672, 4096),
         ("8B", "down", 4096, 14336), ("1B", "QKV", 3072, 2048), ("1B", "O", 2048, 2048),
         ("1B", "gate/up", 16384, 2048), ("1B", "down", 2048, 8192)]
MS = [1, 8, 32, 64, 128, 2048, 16384]


def time_ms(fn, iters):
    for i in range(3):
        fn(i)
    torch.cuda.synchronize()
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(iters)]
    for i, (a, b) in enumerate(ev):
        a.record()
        fn(i)
        b.record()
    torch.cuda.synchronize()
    t = sorted(a.elapsed_time(b) for a, b in ev)
    return t[len(t) // 2] if len(t) % 2 else 0.5 * (t[len(t) // 2 - 1] + t[len(t) // 2])


def main():
    out = open(sys.argv[1], "w") if len(sys.argv) > 1 else sys.stdout
    out.write("model,gemm,M,N,K,torch_us,tflops,tbs\n")
    torch.manual_seed(0)
    for m in MS:
        for model, what, n, k in GEMMS:
            wbytes = 2 * n * k
            copies = 1 if wbytes >= 200e6 else min(16, math.ceil(200e6 / wbytes))
            ws = [torch.randn(n, k, device="cuda", dtype=torch.bfloat16) for _ in range(copies)]
            x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
            flop = 2.0 * m * n * k
            iters = 15 if flop > 2e12 else 40
            ms = time_ms(lambda i: torch.matmul(x, ws[i % copies].t()), iters)
            by = wbytes + 2 * m * k + 2 * m * n
            out.write(f"{model},{what},{m},{n},{k},{ms * 1e3:.2f},{flop / ms / 1e9:.1f},{by / ms / 1e9:.3f}\n")
            out.flush()
            del ws, x
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
