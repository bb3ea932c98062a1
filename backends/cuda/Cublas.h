#pragma once
// Internal: cuBLASLt, loaded with dlopen (never linked), as the GPU reference of the
// verifier (reference::gpu_gemm). Never included from include/kiln: it carries CUDA types.
//
// Same style as Driver.h: every entry point is one line of an X-macro table
// (KILN_CUBLASLT_SYMBOLS in Cublas.cpp), resolved once and thread-safely by cublasLt();
// every call goes through KILN_CUBLAS_CHECK, which turns a cublasStatus_t into a
// kiln::Error with the call's text, the status name and file:line. Only cublasLt.h's
// *types* are used; no cublas* symbol is referenced at link time.
#include <cublasLt.h>
#include <cuda.h>

#include <cstdint>
#include <string>

#include "Driver.h"
#include "kiln/dtype.hpp"
#include "kiln/error.hpp"

namespace kiln::cuda {

/// True when libcublasLt.so.13 loads and has every entry point kiln uses; otherwise false
/// and, when `why` is given, the reason (the message cublasLtVersionString() would throw).
bool cublasLtAvailable(std::string* why = nullptr);

/// "cuBLASLt 13.1.0 (libcublasLt.so.13)"; kiln::Error(Unsupported) when the library is
/// missing or lacks an entry point.
std::string cublasLtVersionString();

/// "CUBLAS_STATUS_NOT_SUPPORTED" (from the library when loaded, else a built-in table,
/// else "cublasStatus_t 1234").
std::string cublasStatusName(cublasStatus_t s);

namespace detail {
/// Throws kiln::Error: "[<context>: ]<expr> failed: CUBLAS_STATUS_X (<text>) at
/// <file>:<line>". Kind: Unsupported for CUBLAS_STATUS_NOT_SUPPORTED and
/// CUBLAS_STATUS_ARCH_MISMATCH, InvalidArgument for CUBLAS_STATUS_INVALID_VALUE,
/// Runtime otherwise.
[[noreturn]] void throwCublasError(cublasStatus_t s, const char* expr, const char* file, int line,
                                   const std::string& context = {});
} // namespace detail

/// One row-major matrix operand in device memory: element (i, j) at ptr + (i*ld + j)*size.
struct RowMajorMatrix {
  CUdeviceptr ptr = 0;
  int64_t rows = 0, cols = 0;
  int64_t ld = 0;   ///< elements between rows, >= cols
};

enum class GemmEpilogue { none, bias_relu, bias_gelu, bias };

/// D[M,N] = epilogue(A[M,K] @ B[K,N] + bias[N]): all operands of `dtype` (f32, bf16 or
/// f16), f32 compute and scale (CUBLAS_COMPUTE_32F: no TF32 for f32 inputs).
struct GemmProblem {
  DType dtype = DType::f32;
  RowMajorMatrix a, b, d;
  RowMajorMatrix residual; ///< added before the epilogue (cuBLASLt's C, beta = 1); ptr 0: none
  CUdeviceptr bias = 0; ///< contiguous, N elements; required unless epilogue is none
  GemmEpilogue epilogue = GemmEpilogue::none;
};

/// A cuBLASLt handle and a workspace, bound to one CUDA context (kept by a CUDA runtime
/// and reused from call to call). Not thread-safe: callers serialise.
class CublasLtGemm {
public:
  /// Loads cuBLASLt (kiln::Error(Unsupported) when it is missing) and creates a handle.
  /// The context that will run the GEMMs must be current.
  CublasLtGemm();
  ~CublasLtGemm();
  CublasLtGemm(const CublasLtGemm&) = delete;
  CublasLtGemm& operator=(const CublasLtGemm&) = delete;

  /// Enqueues the GEMM on `stream` (operands already validated by the caller) and
  /// returns; K == 0 is handled (D = epilogue(bias), or zeros). Throws kiln::Error
  /// (Unsupported) when cuBLASLt has no algorithm for the problem.
  void run(const GemmProblem& p, CUstream stream);

  static constexpr size_t kWorkspaceBytes = size_t(32) << 20; // 32 MiB

private:
  cublasLtHandle_t handle_ = nullptr;
  DeviceBuffer workspace_;
};

} // namespace kiln::cuda

/// Evaluates a cublasStatus_t expression; on failure throws kiln::Error naming the
/// expression, the status and file:line.
#define KILN_CUBLAS_CHECK(expr)                                                          \
  do {                                                                                   \
    const cublasStatus_t kiln_cublas_status_ = (expr);                                   \
    if (kiln_cublas_status_ != CUBLAS_STATUS_SUCCESS)                                    \
      ::kiln::cuda::detail::throwCublasError(kiln_cublas_status_, #expr, __FILE__,       \
                                             __LINE__);                                  \
  } while (0)

/// As KILN_CUBLAS_CHECK, with a prefix saying what kiln was doing.
#define KILN_CUBLAS_CHECK_CTX(expr, context)                                             \
  do {                                                                                   \
    const cublasStatus_t kiln_cublas_status_ = (expr);                                   \
    if (kiln_cublas_status_ != CUBLAS_STATUS_SUCCESS)                                    \
      ::kiln::cuda::detail::throwCublasError(kiln_cublas_status_, #expr, __FILE__,       \
                                             __LINE__, (context));                       \
  } while (0)
