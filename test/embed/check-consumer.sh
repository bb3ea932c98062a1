#!/usr/bin/env bash
# Installs kiln from BUILD into a scratch prefix, builds the consumer project with the
# system's default C++ compiler through find_package(kiln), and runs it.
set -euo pipefail
build=$1; src=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" > "$work/install.log"
cmake -S "$src" -B "$work/build" -G Ninja -DCMAKE_PREFIX_PATH="$work/prefix" > "$work/configure.log" \
  || { cat "$work/configure.log"; exit 1; }
cmake --build "$work/build" || exit 1
"$work/build/consumer"
