#!/usr/bin/env bash
# consumers.sh BUILD SRC CC — installs BUILD into a temporary prefix and
# builds the README's consumer program ("Using Kiln from C / CMake / Python")
# with find_package (kiln::kiln, kiln::kiln_static) and with pkg-config
# (shared, and static through Libs.private), then runs each build.
set -u
build=$1 src=$2 cc=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok   $1"; }
bad() { fail=$((fail + 1)); echo "FAIL $1"; [ -f "$tmp/log" ] && tail -20 "$tmp/log"; }
prefix=$tmp/prefix
export KILN_CACHE_DIR=$tmp/cache

cmake --install "$build" --prefix "$prefix" >"$tmp/log" 2>&1 && ok "cmake --install" || bad "cmake --install"
libdir=$(ls -d "$prefix"/lib* | head -1)
for f in "$libdir/libkiln.so.0" "$libdir/libkiln.so" "$libdir/libkiln.a" "$prefix/include/kiln.h" "$prefix/bin/kiln" \
         "$prefix/share/man/man1/kiln.1" "$libdir/cmake/kiln/kilnConfig.cmake" \
         "$libdir/cmake/kiln/kilnConfigVersion.cmake" "$libdir/pkgconfig/kiln.pc"; do
  [ -e "$f" ] && ok "installed ${f#$prefix/}" || bad "not installed: ${f#$prefix/}"
done
"$prefix/bin/kiln" --version >"$tmp/log" 2>&1 && ok "the installed kiln runs" || bad "the installed kiln runs"
grep -q '^\.SH KILN COMPILE' "$prefix/share/man/man1/kiln.1" && grep -q -- '--emit' "$prefix/share/man/man1/kiln.1" &&
  ok "the man page has every command's options" || bad "the man page"

mkdir -p "$tmp/c"
python3 "$src/tests/install/extract.py" "$src/README.md" main.c >"$tmp/c/main.c" &&
  python3 "$src/tests/install/extract.py" "$src/README.md" CMakeLists.txt >"$tmp/c/CMakeLists.txt" ||
  bad "the README's blocks"
want='^scale: 1 kernel, kiln_scale_k0_elementwise \(elementwise.cuh\)$'
check_run() { # NAME EXE
  if "$2" >"$tmp/out" 2>"$tmp/log" && grep -Eq "$want" "$tmp/out"; then ok "$1 runs"; else bad "$1 runs: $(cat "$tmp/out")"; fi
}
# find_package, the shared library
if cmake -S "$tmp/c" -B "$tmp/b1" -G Ninja -DCMAKE_C_COMPILER="$cc" -DCMAKE_PREFIX_PATH="$prefix" >"$tmp/log" 2>&1 &&
   cmake --build "$tmp/b1" >"$tmp/log" 2>&1; then
  ok "find_package(kiln) + kiln::kiln builds"
  check_run "find_package build" "$tmp/b1/hello"
else bad "find_package(kiln) + kiln::kiln builds"; fi
# find_package, the static library
sed 's/kiln::kiln)/kiln::kiln_static)/' "$tmp/c/CMakeLists.txt" >"$tmp/c/CMakeLists.static" &&
  mkdir -p "$tmp/cs" && cp "$tmp/c/main.c" "$tmp/cs/" && mv "$tmp/c/CMakeLists.static" "$tmp/cs/CMakeLists.txt"
if cmake -S "$tmp/cs" -B "$tmp/b2" -G Ninja -DCMAKE_C_COMPILER="$cc" -DCMAKE_PREFIX_PATH="$prefix" \
     -DCUDAToolkit_ROOT="${CUDAToolkit_ROOT:-/usr/local/cuda}" >"$tmp/log" 2>&1 && cmake --build "$tmp/b2" >"$tmp/log" 2>&1; then
  ok "find_package(kiln) + kiln::kiln_static builds"
  if ldd "$tmp/b2/hello" | grep -q libkiln; then bad "the static build needs libkiln.so"; else ok "the static build needs no libkiln.so"; fi
  check_run "static build" "$tmp/b2/hello"
else bad "find_package(kiln) + kiln::kiln_static builds"; fi
# pkg-config: the README's line, then static with Libs.private
export PKG_CONFIG_PATH=$libdir/pkgconfig
line=$(python3 "$src/tests/install/extract.py" "$src/README.md" pkg-config)
if (cd "$tmp/c" && CC=$cc eval "${line/#cc /\$CC }") >"$tmp/log" 2>&1; then
  ok "pkg-config build: $line"
  LD_LIBRARY_PATH=$libdir check_run "pkg-config build" "$tmp/c/hello"
else bad "pkg-config build: $line"; fi
if "$cc" "$tmp/c/main.c" $(pkg-config --cflags kiln) -o "$tmp/c/hello_static" -L"$libdir" -Wl,-Bstatic -lkiln -Wl,-Bdynamic \
     $(pkg-config --static --libs kiln | sed 's/ -lkiln / /') >"$tmp/log" 2>&1; then
  ok "pkg-config --static build"
  check_run "pkg-config --static build" "$tmp/c/hello_static"
else bad "pkg-config --static build"; fi
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
