#pragma once
// Hand-written CUDA C++, compiled at run time with NVRTC and launched through kiln's
// runtime: the low-level route `kiln bench` sets beside the DSL kernel (with its compile
// time), and an escape hatch for a kernel the DSL cannot express yet.
//
// kiln cannot see inside the source, so it checks what the driver can tell it: that the
// entry exists, that the arguments match the kernel's parameter count and sizes, that
// tensors are memory of this runtime's device, and the launch limits. The rest (indexing,
// bounds) is the source's responsibility: verify the output (kiln::verify).
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kiln/export.hpp"
#include "kiln/runtime.hpp"
#include "kiln/tensor.hpp"

namespace kiln {

struct KILN_API CudaSource {
  std::string name = "kernel.cu";   ///< the program's name in errors and NVRTC's log
  std::string code;                  ///< CUDA C++; the toolkit's headers may be included
  std::string entry;                 ///< an extern "C" __global__ function in `code`
  std::vector<std::string> options;  ///< extra NVRTC options, e.g. "-DBLOCK_M=128"
};

struct KILN_API HandwrittenTimes {
  double nvrtc_ms = 0; ///< CUDA C++ -> cubin (NVRTC, including ptxas)
  double load_ms = 0;  ///< module load (0 on a compile-only runtime)
  double total_ms() const { return nvrtc_ms + load_ms; }
};

struct KILN_API Dim3 {
  unsigned x = 1, y = 1, z = 1;
};

/// One kernel parameter, in the order of the kernel's parameter list: a tensor (passed as
/// its data pointer) or a scalar of the exact C++ type the kernel declares.
class KILN_API KernelArg {
public:
  KernelArg(const TensorView& tensor);
  KernelArg(const DeviceTensor& tensor);
  KernelArg(int32_t value);
  KernelArg(int64_t value);
  KernelArg(float value);
  KernelArg(double value);
  bool is_tensor() const { return tensor_; }
  size_t size() const { return size_; }
  const void* data() const { return bytes_; }
  const TensorView& view() const { return view_; }
  std::string describe() const; ///< "tensor bf16[4096x4096]", "int32 7"

private:
  alignas(8) unsigned char bytes_[8] = {};
  size_t size_ = 0;
  bool tensor_ = false;
  TensorView view_;
};

namespace detail { struct HandwrittenImpl; }

/// A hand-written kernel, compiled and (unless the runtime is compile-only) loaded. Move-only.
class KILN_API HandwrittenKernel {
public:
  explicit HandwrittenKernel(std::unique_ptr<detail::HandwrittenImpl> impl);
  HandwrittenKernel(HandwrittenKernel&&) noexcept;
  HandwrittenKernel& operator=(HandwrittenKernel&&) noexcept;
  ~HandwrittenKernel();

  const std::string& entry() const;
  const HandwrittenTimes& times() const;
  /// Target, compiler ("NVRTC 13.0"), registers (once loaded), threads and shared memory
  /// of the last launch configuration are not known until launch: threads = 0.
  const KernelReport& report() const;
  const std::string& binary() const; ///< the cubin
  const std::string& log() const;    ///< NVRTC's log (warnings), verbatim
  /// Enqueues the kernel on `stream` (nullptr: the context's legacy stream, the one
  /// CompiledKernel::launch(args) and the profiler use) and returns. Throws
  /// kiln::Error(InvalidArgument) naming the argument when the count or a size differs
  /// from the kernel's parameters, a tensor is not on this runtime's device, or the launch
  /// exceeds a limit; kiln::Error(Unsupported) on a compile-only runtime.
  void launch(Dim3 grid, Dim3 block, size_t dynamic_shared_bytes, const std::vector<KernelArg>& args,
              void* stream = nullptr) const;

private:
  std::unique_ptr<detail::HandwrittenImpl> impl_;
};

/// Compiles `source` with NVRTC for `rt`'s CUDA target and loads it. Throws kiln::Error:
///  - Unsupported: `rt` is not a CUDA runtime, or libnvrtc.so.13 is missing;
///  - CompileFailed: NVRTC rejected the source ("<name>: NVRTC failed ...:\n<log>");
///  - NotFound: the entry is not a __global__ function of the program.
KILN_API HandwrittenKernel compile_cuda(const Runtime& rt, const CudaSource& source);

} // namespace kiln
