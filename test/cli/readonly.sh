#!/usr/bin/env bash
# readonly.sh KILN: a cache directory on a read-only mount (a cache shipped with a deploy)
# is used as it is: a hit loads, a kernel it lacks compiles, and nothing is written or
# warned about. Needs a read-only bind mount (root, CAP_SYS_ADMIN); without one it says
# why and exits 77 (ctest: skipped).
set -u
kiln=$1
dir=$(mktemp -d)
ro="$dir/ro"
cleanup() { umount "$ro" 2> /dev/null; rm -rf "$dir"; }
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }
mkdir -p "$dir/cache" "$ro"
KILN_CACHE_DIR="$dir/cache" "$kiln" run add --backend=cpu --shape 8x8 > /dev/null || fail "filling the cache failed"
if ! mount --bind -o ro "$dir/cache" "$ro" 2> "$dir/mount.err"; then
  echo "SKIPPED: cannot make a read-only bind mount here: $(cat "$dir/mount.err")"
  exit 77
fi
touch "$ro/probe" 2> /dev/null && fail "the mount is writable"
export KILN_CACHE_DIR=$ro
out=$("$kiln" run add --backend=cpu --shape 8x8 2> "$dir/stderr") || fail "the cached run failed: $out"
grep -q "disk cache hit" <<<"$out" || fail "no disk hit from the read-only cache: $out"
out=$("$kiln" run softmax --backend=cpu --shape 7x300 2>> "$dir/stderr") || fail "a kernel not in the cache failed: $out"
grep -q "reference_ok=true" <<<"$out" || fail "softmax did not verify: $out"
grep -q "is read-only" <<<"$out" || fail "the run does not say the cache is read-only: $out"
[ ! -s "$dir/stderr" ] || fail "warnings on stderr: $(cat "$dir/stderr")"
[ "$(find "$dir/cache" -name '*.kiln' | wc -l)" = 1 ] || fail "the read-only cache changed"
echo "ok: a read-only cache directory serves hits, compiles misses, writes and warns nothing"
