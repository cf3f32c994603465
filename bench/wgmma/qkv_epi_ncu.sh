#!/usr/bin/env bash
# bench/wgmma/qkv_epi_ncu.sh — where the 8B QKV projection's RoPE + cache epilogue costs its time
# at M = 2048 on the cooperative 128x256 tile (20% over the plain product in docs/MATMUL.md's
# sweep): ncu (full set, clocks not locked) on one launch of each of the cooperative candidate
# with the epilogue (QKV+rope) and without it (QKV), through bench/wgmma/kiln_sweep's
# KILN_SWEEP_ONLY. Candidate indices as `KILN_SWEEP_DRY=1 KILN_SWEEP_SHAPES=... kiln_sweep` lists
# them (QKV_ROPE_COOP, QKV_COOP). Writes $OUT/ncu_<name>.txt (details page and the SASS lines
# with the most stall samples) and the reports.
set -u
OUT=${OUT:-/tmp/out}
BIN=${BIN:-build-gpu/bench/kiln_sweep}
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
mkdir -p "$OUT"
one() { # NAME SHAPE INDEX
  local rep=/tmp/ncu_$1
  KILN_SWEEP_SHAPES=$2 KILN_SWEEP_M=2048 KILN_SWEEP_ONLY=$3 timeout 150 "$NCU" --clock-control none \
    -k regex:kiln_mm --launch-skip 2 --launch-count 1 --set full --import-source yes -f -o "$rep" "$BIN" > "/tmp/ncu_$1.log" 2>&1
  echo "ncu $1 rc=$?"
  { grep -E "TFLOP|x[0-9]\.[0-9]{3}" "/tmp/ncu_$1.log" | head -5
    "$NCU" --import "$rep.ncu-rep" --page details
    echo "== SASS, most stall samples first"
    "$NCU" --import "$rep.ncu-rep" --page source --print-source sass --csv 2>/dev/null | python3 -c '
import csv, sys
rows = list(csv.reader(sys.stdin))
if not rows: sys.exit()
h = rows[0]
def col(name):
    for i, c in enumerate(h):
        if c.startswith(name): return i
    return None
s, src, a = col("Warp Stall Sampling (All"), col("Source"), col("Address")
print("columns:", h[:12])
if s is None: sys.exit()
body = [r for r in rows[1:] if len(r) > s and r[s].replace(".", "").isdigit()]
tot = sum(float(r[s]) for r in body) or 1
for r in sorted(body, key=lambda r: -float(r[s]))[:60]:
    print("%6.2f%%  %s  %s" % (100 * float(r[s]) / tot, r[a] if a is not None else "", r[src] if src is not None else ""))
'
  } > "$OUT/ncu_$1.txt" 2>&1
}
one qkv_rope_coop QKV+rope "${QKV_ROPE_COOP:-2}"
one qkv_coop QKV "${QKV_COOP:-0}"
one qkv_rope_pp QKV+rope 0
