#!/usr/bin/env bash
# log.sh KILN: $KILN_LOG sets the level of kiln's messages in a fresh process. The message
# is a real warning: a corrupt disk-cache entry, replaced. Default (warn): one line on
# stderr; KILN_LOG=error: none; an unknown word: said once, and warn stays in force.
set -u
kiln=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
export KILN_CACHE_DIR=$dir
fail() { echo "FAIL: $*"; exit 1; }
run() { "$kiln" run add --backend=cpu --shape 8x8 2> "$dir/stderr" > "$dir/stdout" || fail "the run failed: $(cat "$dir/stdout" "$dir/stderr")"; }
corrupt() { for e in $(find "$dir" -name '*.kiln'); do echo "not a cache entry" > "$e"; done; }

unset KILN_LOG
run # the entry
corrupt; run
grep -q "^kiln: warning: cache: .*recompiling and replacing it$" "$dir/stderr" || fail "default: no warning line: $(cat "$dir/stderr")"
[ "$(wc -l < "$dir/stderr")" = 1 ] || fail "default: expected one line on stderr: $(cat "$dir/stderr")"

corrupt; KILN_LOG=error run
[ ! -s "$dir/stderr" ] || fail "KILN_LOG=error: stderr is not empty: $(cat "$dir/stderr")"
grep -q "reference_ok=true" "$dir/stdout" || fail "KILN_LOG=error: the run did not verify"

corrupt; KILN_LOG=loud run
grep -q "^kiln: warning: KILN_LOG is 'loud'; expected trace, debug, info, warn, error or off (using warn)$" "$dir/stderr" ||
  fail "KILN_LOG=loud: the bad word is not named: $(cat "$dir/stderr")"
grep -q "^kiln: warning: cache: " "$dir/stderr" || fail "KILN_LOG=loud: warn is not in force: $(cat "$dir/stderr")"
echo "ok: KILN_LOG sets the level; an unknown word is named"
