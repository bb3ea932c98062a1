#pragma once
// Internal, MLIR-free: the interfaces a backend implements behind kiln::Runtime,
// kiln::CompiledKernel and kiln::DeviceTensor.
#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "kiln/error.hpp"
#include "kiln/handwritten.hpp"
#include "kiln/reference.hpp"
#include "kiln/runtime.hpp"
#include "Runtime/KernelCache.h"
#include "Runtime/Launch.h"
#include "Runtime/Throw.h"

namespace kiln::detail {

struct CompiledImpl {
  virtual ~CompiledImpl() = default;
  virtual void launch(const std::vector<TensorView>& args, void* stream, bool wait) = 0;
  /// CompiledKernel::launch_path: which of the kernel's machine code `args` would run.
  virtual std::string launchPath(const std::vector<TensorView>& args) {
    checkLaunchArgs(sig, args);
    return "kernel '" + sig.name + "'";
  }
  /// Finishes `report` and `times` where part of the code is still compiling in the
  /// background (CompiledKernel::report and ::times call it first; it may wait, and it
  /// runs once).
  virtual void settle() {}
  KernelSignature sig;
  Backend backend = Backend::cpu;
  CompileTimes times;
  KernelReport report;
  std::string binary; ///< CUDA: the cubin (or PTX for the driver's JIT); CPU: the object file
  /// What the backend needs besides `binary` to load the kernel again (loadCached).
  nlohmann::json cacheMeta;
};

/// A hand-written kernel compiled by a backend (kiln/handwritten.hpp).
struct HandwrittenImpl {
  virtual ~HandwrittenImpl() = default;
  virtual void launch(Dim3 grid, Dim3 block, size_t smem, const std::vector<KernelArg>& args, void* stream) = 0;
  std::string entry, binary, log;
  HandwrittenTimes times;
  KernelReport report;
};

/// Bytes a runtime holds (Runtime::memory): tensors and workspaces, added when allocated
/// and removed when freed, with the high-water mark.
struct MemoryMeter {
  std::atomic<int64_t> in_use{0}, peak{0};
  void add(int64_t bytes) {
    int64_t now = in_use += bytes;
    int64_t p = peak.load();
    while (now > p && !peak.compare_exchange_weak(p, now)) {
    }
  }
  void sub(int64_t bytes) { in_use -= bytes; }
};

struct DeviceTensorImpl {
  virtual ~DeviceTensorImpl() {
    if (meter) meter->sub(bytes);
  }
  TensorView view;
  std::shared_ptr<MemoryMeter> meter; ///< set by Runtime::allocate
  int64_t bytes = 0;
};

/// One matrix operand of reference::gpu_gemm, validated (lib/Verify/GpuReference.cpp):
/// row-major, element (i, j) at data + (i*ld + j) elements, ld >= cols.
struct GemmOperand {
  void* data = nullptr;
  int64_t rows = 0, cols = 0, ld = 0;
};
/// reference::gpu_gemm's arguments after validation: one dtype for all; bias contiguous,
/// cols(C) elements, non-null exactly when the epilogue is not none.
struct GpuGemmArgs {
  DType dtype = DType::f32;
  GemmOperand a, b, c;
  GemmOperand residual; ///< data == nullptr: none
  void* stream = nullptr; ///< a CUstream; nullptr: the legacy stream
  bool wait = true;       ///< gpu_gemm waits; gpu_gemm_async does not
  const void* bias = nullptr;
  reference::Epilogue epilogue = reference::Epilogue::none;
};

/// reference::gpu_attention's arguments after validation: Q [B,H,T,D], K and V [B,G,S,D],
/// O like Q, one dtype (bf16 or f16), inner stride 1; LSE [B,H,T] f32 contiguous or absent
/// (data == nullptr).
struct GpuAttentionArgs {
  TensorView q, k, v, o, lse;
  TensorView lens; ///< gpu_attention_padded: i32 [B], contiguous; data == nullptr otherwise
  bool causal = false;
  void* stream = nullptr; ///< a CUstream; nullptr: the legacy stream
  bool wait = true;       ///< gpu_attention waits; gpu_attention_async does not
  /// gpu_attention_packed: i32 [B + 1], contiguous (data == nullptr otherwise); Q, K, V, O
  /// are then rank 3 ([heads, T, D]) and `maxLen` bounds every sequence's length.
  TensorView offsets;
  int64_t maxLen = 0;
};

struct RuntimeImpl {
  virtual ~RuntimeImpl() = default;
  virtual std::unique_ptr<CompiledImpl> compile(const Kernel& kernel) = 0;
  virtual std::string emit(const Kernel& kernel, Stage stage) = 0;
  virtual std::unique_ptr<DeviceTensorImpl> allocate(DType dtype, const std::vector<int64_t>& dims) = 0;
  virtual void upload(const HostTensor& from, DeviceTensorImpl& to) = 0;
  virtual void download(const DeviceTensorImpl& from, HostTensor& to) = 0;
  virtual void synchronize() = 0;
  /// Milliseconds of each of `reps` calls of `run` after `warmup` untimed ones, on the
  /// backend's clock (CUDA events on the GPU, the steady clock on the CPU); with
  /// `flushCache`, the last-level cache is flushed before each timed call.
  virtual std::vector<double> time(const std::function<void()>& run, int reps, int warmup, bool flushCache) = 0;
  /// profile::time_stream: `run` enqueues on the stream it is given; with `graph`, captured
  /// once into a CUDA graph that each timed call replays. The CPU: a null stream, no graph.
  virtual std::vector<double> timeStream(const std::function<void(void*)>& run, int reps, int warmup, bool flushCache,
                                         bool graph) {
    if (graph)
      throwError(ErrorKind::Unsupported, "profile::time_stream: CUDA graphs need a CUDA runtime, and this runtime is '" +
                                             description + "'");
    return time([&] { run(nullptr); }, reps, warmup, flushCache);
  }
  /// compile_cuda: only the CUDA backend compiles CUDA C++.
  virtual std::unique_ptr<HandwrittenImpl> compileCuda(const CudaSource& source) {
    throwError(ErrorKind::Unsupported, "compile_cuda('" + source.name + "'): hand-written CUDA C++ needs a CUDA "
                                        "runtime, and this runtime is '" + description + "'");
  }
  /// reference::gpu_gemm: the CUDA backend runs cuBLASLt and waits; others cannot.
  virtual void gpuGemm(const GpuGemmArgs&) {
    throwError(ErrorKind::Unsupported, "reference::gpu_gemm runs cuBLASLt on a CUDA runtime's device, and this "
                                        "runtime is '" + description + "' (use reference::gemm on the host)");
  }
  virtual void gpuAttention(const GpuAttentionArgs&) {
    throwError(ErrorKind::Unsupported, "reference::gpu_attention runs cuDNN on a CUDA runtime's device, and this "
                                        "runtime is '" + description + "' (use reference::attention on the host)");
  }
  /// Device and toolchain identity (Runtime::fingerprint); kiln/llvm are filled in by the caller.
  virtual Fingerprint fingerprint() = 0;
  /// Kernel cache hooks. What besides the tile IR decides the machine code (target,
  /// options, compiler versions); null: this backend does not cache.
  virtual nlohmann::json cacheKeyInputs() { return nullptr; }
  /// Rebuilds a compiled kernel from a cache entry's payload and cacheMeta.
  virtual std::unique_ptr<CompiledImpl> loadCached(const KernelSignature&, const std::string& payload,
                                                   const nlohmann::json& meta) {
    (void)payload, (void)meta;
    throwError(ErrorKind::Unsupported, "this backend has no kernel cache");
  }
  Backend backend = Backend::cpu;
  std::string description;
  std::shared_ptr<MemoryMeter> meter = std::make_shared<MemoryMeter>();

  // The kernel cache's state (lib/Runtime/CompileCache.cpp).
  std::mutex cacheMu;
  /// In-memory entries hold the code as bytes (plus the header), and share a kernel that
  /// is still alive elsewhere. They never own loaded code: a Runtime kept until process exit
  /// must not destroy JIT'd code after LLVM's own statics are gone.
  struct MemoryEntry {
    std::weak_ptr<CompiledImpl> live;
    std::shared_ptr<const CacheRecord> record; ///< null when the backend gave no payload
  };
  std::map<std::string, MemoryEntry> memoryCache;
  /// cacheKeyInputs() with kiln's and LLVM's versions, made once (a runtime's target and
  /// options are fixed at create), and the SHA-256 of its text, which every key hashes.
  std::once_flag keyInputsOnce;
  nlohmann::json keyInputs;
  std::string keyInputsDigest;
  CacheStats cacheStats;
  std::unique_ptr<DiskCache> disk;
  bool memoryCacheOn = true;
};

/// The SHA-256 (hex) of the kernel's tile IR, computed once per Kernel (lib/Compiler/Kernel.cpp).
const std::string& tileIrDigest(const Kernel& kernel);
/// kiln's and LLVM's versions (lib/Runtime/CompileCache.cpp).
std::string kilnVersion();
std::string llvmVersion();

/// Runtime::compile: the memory cache, the disk cache, else the backend's compile (and
/// a disk write).
CompiledKernel compileCached(RuntimeImpl& rt, const Kernel& kernel);
/// Sets up the cache from the options (and $KILN_CACHE_DIR).
void configureCache(RuntimeImpl& rt, const RuntimeOptions& options);

/// What kiln's own code may reach behind a Runtime (a friend of kiln::Runtime).
struct RuntimeAccess {
  static RuntimeImpl& impl(const Runtime& rt) { return *rt.impl_; }
};

/// The CPU backend (backends/cpu) for options.cpu's target; `why_not_cuda` is appended to
/// its description.
std::shared_ptr<RuntimeImpl> makeCpuRuntime(const RuntimeOptions& options, const std::string& why_not_cuda);
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
