#!/usr/bin/env python3
"""bench/device/clocks_summary.py — what common.sh's clocks_bg logged, per step of a device call.

    clocks_summary.py CLOCKS.csv [PROFILES.txt] [--bucket SECONDS]

CLOCKS.csv: the first line "clocks from t0 = YYYY/MM/DD HH:MM:SS", then nvidia-smi's samples
(timestamp, SM clock, memory clock, power, temperature, throttle reasons). Each sample is placed at
its seconds since t0. With PROFILES.txt (common.sh prof's "== BIN LABEL round R rc=N (E s)" lines:
E seconds since t0 when that profile ended), prints for each profile the median SM clock, the mean
power and the throttle reasons seen in the seconds since the line before it; without it, one line per
bucket of --bucket seconds (default 10). Each line also gives the median SM clock of the samples at
300 W or more: the window's kernels, not its compiles.
"""
import re
import statistics
import sys
from datetime import datetime

# samples at this power or more are the kernels running (a window also holds the run's compile and
# setup, near idle power)
BUSY_W = 300.0


def parse_clocks(path):
    with open(path) as f:
        lines = f.read().splitlines()
    m = re.match(r"clocks from t0 = (\S+ \S+)", lines[0]) if lines else None
    if not m:
        sys.exit(f"{path}: the first line must be 'clocks from t0 = DATE TIME'")
    t0 = datetime.strptime(m.group(1), "%Y/%m/%d %H:%M:%S")
    samples = []
    for line in lines[1:]:
        f = [x.strip() for x in line.split(",")]
        if len(f) < 6:
            continue
        try:
            t = datetime.strptime(f[0], "%Y/%m/%d %H:%M:%S.%f")
            sm = float(f[1].split()[0])
            mem = float(f[2].split()[0])
            pw = float(f[3].split()[0])
            temp = float(f[4])
        except ValueError:
            continue  # a line nvidia-smi wrote otherwise ([N/A], an error)
        samples.append(((t - t0).total_seconds(), sm, mem, pw, temp, f[5]))
    return samples


def summary(rows):
    if not rows:
        return "no samples"
    sm = [r[1] for r in rows]
    pw = [r[3] for r in rows]
    reasons = sorted({r[5] for r in rows if int(r[5], 16) != 0}) if all(r[5].startswith("0x") for r in rows) else []
    busy = [r[1] for r in rows if r[3] >= BUSY_W]
    return (f"SM {statistics.median(sm):6.0f} MHz (min {min(sm):.0f}), {statistics.mean(pw):5.0f} W, "
            f"{max(r[4] for r in rows):.0f} C, {len(rows)} samples"
            + (f"; at >= {BUSY_W:.0f} W: SM {statistics.median(busy):.0f} MHz ({len(busy)})" if busy else "")
            + (f", reasons {' '.join(reasons)}" if reasons else ""))


def main():
    args = sys.argv[1:]
    bucket = 10.0
    if "--bucket" in args:
        i = args.index("--bucket")
        bucket = float(args[i + 1])
        del args[i:i + 2]
    if not args:
        sys.exit(__doc__)
    samples = parse_clocks(args[0])
    if len(args) > 1:
        prev = 0.0
        with open(args[1]) as f:
            for line in f:
                m = re.match(r"== (\S+ \S+) round (\S+) rc=\S+ \((\d+) s\)", line)
                if not m:
                    continue
                end = float(m.group(3))
                rows = [s for s in samples if prev <= s[0] <= end]
                print(f"{m.group(1):40s} r{m.group(2)} {prev:4.0f}-{end:4.0f} s: {summary(rows)}")
                prev = end
        return
    if not samples:
        print("no samples")
        return
    t = 0.0
    while t <= samples[-1][0]:
        rows = [s for s in samples if t <= s[0] < t + bucket]
        if rows:
            print(f"{t:5.0f}-{t + bucket:5.0f} s: {summary(rows)}")
        t += bucket


if __name__ == "__main__":
    main()
