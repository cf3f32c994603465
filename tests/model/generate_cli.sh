#!/usr/bin/env bash
# generate_cli.sh KILN — `kiln generate`'s usage errors and exit codes (no GPU
# needed: a valid command line ends in 69, no device, or runs on one).
set -u
kiln=$1
pass=0 fail=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/../cli/expect.sh"

m=samples/models/llama3_2_1b.kiln
expect 0 'usage: kiln generate MODEL.kiln --weights DIR' generate --help
expect 64 'kiln generate: no model file' generate
expect 64 'kiln generate: --weights is required' generate $m --prompt-ids 1,2
expect 64 'give one of --prompt-ids and --batch-file' generate $m --weights "$tmp"
expect 64 'give one of --prompt-ids and --batch-file' generate $m --weights "$tmp" --prompt-ids 1 --batch-file x
expect 64 "--prompt-ids expects token ids, got '1,x'" generate $m --weights "$tmp" --prompt-ids 1,x
expect 64 "--top-p expects a number in \[0, 1\], got '1.5'" generate $m --weights "$tmp" --prompt-ids 1 --top-p 1.5
expect 64 "--max-new expects a positive integer, got '0'" generate $m --weights "$tmp" --prompt-ids 1 --max-new 0
expect 64 "--temperature expects a number >= 0, got '-1'" generate $m --weights "$tmp" --prompt-ids 1 --temperature -1
expect 64 "--seed expects an unsigned integer" generate $m --weights "$tmp" --prompt-ids 1 --seed x
expect 64 "unknown option '--bogus'" generate $m --weights "$tmp" --prompt-ids 1 --bogus
expect 64 "--stop needs a value" generate $m --weights "$tmp" --prompt-ids 1 --stop
expect 64 "more than one model file" generate $m $m --weights "$tmp" --prompt-ids 1
expect 66 "nope.txt: No such file" generate $m --weights "$tmp" --batch-file "$tmp/nope.txt"
printf '1,2,3\n# a comment\n\n4 5\n7,x\n' >"$tmp/bad.txt"
expect 64 "bad.txt:5: not a list of token ids" generate $m --weights "$tmp" --batch-file "$tmp/bad.txt"
printf '# only a comment\n\n' >"$tmp/empty.txt"
expect 64 "empty.txt: no prompts" generate $m --weights "$tmp" --batch-file "$tmp/empty.txt"
printf '1,2,3\n4 5\n' >"$tmp/ok.txt"
if ! nvidia-smi >/dev/null 2>&1; then
  # no device: everything parsed, the context cannot start
  expect 69 'no CUDA device' generate $m --weights "$tmp" --batch-file "$tmp/ok.txt"
fi
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
