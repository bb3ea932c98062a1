#pragma once
// Internal: cuDNN, loaded with dlopen (never linked), as the framework's attention: the
// fused flash-attention kernel PyTorch's SDPA and other frameworks call on NVIDIA GPUs.
// kiln bench's `framework` route for the attention kernels and reference::gpu_attention.
//
// Same style as Cublas.h: the entry points are one X-macro table (CudnnApi.h), resolved once
// and thread-safely; every call goes through KILN_CUDNN_CHECK, which turns a status into a
// kiln::Error with the call, the status's name, cuDNN's own last message and file:line.
#include <cuda.h>

#include <map>
#include <memory>
#include <string>

#include "CudnnApi.h"
#include "CudnnGraph.h"
#include "Driver.h"
#include "RaggedOffsets.h"

namespace kiln::cuda {

/// True when a cuDNN 9 library loads and has every entry point kiln uses; otherwise false
/// and, when `why` is given, why not (each place tried).
bool cudnnAvailable(std::string* why = nullptr);

/// "cuDNN 9.19.0 (libcudnn.so.9)"; kiln::Error(Unsupported) when it is missing.
std::string cudnnVersionString();

/// Builds and finalizes the backend descriptors of the shape's graph's tensors and
/// operations (no handle, no GPU needed) and returns how many operations there are: what
/// the loaded cuDNN thinks of kiln's graph, short of choosing an engine. kiln::Error naming
/// the tensor or operation cuDNN refused.
size_t cudnnDescribeAttention(const cudnn::AttentionShape& shape);

namespace detail {
[[noreturn]] void throwCudnnError(cudnn::Status s, const char* expr, const char* file, int line,
                                  const std::string& context = {});
} // namespace detail

/// A cuDNN handle, the plans built so far (one per AttentionShape::key) and a workspace,
/// bound to one CUDA context. Not thread-safe: callers serialise.
class CudnnAttention {
public:
  /// Loads cuDNN (kiln::Error(Unsupported) when missing) and creates a handle in the
  /// current context.
  CudnnAttention();
  ~CudnnAttention();
  CudnnAttention(const CudnnAttention&) = delete;
  CudnnAttention& operator=(const CudnnAttention&) = delete;

  struct Pointers {
    CUdeviceptr q = 0, k = 0, v = 0, o = 0, lse = 0;
    CUdeviceptr lens = 0; ///< AttentionShape::padded: i32 [B], each sequence's length
    /// AttentionShape::ragged: i32 [B + 1], sequence n's tokens offsets[n] .. offsets[n+1]-1
    /// of the `tokens` each tensor holds (clamped to [0, tokens]). `lens` is then not read:
    /// the lengths and each tensor's element offsets are made from these on the stream.
    CUdeviceptr offsets = 0;
    int64_t tokens = 0;
  };
  /// Enqueues the attention on `stream`. The first call for a shape builds its plan (cuDNN's
  /// heuristics, and its runtime compilation where the engine needs one): kiln::Error
  /// (Unsupported) naming the shape when no engine takes it.
  void run(const cudnn::AttentionShape& shape, const Pointers& ptrs, CUstream stream);

  /// Device bytes held for workspaces (the largest plan's so far, and the packed
  /// sequences' lengths and offsets).
  size_t workspaceBytes() const { return workspace_.size() + ragged_.size(); }

  struct Plan;

private:
  cudnn::Handle handle_ = nullptr;
  std::map<std::string, std::unique_ptr<Plan>> plans_;
  DeviceBuffer workspace_;
  std::unique_ptr<RaggedOffsets> raggedKernel_; ///< made by the first packed run
  DeviceBuffer ragged_;                         ///< its output, grown as workspace_ is
};

} // namespace kiln::cuda

/// Evaluates a cuDNN status expression; on failure throws kiln::Error naming the
/// expression, the status, cuDNN's last error message and file:line.
#define KILN_CUDNN_CHECK_CTX(expr, context)                                                   \
  do {                                                                                        \
    const ::kiln::cuda::cudnn::Status kiln_cudnn_status_ = (expr);                            \
    if (kiln_cudnn_status_ != ::kiln::cuda::cudnn::kSuccess)                                  \
      ::kiln::cuda::detail::throwCudnnError(kiln_cudnn_status_, #expr, __FILE__, __LINE__,    \
                                            (context));                                       \
  } while (0)
