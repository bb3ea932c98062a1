#pragma once
// Internal, MLIR-free: the interfaces a backend implements behind kiln::Runtime,
// kiln::CompiledKernel and kiln::DeviceTensor.
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "kiln/runtime.hpp"
#include "Runtime/Launch.h"

namespace kiln::detail {

struct CompiledImpl {
  virtual ~CompiledImpl() = default;
  virtual void launch(const std::vector<TensorView>& args, void* stream, bool wait) = 0;
  KernelSignature sig;
  Backend backend = Backend::cpu;
  CompileTimes times;
  KernelReport report;
};

struct DeviceTensorImpl {
  virtual ~DeviceTensorImpl() = default;
  TensorView view;
};

struct RuntimeImpl {
  virtual ~RuntimeImpl() = default;
  virtual std::unique_ptr<CompiledImpl> compile(const Kernel& kernel) = 0;
  virtual std::string emit(const Kernel& kernel, Stage stage) = 0;
  virtual std::unique_ptr<DeviceTensorImpl> allocate(DType dtype, const std::vector<int64_t>& dims) = 0;
  virtual void upload(const HostTensor& from, DeviceTensorImpl& to) = 0;
  virtual void download(const DeviceTensorImpl& from, HostTensor& to) = 0;
  virtual void synchronize() = 0;
  Backend backend = Backend::cpu;
  std::string description;
};

/// The CPU backend (backends/cpu); `why_not_cuda` is appended to its description.
std::shared_ptr<RuntimeImpl> makeCpuRuntime(const std::string& why_not_cuda);
/// The CUDA backend (backends/cuda). Throws kiln::Error(Unsupported) with the reason when
/// it cannot run (no driver, no GPU) unless options.compile_only.
std::shared_ptr<RuntimeImpl> makeCudaRuntime(const RuntimeOptions& options);
/// Whether a CUDA runtime could be made here; `why` says why not.
bool cudaAvailable(std::string* why);

/// Milliseconds since `t0` on the steady clock the profiler uses.
inline double msSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

} // namespace kiln::detail
