"""bench/attn/decode_table.py KILN_LOG SDPA_DECODE_JSONL [CEILINGS] — the decode attention table
(markdown) from tests/gpu/test_gpu_attention's "bench decode" lines (KILN_BENCH=1: the kernel's time
per launch inside a CUDA graph) and sdpa_decode.py's output: per row Kiln's µs and TB/s, SDPA's best
backend, and both as % of the floor (the KV bytes read / the read bandwidth: `kiln ceilings`' output
in CEILINGS when given, the measure Kiln's profiler uses, else sdpa_decode.py's, both from the same
run). The other Kiln rows (other head dims, a window, form (a)) follow."""
import json
import re
import sys

pat = re.compile(r"bench decode B=(\d+) T=(\d+) H=(\d+) KV=(\d+) hd=(\d+) window=(\d+) form=(\w) splits=(\d+): "
                 r"([\d.]+) us graph, ([\d.]+) us single, ([\d.]+) MB")
kiln = []
for line in open(sys.argv[1]):
    m = pat.search(line)
    if m:
        B, T, H, KV, hd, win = map(int, m.groups()[:6])
        kiln.append(dict(B=B, T=T, H=H, KV=KV, hd=hd, window=win, form=m.group(7), splits=int(m.group(8)),
                         us=float(m.group(9)), single=float(m.group(10)), mb=float(m.group(11))))
bw = None
sd = {}
for line in open(sys.argv[2]):
    o = json.loads(line)
    if "ceiling_tbps" in o:
        bw = o["ceiling_tbps"]
    elif "us" in o:
        sd.setdefault((o["B"], o["T"]), []).append(o)
src = "torch, a 2 GiB sum"
if len(sys.argv) > 3:
    for line in open(sys.argv[3]):
        m = re.match(r"read bandwidth: ([\d.]+) TB/s", line)
        if m:
            bw, src = float(m.group(1)), "kiln ceilings, a 2 GiB streaming read"
print(f"read bandwidth ({src}): {bw:.2f} TB/s\n" if bw else "read bandwidth: not measured\n")
print("| B | cache | heads q/kv x hd | Kiln us | Kiln TB/s | Kiln % floor | SDPA best | SDPA us | SDPA TB/s | SDPA % floor | SDPA / Kiln |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
rest = []
for r in kiln:
    tb = r["mb"] * 1e6 / (r["us"] * 1e-6) / 1e12
    pct = 100 * tb / bw if bw else float("nan")
    main = (r["H"], r["KV"], r["hd"], r["window"], r["form"]) == (32, 8, 128, 0, "b") and \
        r["B"] in (1, 8, 32) and r["T"] in (1024, 8192, 32768)
    if not main:
        rest.append((r, tb, pct))
        continue
    rows = sd.get((r["B"], r["T"]), [])
    best = min(rows, key=lambda o: o["us"]) if rows else None
    if best:
        bname = best["backend"] + ("" if best["gqa"] else " (K/V expanded)")
        stb = r["mb"] * 1e6 / (best["us"] * 1e-6) / 1e12
        spct = 100 * stb / bw if bw else float("nan")
        print(f"| {r['B']} | {r['T']} | 32/8 x 128 | {r['us']:.2f} | {tb:.2f} | {pct:.0f}% | {bname} | {best['us']:.2f} "
              f"| {stb:.2f} | {spct:.0f}% | {best['us'] / r['us']:.2f} |")
    else:
        print(f"| {r['B']} | {r['T']} | 32/8 x 128 | {r['us']:.2f} | {tb:.2f} | {pct:.0f}% | none ran | | | | |")
print("\nOther Kiln rows (graph per launch; form a: RoPE and the cache write fused, b: a pure read):\n")
print("| B | cache | heads q/kv x hd | window | form | splits | us | single-launch us | TB/s | % floor |")
print("|---|---|---|---|---|---|---|---|---|---|")
for r, tb, pct in rest:
    print(f"| {r['B']} | {r['T']} | {r['H']}/{r['KV']} x {r['hd']} | {r['window'] or '-'} | {r['form']} | {r['splits']} "
          f"| {r['us']:.2f} | {r['single']:.2f} | {tb:.2f} | {pct:.0f}% |")
