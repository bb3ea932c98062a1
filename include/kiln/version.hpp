#pragma once
// Which kiln this is, and what it was built with: for bug reports, deploy checks and the
// cache (a kernel cache is only reused by the same build: docs/cache.md).
#include <string>

#include "kiln/export.hpp"

namespace kiln {

struct KILN_API VersionInfo {
  std::string kiln;         ///< release and build, e.g. "0.1.0+3f9c2a1b7d4e8f60" (the library's build ID)
  std::string llvm;         ///< the LLVM/MLIR linked into the library, e.g. "22.1.0"
  std::string cuda_toolkit; ///< the CUDA headers it was built against, e.g. "13.0" (the driver,
                            ///< cuBLASLt, nvJitLink are loaded at run time: Runtime::fingerprint)
  /// One line per component: "kiln 0.1.0+...", "LLVM/MLIR 22.1.0", "CUDA toolkit 13.0".
  std::string str() const;
};

/// kiln's version; needs no GPU and no Runtime.
KILN_API VersionInfo version();

} // namespace kiln
