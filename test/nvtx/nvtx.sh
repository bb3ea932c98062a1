#!/usr/bin/env bash
# nvtx.sh KILN INJECTION: with an NVTX tool attached (here a stand-in for Nsight Systems that
# writes each range to a file), a kiln run shows its compile, the compile's phases and the
# launch in kiln's domain, each named after the kernel, and every range pushed is popped.
set -u
kiln=$1; inject=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; cat "$dir/nvtx.log" 2> /dev/null; exit 1; }
NVTX_INJECTION64_PATH=$inject KILN_NVTX_LOG=$dir/nvtx.log KILN_CACHE_DIR=off \
  "$kiln" run gemm_bias_relu --backend=cpu --shape 33x17x9 > "$dir/run.log" 2>&1 || fail "the run failed: $(cat "$dir/run.log")"
[ -s "$dir/nvtx.log" ] || fail "no NVTX range was recorded"
cat "$dir/nvtx.log"
for want in "compile gemm_bias_relu" "tile passes gemm_bias_relu" "lowering gemm_bias_relu" "codegen gemm_bias_relu" \
            "launch gemm_bias_relu"; do
  grep -qx "push kiln: $want" "$dir/nvtx.log" || fail "no range 'kiln: $want'"
done
[ "$(grep -c '^push kiln' "$dir/nvtx.log")" = "$(grep -c '^pop kiln' "$dir/nvtx.log")" ] || fail "pushes and pops differ"
# The phases nest inside the compile: it is pushed first and popped after them.
awk '/^push kiln: compile /{c=NR} /^push kiln: tile passes /{t=NR} END{exit !(c && t && c < t)}' "$dir/nvtx.log" ||
  fail "the compile range does not open before its phases"
echo "ok: kiln's compile, its phases and the launch are NVTX ranges named after the kernel"
