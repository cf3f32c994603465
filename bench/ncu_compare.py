#!/usr/bin/env python3
"""Kiln's profile against Nsight Compute, kernel by kernel.

    ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum \\
        --print-units base --csv -k regex:kiln_ ... build/kiln run ... --bench 20 > ncu.csv
    build/kiln run ... --profile --profile-json=profile.json
    python3 bench/ncu_compare.py profile.json ncu.csv

Prints, per kernel of the profile, Kiln's median (timed inside the graph
replay by CUPTI) beside ncu's median gpu__time_duration.sum, and marks a
kernel whose two times differ by more than max(10%, 0.5 us) (issue 8's
agreement). Kernels of identical layers share one program and its name, so
ncu's rows are matched by their place in the replay (ncu lists launches in
order; the profile's kernels in launch order are its groups in order), and
each row's name is checked against that place. Exits 1 when a kernel
differs, 2 when a kernel has no ncu samples or the rows do not line up."""
import csv
import json
import statistics
import sys

UNITS = {"nsecond": 1e-3, "ns": 1e-3, "usecond": 1.0, "us": 1.0, "msecond": 1e3, "ms": 1e3, "second": 1e6, "s": 1e6}


def ncu_times(path):
    """[(kernel name, duration in us)] in launch order."""
    out = []
    with open(path, newline="") as f:
        lines = [l for l in f if l.startswith('"')]  # ncu prints its own ==PROF== lines too
    for row in csv.DictReader(lines):
        if row.get("Metric Name") != "gpu__time_duration.sum":
            continue
        unit = UNITS.get(row.get("Metric Unit", "nsecond").strip(), None)
        if unit is None:
            raise SystemExit("ncu_compare: unknown unit %r" % row.get("Metric Unit"))
        v = float(row["Metric Value"].replace(",", "")) * unit
        name = row["Kernel Name"].split("(")[0].strip()
        out.append((name, v))
    return out


def compare(profile, ncu):
    rows, bad, missing = [], 0, 0
    launched = sorted((k for k in profile["kernels"] if k.get("group", 0) >= 0), key=lambda k: k["group"])
    nk = len(launched)
    times = [[] for _ in launched]
    for i, (name, v) in enumerate(ncu):
        if nk == 0 or launched[i % nk]["name"] != name:
            print("ncu_compare: ncu row %d is %s, not the kernel at that place of the replay" % (i, name))
            return [], 0, 1
        times[i % nk].append(v)
    for k, t in zip(launched, times):
        name, kiln = k["name"], k["median_us"]
        if not t:
            rows.append((name, kiln, None, None, "no ncu samples"))
            missing += 1
            continue
        med = statistics.median(t)
        ok = abs(kiln - med) <= max(0.10 * med, 0.5)
        bad += not ok
        rows.append((name, kiln, med, len(t), "ok" if ok else "DIFFERS"))
    return rows, bad, missing


def main(argv):
    if len(argv) != 3:
        print(__doc__)
        return 64
    with open(argv[1]) as f:
        profile = json.load(f)
    rows, bad, missing = compare(profile, ncu_times(argv[2]))
    print("%-40s %12s %12s %6s  %s" % ("kernel", "Kiln (us)", "ncu (us)", "n", "max(10%, 0.5 us)"))
    for name, kiln, med, n, verdict in rows:
        print("%-40s %12.2f %12s %6s  %s" % (name, kiln, "%.2f" % med if med is not None else "-", n or "-", verdict))
    return 2 if missing else 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
