#!/usr/bin/env bash
# libkiln.so must export kiln's API and nothing of the LLVM/MLIR linked inside it, and
# must not depend on the shared libLLVM/libMLIR (an engine may carry its own LLVM).
set -euo pipefail
lib=$1
exported=$(nm -D --defined-only "$lib" | c++filt)
leaks=$(grep -E 'mlir::|llvm::' <<<"$exported" || true)
[ -z "$leaks" ] || { echo "FAIL: LLVM/MLIR symbols exported:"; head -20 <<<"$leaks"; exit 1; }
grep -q 'kiln::Runtime::create' <<<"$exported" || { echo "FAIL: kiln API not exported"; exit 1; }
deps=$(ldd "$lib" | grep -Ei 'libLLVM|libMLIR' || true)
[ -z "$deps" ] || { echo "FAIL: links shared LLVM/MLIR: $deps"; exit 1; }
echo "ok: $(wc -l <<<"$exported") exported symbols, all kiln; no shared LLVM/MLIR"
