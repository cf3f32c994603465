#!/usr/bin/env python3
"""The kiln package's ctypes structs (python/kiln/_capi.py) against include/kiln.h
and dlpack/dlpack.h as a C compiler lays them out: a field missing or out of
order in Python makes the library write past a Python buffer, a crash far from
its cause. Usage: test_abi.py ROOT CC"""
import ctypes
import os
import subprocess
import sys
import tempfile

root, cc = sys.argv[1], sys.argv[2]
sys.path.insert(0, os.path.join(root, "python"))
from kiln import _capi as C  # noqa: E402

structs = C.STRUCTS + [C.DLTensor, C.DLManagedTensor, C.DLDevice, C.DLDataType]
lines = ['#include <stddef.h>', '#include <stdio.h>', '#include <dlpack/dlpack.h>', '#include "kiln.h"',
         'int main(void) {']
for s in structs:
    t = s.__name__ if s.__name__.startswith("DL") else s.__name__
    lines.append('  printf("%s %%zu\\n", sizeof(%s));' % (s.__name__, t))
    for f, _ in s._fields_:
        lines.append('  printf("%s.%s %%zu\\n", offsetof(%s, %s));' % (s.__name__, f, t, f))
lines.append("  return 0;\n}\n")
d = tempfile.mkdtemp()
src, exe = os.path.join(d, "abi.c"), os.path.join(d, "abi")
open(src, "w").write("\n".join(lines))
r = subprocess.run([cc, "-std=c11", "-I", os.path.join(root, "include"), src, "-o", exe], capture_output=True, text=True)
if r.returncode != 0:
    print(r.stderr)
    print("FAIL: a field the package declares is not in the header (the compiler's message above)")
    sys.exit(1)
want = dict(line.split() for line in subprocess.run([exe], capture_output=True, text=True, check=True).stdout.split("\n") if line)
bad = 0
for s in structs:
    got = {s.__name__: ctypes.sizeof(s)}
    got.update({"%s.%s" % (s.__name__, f): getattr(s, f).offset for f, _ in s._fields_})
    for k, v in got.items():
        if int(want[k]) != v:
            bad += 1
            print("FAIL %s: C says %s, ctypes %d" % (k, want[k], v))
print("%d structs, %d fields compared, %d differ" % (len(structs), sum(len(s._fields_) for s in structs), bad))
sys.exit(1 if bad else 0)
