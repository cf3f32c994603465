#!/usr/bin/env python3
"""bench/bench.py declares include/kiln.h's structs for ctypes by hand: a field
missing there makes the library write past the Python buffer (a crash far
from its cause). Checks that each struct bench.py mirrors has kiln.h's fields,
in order. Usage: bench_abi.py ROOT"""
import re
import sys

root = sys.argv[1]
header = open(root + "/include/kiln.h").read()
bench = open(root + "/bench/bench.py").read()


def c_fields(name):
    m = re.search(r"typedef struct %s \{(.*?)\} %s;" % (name, name), header, re.S)
    body = re.sub(r"/\*.*?\*/", "", m.group(1), flags=re.S)
    return [re.findall(r"(\w+)\s*(?:\[[^\]]*\])?\s*;", d)[0] for d in body.split(";") if d.strip() for d in [d + ";"]]


want = c_fields("kiln_counters")
got = re.search(r"COUNTER_FIELDS = \[(.*?)\]", bench, re.S).group(1)
got = re.findall(r'"(\w+)"', got)
if got != want:
    print("bench.py's COUNTER_FIELDS %s differ from kiln.h's kiln_counters %s" % (got, want))
    sys.exit(1)
print("kiln_counters: %d fields agree" % len(want))
