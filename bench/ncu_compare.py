#!/usr/bin/env python3
"""Kiln's profile against Nsight Compute, kernel by kernel.

    ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum \\
        --print-units base --csv -k regex:kiln_ ... build/kiln run ... --bench 20 > ncu.csv
    build/kiln run ... --profile --profile-json=profile.json
    python3 bench/ncu_compare.py profile.json ncu.csv

Prints, per kernel of the profile, Kiln's median (timed inside the graph
replay by CUPTI) beside ncu's median gpu__time_duration.sum, and marks a
kernel whose two times differ by more than max(10%, 0.5 us) (issue 8's
agreement). When the CSV also holds sm__cycles_elapsed.max and
sm__cycles_active.max (profile_check.sh asks for them), a third column gives
ncu's duration less ncu's own estimate of the launch overhead it contains,
duration * (elapsed.max - active.max) / elapsed.max: the cycles from the
performance monitor's start trigger to the first SM's first active cycle and
from the last warp to the stop trigger (NVIDIA's estimate for ncu's start
and end timestamps, which are written by commands around the grid launch,
where CUPTI's kernel records start and end with the grid's execution), with
its own verdict. The exit status is the first verdict's. Kernels of identical layers share one program and its name, so
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
    """[(kernel name, duration in us, duration less launch overhead in us or None)] in launch order."""
    launches = {}
    with open(path, newline="") as f:
        lines = [l for l in f if l.startswith('"')]  # ncu prints its own ==PROF== lines too
    for row in csv.DictReader(lines):
        metric = row.get("Metric Name")
        if metric not in ("gpu__time_duration.sum", "sm__cycles_elapsed.max", "sm__cycles_active.max"):
            continue
        v = float(row["Metric Value"].replace(",", ""))
        if metric == "gpu__time_duration.sum":
            unit = UNITS.get(row.get("Metric Unit", "nsecond").strip(), None)
            if unit is None:
                raise SystemExit("ncu_compare: unknown unit %r" % row.get("Metric Unit"))
            v *= unit
        key = int(row.get("ID", len(launches)))
        entry = launches.setdefault(key, {"name": row["Kernel Name"].split("(")[0].strip()})
        entry[metric] = v
    out = []
    for key in sorted(launches):
        e = launches[key]
        if "gpu__time_duration.sum" not in e:
            continue
        dur, el, act = e["gpu__time_duration.sum"], e.get("sm__cycles_elapsed.max"), e.get("sm__cycles_active.max")
        active = dur * act / el if el and act is not None and 0 <= act <= el else None
        out.append((e["name"], dur, active))
    return out


def agree(a, b):
    return abs(a - b) <= max(0.10 * b, 0.5)


def compare(profile, ncu):
    """Rows (name, Kiln, ncu, ncu less its launch overhead or None, n, verdict, verdict on the third)."""
    rows, bad, missing = [], 0, 0
    launched = sorted((k for k in profile["kernels"] if k.get("group", 0) >= 0), key=lambda k: k["group"])
    nk = len(launched)
    times = [[] for _ in launched]
    actives = [[] for _ in launched]
    for i, (name, v, act) in enumerate(ncu):
        if nk == 0 or launched[i % nk]["name"] != name:
            print("ncu_compare: ncu row %d is %s, not the kernel at that place of the replay" % (i, name))
            return [], 0, 1
        times[i % nk].append(v)
        if act is not None:
            actives[i % nk].append(act)
    for k, t, a in zip(launched, times, actives):
        name, kiln = k["name"], k["median_us"]
        if not t:
            rows.append((name, kiln, None, None, None, "no ncu samples", ""))
            missing += 1
            continue
        med = statistics.median(t)
        ok = agree(kiln, med)
        bad += not ok
        amed = statistics.median(a) if len(a) == len(t) else None
        averdict = "" if amed is None else "ok" if agree(kiln, amed) else "DIFFERS"
        rows.append((name, kiln, med, amed, len(t), "ok" if ok else "DIFFERS", averdict))
    return rows, bad, missing


def main(argv):
    if len(argv) != 3:
        print(__doc__)
        return 64
    with open(argv[1]) as f:
        profile = json.load(f)
    rows, bad, missing = compare(profile, ncu_times(argv[2]))
    print("%-40s %10s %10s %6s  %-16s %18s  %s" % ("kernel", "Kiln (us)", "ncu (us)", "n", "max(10%, 0.5 us)",
                                                 "ncu - launch (us)", "max(10%, 0.5 us)"))
    for name, kiln, med, amed, n, verdict, averdict in rows:
        print("%-40s %10.2f %10s %6s  %-16s %18s  %s" % (name, kiln, "%.2f" % med if med is not None else "-", n or "-",
                                                       verdict, "%.2f" % amed if amed is not None else "-", averdict))
    return 2 if missing else 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
