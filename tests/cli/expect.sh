# tests/cli/expect.sh — sourced by the CLI test scripts (needs $kiln, pass, fail).
# expect CODE PATTERN ARGS...: `kiln ARGS` exits with CODE and prints PATTERN
# (grep -E) on stdout or stderr; counts a pass or prints the failure.
expect() {
  local code=$1 pat=$2
  shift 2
  local out rc
  out=$("$kiln" "$@" 2>&1)
  rc=$?
  if [ "$rc" -eq "$code" ] && grep -Eq -- "$pat" <<<"$out"; then
    pass=$((pass + 1))
  else
    fail=$((fail + 1))
    echo "FAIL: kiln $* -> $rc (want $code), output:"
    echo "$out" | tail -20
    echo "  (wanted /$pat/)"
  fi
}
