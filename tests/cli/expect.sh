# tests/cli/expect.sh — sourced by the CLI test scripts (needs $kiln, pass, fail).
# expect CODE PATTERN ARGS...: `kiln ARGS` exits with CODE and prints PATTERN
# (grep -E) on stdout or stderr; counts a pass or prints the failure.
# KILN_EXPECT_SHARD=I/N (a script of independent cases registered N times, I = 0..N-1, so that
# ctest runs its parts side by side): only every N-th case from the I-th runs; the others are
# neither run nor counted (the script then fails when it counted no pass: expect_done).
expect_n=0
if [ -n "${KILN_EXPECT_SHARD:-}" ] && ! { [[ $KILN_EXPECT_SHARD =~ ^[0-9]+/[1-9][0-9]*$ ]] &&
  [ "${KILN_EXPECT_SHARD%/*}" -lt "${KILN_EXPECT_SHARD#*/}" ]; }; then
  echo "expect.sh: KILN_EXPECT_SHARD must be I/N with 0 <= I < N, not '$KILN_EXPECT_SHARD'" >&2
  exit 2
fi
expect() {
  local code=$1 pat=$2
  shift 2
  expect_n=$((expect_n + 1))
  if [ -n "${KILN_EXPECT_SHARD:-}" ] &&
    [ $(((expect_n - 1) % ${KILN_EXPECT_SHARD#*/})) -ne "${KILN_EXPECT_SHARD%/*}" ]; then
    return 0
  fi
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
# expect_done: the summary line; the status: 0 when nothing failed and something passed
expect_done() {
  echo "$pass passed, $fail failed"
  [ "$fail" -eq 0 ] && [ "$pass" -gt 0 ]
}
