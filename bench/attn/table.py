"""bench/attn/table.py KILN_LOG SDPA_JSONL — the attention table (markdown) from the GPU test's
"bench attn" lines and sdpa.py's output: per row Kiln's TFLOP/s (the template's defaults),
SDPA's best backend, and both as % of the floor (FLOPs / the bf16 matmul ceiling measured in
the same run); then, when the log has them (KILN_BENCH=2), the sweep of the template's knobs:
per shape every variant's TFLOP/s, its ratio to variant "base" (the kernel before the change,
timed interleaved in the same process) and to SDPA's best."""
import json
import re
import sys

kiln = {}
sweep = {}
pat = re.compile(r"bench attn (\S+) B=(\d+) S=(\d+) H=(\d+) KV=(\d+) hd=(\d+) bk=(\d+) st=(\d+) causal=(\d): "
                 r"([\d.]+) us \(p10 ([\d.]+) p90 ([\d.]+)\), ([\d.]+) TFLOP/s")
for line in open(sys.argv[1]):
    m = pat.search(line)
    if not m:
        continue
    lab, B, S, H, KV, hd, bk, st, ca = m.group(1), *map(int, m.groups()[1:9])
    us, tf = float(m.group(10)), float(m.group(13))
    if "/" in lab:  # sweep-<row>/<variant>
        row, var = lab.split("/", 1)
        sweep.setdefault((row[len("sweep-"):], B, S, hd, ca), []).append((var, bk, st, us, tf, float(m.group(11)),
                                                                          float(m.group(12))))
    else:
        kiln[(lab, B, S, hd)] = (us, tf, bk, st)
ceil = None
sd = {}
for line in open(sys.argv[2]):
    o = json.loads(line)
    if "ceiling_tflops" in o:
        ceil = o["ceiling_tflops"]
        continue
    key = (o["label"], o["B"], o["S"], o["HD"])
    sd.setdefault(key, []).append(o)


def best_of(key):
    rows = [o for o in sd.get(key, []) if "tflops" in o]
    return max(rows, key=lambda o: o["tflops"]) if rows else None


print(f"bf16 matmul ceiling (cuBLAS 8192^3, 100 calls): {ceil:.1f} TFLOP/s\n")
print("| row | B | S | heads q/kv | hd | Kiln us | Kiln TFLOP/s | Kiln % floor | SDPA best | SDPA TFLOP/s | SDPA % floor | Kiln / SDPA |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|")
for key, (us, tf, bk, st) in kiln.items():
    best = best_of(key)
    lab, B, S, hd = key
    heads = f"{best['H']}/{best['KV']}" if best else "?"
    bs = f"{best['backend']}{'' if best['gqa'] else ' (K/V expanded)'}" if best else "none ran"
    btf = best["tflops"] if best else float("nan")
    print(f"| {lab} | {B} | {S} | {heads} | {hd} | {us:.1f} | {tf:.1f} | {100 * tf / ceil:.0f}% | {bs} | {btf:.1f} | "
          f"{100 * btf / ceil:.0f}% | {tf / btf:.2f} |")
print("\nSDPA backends (TFLOP/s; - = refused):\n")
for key, rows in sd.items():
    print(f"- {key[0]} B={key[1]} S={key[2]} hd={key[3]}: " +
          ", ".join(f"{o['backend']} {o['tflops']:.1f}{'' if o.get('gqa', True) else ' (expanded)'}" if "tflops" in o
                    else f"{o['backend']} - ({o.get('error', '')[:60]})" for o in rows))
for (row, B, S, hd, ca), rows in sweep.items():
    base = next((r[4] for r in rows if r[0] == "base"), None)
    best = best_of((row, B, S, hd))
    btf = best["tflops"] if best else None
    print(f"\nSweep {row} B={B} S={S} hd={hd} {'causal' if ca else 'not causal'} "
          f"(SDPA best {btf:.1f} TFLOP/s, {best['backend']})\n" if best else
          f"\nSweep {row} B={B} S={S} hd={hd} {'causal' if ca else 'not causal'}\n")
    print("| variant | BK | stages | us (p10-p90) | TFLOP/s | / base | / SDPA |")
    print("|---|---|---|---|---|---|---|")
    for var, bk, st, us, tf, p10, p90 in sorted(rows, key=lambda r: -r[4]):
        rb = f"{tf / base:.3f}" if base else "-"
        rs = f"{tf / btf:.2f}" if btf else "-"
        print(f"| {var} | {bk} | {st} | {us:.1f} ({p10:.1f}-{p90:.1f}) | {tf:.1f} | {rb} | {rs} |")
