#include "kiln/version.hpp"

#include <cuda.h> // CUDA_VERSION only: the driver itself is loaded at run time

#include "Runtime/RuntimeImpl.h"

namespace kiln {

std::string VersionInfo::str() const {
  return "kiln " + kiln + "\nLLVM/MLIR " + llvm + "\nCUDA toolkit " + cuda_toolkit;
}

VersionInfo version() {
  // CUDA_VERSION is major * 1000 + minor * 10.
  return {detail::kilnVersion(), detail::llvmVersion(),
          std::to_string(CUDA_VERSION / 1000) + "." + std::to_string(CUDA_VERSION % 1000 / 10)};
}

} // namespace kiln
