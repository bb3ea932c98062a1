#!/usr/bin/env bash
# Public headers must not include MLIR, LLVM or CUDA headers: an engine that embeds kiln
# must not inherit them.
set -euo pipefail
dir=$1
bad=$(grep -rnE '#\s*include\s*[<"](mlir/|llvm/|llvm-c/|cuda|cublas|nvrtc|Eigen)' "$dir" || true)
[ -z "$bad" ] || { echo "FAIL: public headers include internal dependencies:"; echo "$bad"; exit 1; }
echo "ok: $(ls "$dir"/*.hpp | wc -l) public headers, none includes MLIR/LLVM/CUDA/Eigen"
