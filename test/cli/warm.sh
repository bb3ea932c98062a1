#!/usr/bin/env bash
# warm.sh KILN: `kiln warm MANIFEST` fills a cache directory without a GPU; a second run
# finds every entry there; a manifest with a mistake is refused, naming its line, before
# anything compiles.
set -u
kiln=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

cat > "$dir/manifest.txt" <<'M'
# what the engine runs
gemm bf16 sm_90a,sm_80   # two archs
softmax f16,bf16 sm_80
M
out=$("$kiln" warm "$dir/manifest.txt" --dir "$dir/cache" 2>&1) || fail "warm failed: $out"
echo "$out"
[ "$(grep -c ' compiled$' <<<"$out")" = 4 ] || fail "expected 4 kernels compiled"
grep -q "^4 of 4 in the cache at $dir/cache$" <<<"$out" || fail "no summary line"
grep -q "^machine code: 4 of 4$" <<<"$out" || fail "not all machine code (the sm_90a twins by the toolkit's ptxas): $out"
ls=$("$kiln" cache ls --dir "$dir/cache") || fail "cache ls failed"
[ "$(grep -c ' ok$' <<<"$ls")" = 4 ] || fail "expected 4 valid entries: $ls"
out=$("$kiln" warm "$dir/manifest.txt" --dir "$dir/cache" 2>&1) || fail "second warm failed: $out"
[ "$(grep -c ' already cached$' <<<"$out")" = 4 ] || fail "the second run compiled again: $out"

# Without ptxas the sm_90a GEMM is PTX for the GPU's driver, and the summary says so.
out=$(KILN_PTXAS=off "$kiln" warm "$dir/manifest.txt" --dir "$dir/ptx-cache" 2>&1) || fail "warm without ptxas failed: $out"
grep -q "^machine code: 3 of 4; the others PTX, compiled by the GPU's driver at load (KILN_PTXAS=off)$" <<<"$out" ||
  fail "the PTX entry is not said: $out"

printf 'gemm bf16 sm_90a\ngem bf16 sm_90a\n' > "$dir/typo.txt"
out=$("$kiln" warm "$dir/typo.txt" --dir "$dir/typo-cache" 2>&1); rc=$?
[ "$rc" = 2 ] || fail "a typo: exit $rc, expected 2: $out"
grep -q "typo.txt:2: unknown kernel 'gem'" <<<"$out" || fail "the typo's line is not named: $out"
[ ! -e "$dir/typo-cache" ] || fail "something compiled before the manifest was checked"

for bad in "gemm bf16 x86-64|typo.txt:1: arch 'x86-64' is not a CUDA arch" "gemm f64 sm_90a|unknown dtype 'f64'" \
           "gemm bf16 sm_70|unsupported CUDA architecture 'sm_70'" "gemm bf16|expected '<kernel> <dtype>"; do
  printf '%s\n' "${bad%%|*}" > "$dir/typo.txt"
  out=$("$kiln" warm "$dir/typo.txt" --dir "$dir/typo-cache" 2>&1); rc=$?
  [ "$rc" = 2 ] || fail "'${bad%%|*}': exit $rc, expected 2: $out"
  grep -qF "${bad#*|}" <<<"$out" || fail "'${bad%%|*}': expected '${bad#*|}' in: $out"
done
echo "ok: warm fills the cache, finds it full the second time, refuses a bad manifest by line"
