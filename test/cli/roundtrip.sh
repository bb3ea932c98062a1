#!/usr/bin/env bash
# `kiln compile K --emit=tile | kiln-opt` round-trips for every catalogue kernel: the
# printed IR parses, verifies and prints back to the same text.
set -euo pipefail
kiln=$1; opt=$2
for k in $("$kiln" list | tail -n +2 | awk '{print $1}'); do
  a=$("$kiln" compile "$k" --emit=tile --dtype bf16 | "$opt")
  b=$(printf '%s\n' "$a" | "$opt")
  [ "$a" == "$b" ] || { echo "FAIL: $k does not round-trip"; diff <(echo "$a") <(echo "$b"); exit 1; }
  echo "ok: $k"
done
