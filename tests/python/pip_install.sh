#!/usr/bin/env bash
# pip_install.sh ROOT LIB — `pip install ./python` (no network, no compiler)
# into a temporary directory, with libkiln.so copied next to the package:
# the installed package finds it there, outside the source tree.
set -eu
root=$1 lib=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp -r "$root/python" "$tmp/src"
python3 -m pip install --quiet --no-deps --no-index --target "$tmp/site" "$tmp/src"
cp "$(readlink -f "$lib")" "$tmp/site/kiln/libkiln.so.0"
cd "$tmp"
out=$(env -u KILN_LIB PYTHONPATH="$tmp/site" python3 -c 'import kiln; print(kiln.library().kiln_path, kiln.version())')
echo "$out"
case "$out" in "$tmp/site/kiln/libkiln.so.0 Kiln "*) echo ok ;; *) echo "FAIL: the library next to the package was not the one loaded"; exit 1 ;; esac
