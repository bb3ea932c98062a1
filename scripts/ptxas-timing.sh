#!/usr/bin/env bash
# How long the toolkit's ptxas takes over a kernel's PTX module (e.g. from
# `kiln compile gemm_bias_relu --dtype bf16 --emit ptx -o gemm_bias_relu.ptx`): the whole
# module with -split-compile 1, 4, 8, 16 and 0 (every core), three runs each; then one ptxas
# per entry, all at once; then each entry alone; and whether each entry's SASS in the
# whole-module cubin is the same as in its cubin alone (needs cuobjdump).
# Usage: scripts/ptxas-timing.sh FILE.ptx...   (PTXAS: the ptxas to time)
set -u
P=${PTXAS:-$(command -v ptxas || echo /usr/local/cuda/bin/ptxas)}
OBJ=$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump)
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
ms() { local t0=$(date +%s%N); "$@" > /dev/null 2>&1 || echo "FAILED: $*" >&2; echo $(( ($(date +%s%N) - t0) / 1000000 )); }
echo "cores: $(nproc)"
for f in "$@"; do
  k=$(basename "$f" .ptx)
  # One module per entry: the header (everything before the first entry) and the entry.
  python3 - "$f" "$W/$k" <<'PY'
import re, sys
src = open(sys.argv[1]).read()
at = [m.start() for m in re.finditer(r'^\s*(\.visible\s+)?\.entry', src, re.M)]
for i, (a, b) in enumerate(zip(at, at[1:] + [len(src)])):
    open("%s.e%02d.ptx" % (sys.argv[2], i), "w").write(src[:at[0]] + src[a:b])
PY
  for s in 1 4 8 16 0; do
    echo "$k whole module, -split-compile $s: $(for r in 1 2 3; do ms "$P" -arch=sm_90a -O3 -split-compile $s "$f" -o "$W/$k.cubin"; done | tr '\n' ' ')ms"
  done
  for r in 1 2 3; do
    t0=$(date +%s%N)
    ls "$W/$k".e*.ptx | xargs -P "$(nproc)" -I{} "$P" -arch=sm_90a -O3 {} -o {}.cubin
    echo "$k one ptxas per entry, all at once: $(( ($(date +%s%N) - t0) / 1000000 )) ms"
  done
  "$P" -arch=sm_90a -O3 "$f" -o "$W/$k.cubin"
  for e in "$W/$k".e*.ptx; do
    fn=$(grep -o -m1 "\.entry [A-Za-z0-9_]*" "$e" | cut -d' ' -f2)
    t=$(ms "$P" -arch=sm_90a -O3 "$e" -o "$e.cubin")
    same=unknown
    if [ -x "$OBJ" ]; then
      a=$("$OBJ" -sass -fun "$fn" "$W/$k.cubin" | grep -E "^ +/\*[0-9a-f]{4}\*/" | md5sum)
      b=$("$OBJ" -sass -fun "$fn" "$e.cubin" | grep -E "^ +/\*[0-9a-f]{4}\*/" | md5sum)
      [ "$a" = "$b" ] && same=yes || same=NO
    fi
    echo "$k $fn alone: $t ms, same SASS as in the whole module: $same"
  done
done
