#!/usr/bin/env bash
# libkiln.so's objects define kiln::Error's typeinfo exactly once (in Error.cpp). Code built
# without RTTI must raise errors through kiln::detail::throwError: a `throw Error(...)`
# there emits a weak copy, and a sanitizer build's linker lost the typeinfo among copies.
# Usage: check-one-typeinfo.sh OBJECT_OR_ARCHIVE...
set -euo pipefail
defs=$(nm -A "$@" 2>/dev/null | grep -E ' [DdVvWwRr] _ZTIN4kiln5ErrorE$' || true)
n=$(printf '%s' "$defs" | grep -c . || true)
if [ "$n" -ne 1 ]; then
  echo "kiln::Error's typeinfo is defined $n times, expected once (lib/Runtime/Error.cpp):"
  printf '%s\n' "$defs"
  echo "raise errors from code built without RTTI with kiln::detail::throwError (lib/Runtime/Throw.h)"
  exit 1
fi
echo "one definition: ${defs%%:*}"
