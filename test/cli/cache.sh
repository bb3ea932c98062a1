#!/usr/bin/env bash
# cache.sh KILN: the disk kernel cache across processes. Four processes compile the same
# kernel into one empty directory at once: all succeed and leave one valid entry; the next
# process takes it from disk; a corrupted entry is replaced; `kiln cache clear` empties it.
set -u
kiln=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
export KILN_CACHE_DIR=$dir
fail() { echo "FAIL: $*"; exit 1; }

pids=()
for i in 1 2 3 4; do
  "$kiln" run gemm_bias_relu --backend=cpu --shape 65x33x17 --dtype bf16 --seed $i > "$dir/run$i.log" 2>&1 &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || fail "a concurrent process failed: $(cat "$dir"/run*.log)"; done
grep -q "reference_ok=true" "$dir/run1.log" || fail "run 1 did not verify"
out=$("$kiln" cache ls --dir "$dir") || fail "cache ls failed"
echo "$out"
[ "$(grep -c ' ok$' <<<"$out")" = 1 ] || fail "expected one valid entry"
grep -q "1 entries" <<<"$out" || fail "expected exactly one entry"

out=$("$kiln" run gemm_bias_relu --backend=cpu --shape 70x20x9 --dtype bf16) || fail "a cached run failed: $out"
grep -q "disk cache hit" <<<"$out" || fail "the fifth process did not hit the disk cache: $out"
grep -q "reference_ok=true" <<<"$out" || fail "the cached kernel is wrong: $out"

entry=$(find "$dir" -name '*.kiln' | head -1)
head -c 500 "$entry" > "$entry.cut" && mv "$entry.cut" "$entry"
out=$("$kiln" cache stats --dir "$dir")
grep -q "1 corrupt" <<<"$out" || fail "stats did not see the truncated entry: $out"
out=$("$kiln" run gemm_bias_relu --backend=cpu --shape 7x7x7 --dtype bf16 2>&1) || fail "run after corruption failed: $out"
grep -q "truncated" <<<"$out" || fail "the corrupt entry was not reported: $out"
grep -q "cache:   miss" <<<"$out" || fail "the corrupt entry was not recompiled: $out"
"$kiln" cache stats --dir "$dir" | grep -q "0 corrupt" || fail "the entry was not replaced"

"$kiln" cache clear --dir "$dir" | grep -q "removed 1 entries" || fail "clear did not remove the entry"
"$kiln" cache stats --dir "$dir" | grep -q "0 entries" || fail "the cache is not empty after clear"
echo "ok: concurrent writers, disk hit, corrupt entry replaced, clear"
