#!/usr/bin/env bash
# check-no-stderr.sh SOURCE_DIR: the library's sources (lib/, backends/, dsl/) write
# nothing to stderr or stdout themselves. Text that is not an Error leaves kiln through its
# logger (lib/Runtime/Log.cpp, the one file allowed), which an engine can route or silence.
set -u
src=$1
pattern='\bstd::(cout|cerr|clog)\b|\b(stderr|stdout)\b|(^|[^a-z_])(printf|puts|perror)[[:space:]]*\(|\b(errs|outs|dbgs)\(\)'
hits=$(grep -rnE --include='*.cpp' --include='*.h' --include='*.cu' "$pattern" "$src/lib" "$src/backends" "$src/dsl" |
  grep -v "^$src/lib/Runtime/Log.cpp:" |
  grep -vE '^[^:]+:[0-9]+:[[:space:]]*//') # comments
if [ -n "$hits" ]; then
  echo "FAIL: the library writes to stderr/stdout itself (use kiln::detail::log, lib/Runtime/Log.h):"
  echo "$hits"
  exit 1
fi
echo "ok: no direct stderr/stdout writes in lib/, backends/ or dsl/"
