#!/usr/bin/env bash
# bench/device/call_rows.sh — a few bench/run.sh rows in one short device call over the slim build
# (carry build-gpu): CASES (1b-decode,8b-prefill-2k,8b-prefill-b4-4k), VARIANTS (kiln,graph), LIMIT
# (170 s). The table on stdout and in $OUT/bench.log.
DEFAULT_LIMIT=170
. "$(dirname "$0")/common.sh"
bench_rows "${CASES:-1b-decode,8b-prefill-2k,8b-prefill-b4-4k}" "${VARIANTS:-kiln,graph}"
