#!/usr/bin/env bash
# Installs kiln from BUILD into a scratch prefix (stripped, as `make install` does), builds
# the consumer project with the system's default C++ compiler through find_package(kiln)
# and runs it; then builds the same source through pkg-config alone and runs that.
set -euo pipefail
build=$1; src=$2; cxx=${3:-c++}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --strip --prefix "$work/prefix" > "$work/install.log"
lib=$(ls "$work"/prefix/lib*/libkiln.so.*.*.* | head -1)
if readelf -S "$lib" | grep -q '\.debug_'; then echo "FAIL: the installed $lib is not stripped"; exit 1; fi
size=$(stat -c %s "$lib")
echo "installed: $lib, $size bytes"
# A release build's library has a size budget (docs/embedding.md): a new LLVM/MLIR library
# pulled in by one call (a registerAll*, an upstream pass that loads a dozen dialects) shows
# up here, not months later.
if [ -n "${KILN_LIBRARY_BUDGET_BYTES:-}" ] && [ "$size" -gt "$KILN_LIBRARY_BUDGET_BYTES" ]; then
  echo "FAIL: the installed library is $size bytes, over its budget of $KILN_LIBRARY_BUDGET_BYTES;" \
       "link with -Wl,-Map and see which archives grew (docs/embedding.md, 'Linking')"
  exit 1
fi
cmake -S "$src" -B "$work/build" -G Ninja -DCMAKE_PREFIX_PATH="$work/prefix" > "$work/configure.log" \
  || { cat "$work/configure.log"; exit 1; }
cmake --build "$work/build" || exit 1
"$work/build/consumer"
# pkg-config, from the installed .pc alone.
export PKG_CONFIG_PATH=$(dirname "$lib")/pkgconfig
[ "$(pkg-config --modversion kiln)" = "$(sed -n 's/^project(kiln VERSION \([0-9.]*\).*/\1/p' "$src/../../CMakeLists.txt")" ] \
  || { echo "FAIL: pkg-config --modversion kiln: $(pkg-config --modversion kiln 2>&1)"; exit 1; }
"$cxx" -std=c++20 "$src/main.cpp" -o "$work/consumer-pc" $(pkg-config --cflags --libs kiln)
"$work/consumer-pc"
echo "ok: find_package(kiln) and pkg-config kiln both build and run the consumer"
