#!/usr/bin/env bash
# Builds kiln here and packs what the GPU machine runs (it has no LLVM/MLIR to build with)
# into .device/kiln-device.tar.xz: the stripped library, the CLI and the GPU test suites.
# Then: the device tool runs scripts/device-run.sh with `.device` carried.
set -euo pipefail
cd "$(dirname "$0")/.."
make build
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin" "$stage/lib" .device
cp build/bin/kiln build/bin/kiln-gpu-tests build/bin/kiln-cuda-support-tests build/bin/kiln-bench-gemm build/bin/kiln-bench-compile build/bin/kiln-bench-hbm build/bin/kiln-bench-host build/bin/kiln-alloc-tests build/bin/kiln-mlp build/bin/kiln-llama build/bin/example-decide "$stage/bin/"
cp -P build/lib/libkiln.so* build/lib/kiln-eigen-*.so build/lib/libkiln-fail-dlopen.so "$stage/lib/"
strip --strip-unneeded "$stage"/bin/* "$stage"/lib/libkiln.so.*.*.*
# A cache made here without a GPU, for the device to load as shipped (device-run.sh warm).
build/bin/kiln warm scripts/warm-manifest.txt --dir "$stage/warm-cache" > /dev/null
tar -C "$stage" -cf - . | xz -T2 -6 > .device/kiln-device.tar.xz
ls -la .device/kiln-device.tar.xz
