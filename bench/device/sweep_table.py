#!/usr/bin/env python3
"""bench/device/sweep_table.py — test_gpu_matmul's sweep CSVs (KILN_BENCH_CSV, one per round) as one
table: a line per (shape, M, configuration) with each round's median µs.

    sweep_table.py [--probe] ROUND.csv...

--probe: the probe shapes (N = 128 x tiles): the best round's µs, TB/s and GB/s per 128-column block
(what one SM streams when each SM takes one block).
"""
import collections
import csv
import sys


def main(argv):
    probe = '--probe' in argv
    files = [a for a in argv if a != '--probe']
    t = collections.defaultdict(list)
    mb = {}
    for f in files:
        for r in csv.DictReader(open(f)):
            k = (r['shape'], int(r['M']), r['config'])
            t[k].append(float(r['us_median']))
            mb[k] = float(r['weight_MB'])
    for k in sorted(t):
        if probe:
            us, n = min(t[k]), int(k[0].split('.n')[-1]) if '.n' in k[0] else 0
            per = ' %6.1f GB/s per block' % (mb[k] / n / us * 1e3) if n else ''
            print('%-11s M=%-3d %-52s %8.1f us %5.2f TB/s%s' % (k[0], k[1], k[2], us, mb[k] / us, per))
        else:
            print('%-12s M=%-3d %-56s %s' % (k[0], k[1], k[2], ' '.join('%.2f' % v for v in t[k])))


if __name__ == '__main__':
    main(sys.argv[1:])
