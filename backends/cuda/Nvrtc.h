#pragma once
// Internal: CUDA C++ -> cubin in-process with NVRTC, loaded with dlopen (never linked), for
// hand-written kernels (kiln/handwritten.hpp). Works with no GPU and no driver, like
// nvJitLink, so CI compiles the hand-written kernels too.
#include <string>
#include <vector>

namespace kiln::cuda {

struct NvrtcResult {
  std::vector<char> cubin; ///< an ELF image
  std::string log;         ///< NVRTC's program log (warnings), verbatim
  std::string compiler;    ///< "NVRTC 13.0"
  double ms = 0;           ///< wall time of nvrtcCompileProgram and the cubin copy
};

/// True when libnvrtc.so.13 loads and has every entry point kiln uses; otherwise false
/// and, when `why` is given, the reason.
bool nvrtcAvailable(std::string* why = nullptr);

/// The toolkit's include directory (for <mma.h>, <cuda_bf16.h>, ...): $CUDA_HOME/include,
/// $CUDA_PATH/include or /usr/local/cuda/include, the first that has cuda_runtime.h;
/// empty when none does.
std::string toolkitIncludeDir();

/// Compiles `code` (program `name`) for `arch` ("sm_90a") with -std=c++17, the toolkit's
/// include directory and `options`. Throws kiln::Error: Unsupported when NVRTC is missing
/// or rejects the arch; CompileFailed with the log when the source does not compile;
/// NotFound when the cubin has no function `entry`.
NvrtcResult compileCudaSource(const std::string& name, const std::string& code, const std::string& entry,
                              const std::string& arch, const std::vector<std::string>& options);

} // namespace kiln::cuda
