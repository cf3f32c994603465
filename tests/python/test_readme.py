#!/usr/bin/env python3
"""The README's Python snippet ("Using Kiln from C / CMake / Python"), run as
written (PYTHONPATH=python, KILN_LIB set by ctest). Usage: test_readme.py ROOT"""
import os
import subprocess
import sys
import tempfile

root = sys.argv[1]
code = subprocess.run([sys.executable, os.path.join(root, "tests/install/extract.py"), os.path.join(root, "README.md"),
                       "python"], capture_output=True, text=True, check=True).stdout
env = dict(os.environ, PYTHONPATH=os.path.join(root, "python"), KILN_CACHE_DIR=tempfile.mkdtemp())
r = subprocess.run([sys.executable, "-c", code], cwd=root, env=env, capture_output=True, text=True)
print(r.stdout, r.stderr)
ok = r.returncode == 0 and "matmul_wgmma.cuh" in r.stdout and "refused: ['residual-norm']" in r.stdout
print("ok" if ok else "FAIL: the README's Python snippet")
sys.exit(0 if ok else 1)
