#include "Cublas.h"
#include "Runtime/Log.h"
#include "DynamicLibrary.h"

#include <dlfcn.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <vector>

namespace kiln::cuda {
namespace {

// X-macro: every cuBLASLt entry point kiln uses, by its exported name (nm -D
// libcublasLt.so.13: unversioned names, the symbol version is the soname). The member is
// named like the symbol and typed from cublasLt.h's prototype.
#define KILN_CUBLASLT_SYMBOLS(X)                                                         \
  X(cublasLtGetVersion)                                                                  \
  X(cublasLtGetStatusName)                                                               \
  X(cublasLtGetStatusString)                                                             \
  X(cublasLtCreate)                                                                      \
  X(cublasLtDestroy)                                                                     \
  X(cublasLtMatmulDescCreate)                                                            \
  X(cublasLtMatmulDescDestroy)                                                           \
  X(cublasLtMatmulDescSetAttribute)                                                      \
  X(cublasLtMatrixLayoutCreate)                                                          \
  X(cublasLtMatrixLayoutDestroy)                                                         \
  X(cublasLtMatmulPreferenceCreate)                                                      \
  X(cublasLtMatmulPreferenceDestroy)                                                     \
  X(cublasLtMatmulPreferenceSetAttribute)                                                \
  X(cublasLtMatmulAlgoGetHeuristic)                                                      \
  X(cublasLtMatmul)

struct CublasLtApi {
#define KILN_CUBLASLT_MEMBER(name) decltype(&::name) name = nullptr;
  KILN_CUBLASLT_SYMBOLS(KILN_CUBLASLT_MEMBER)
#undef KILN_CUBLASLT_MEMBER
  std::string path;
  std::string versionString; // "cuBLASLt 13.1.0 (libcublasLt.so.13)"
};

using LoadResult = LoadedLibrary<CublasLtApi>;

LoadResult loadCublasLt() {
  auto api = std::make_unique<CublasLtApi>();
  std::string tried;
  void* h = openFirst(toolkitCandidates({"libcublasLt.so.13"}, "libcublasLt.so.13"),
                      [&](void* handle) {
                        SymbolResolver resolve{handle};
#define KILN_CUBLASLT_RESOLVE(name) api->name = reinterpret_cast<decltype(&::name)>(resolve(#name));
                        KILN_CUBLASLT_SYMBOLS(KILN_CUBLASLT_RESOLVE)
#undef KILN_CUBLASLT_RESOLVE
                        return resolve.missing;
                      },
                      api->path, tried);
  if (h) {
    const std::string& lib = api->path;
    const size_t v = api->cublasLtGetVersion(); // major*10000 + minor*100 + patch
    api->versionString = "cuBLASLt " + std::to_string(v / 10000) + "." +
                         std::to_string(v / 100 % 100) + "." + std::to_string(v % 100) + " (" +
                         lib + ")";
    LoadResult r;
    r.api = std::move(api);
    return r;
  }
  LoadResult r;
  r.error = "cuBLASLt not found: the GPU reference (reference::gpu_gemm) runs cuBLASLt from "
            "the CUDA 13 toolkit's libcublasLt.so.13, and no candidate loaded:" +
            tried +
            "\n  install the toolkit's cuBLAS (or add its lib64 to LD_LIBRARY_PATH, or set "
            "CUDA_HOME), or verify against the host reference (reference::gemm)";
  return r;
}

const LoadResult& loaded() { return loadOnce(&loadCublasLt); }
const CublasLtApi& lt() { return loaded().get(); }

const char* builtinStatusName(cublasStatus_t s) {
  switch (s) {
#define KILN_CUBLAS_ERR(x) case x: return #x;
    KILN_CUBLAS_ERR(CUBLAS_STATUS_SUCCESS)
    KILN_CUBLAS_ERR(CUBLAS_STATUS_NOT_INITIALIZED)
    KILN_CUBLAS_ERR(CUBLAS_STATUS_ALLOC_FAILED)
    KILN_CUBLAS_ERR(CUBLAS_STATUS_INVALID_VALUE)
    KILN_CUBLAS_ERR(CUBLAS_STATUS_ARCH_MISMATCH)
    KILN_CUBLAS_ERR(CUBLAS_STATUS_MAPPING_ERROR)
    KILN_CUBLAS_ERR(CUBLAS_STATUS_EXECUTION_FAILED)
    KILN_CUBLAS_ERR(CUBLAS_STATUS_INTERNAL_ERROR)
    KILN_CUBLAS_ERR(CUBLAS_STATUS_NOT_SUPPORTED)
    KILN_CUBLAS_ERR(CUBLAS_STATUS_LICENSE_ERROR)
#undef KILN_CUBLAS_ERR
  }
  return nullptr;
}

cudaDataType_t cudaType(DType t) {
  switch (t) {
  case DType::f32: return CUDA_R_32F;
  case DType::f16: return CUDA_R_16F;
  case DType::bf16: return CUDA_R_16BF;
  }
  throw Error(ErrorKind::Unsupported, std::string("cuBLASLt GEMM: unsupported dtype ") + to_string(t));
}

// What cuBLASLt's heuristic may assume about an operand (its default assumption is 256).
uint32_t alignmentOf(CUdeviceptr p) { return uint32_t(cuda::alignmentOf(p, 256)); }

// RAII for the three descriptor kinds (built only after lt() succeeded).
struct MatmulDesc {
  cublasLtMatmulDesc_t d = nullptr;
  ~MatmulDesc() {
    if (d) lt().cublasLtMatmulDescDestroy(d);
  }
  template <class V> void set(cublasLtMatmulDescAttributes_t attr, const V& v, const char* what) {
    KILN_CUBLAS_CHECK_CTX(lt().cublasLtMatmulDescSetAttribute(d, attr, &v, sizeof(v)), what);
  }
};
struct Layout {
  cublasLtMatrixLayout_t d = nullptr;
  ~Layout() {
    if (d) lt().cublasLtMatrixLayoutDestroy(d);
  }
};
struct Preference {
  cublasLtMatmulPreference_t d = nullptr;
  ~Preference() {
    if (d) lt().cublasLtMatmulPreferenceDestroy(d);
  }
  template <class V> void set(cublasLtMatmulPreferenceAttributes_t attr, const V& v, const char* what) {
    KILN_CUBLAS_CHECK_CTX(lt().cublasLtMatmulPreferenceSetAttribute(d, attr, &v, sizeof(v)), what);
  }
};

// A row-major R x C matrix with leading dimension ld is the column-major C x R matrix
// with the same ld: that is how cuBLASLt (column-major) sees kiln's operands.
void makeColumnMajorLayout(Layout& l, cudaDataType_t t, const RowMajorMatrix& m, const char* name) {
  KILN_CUBLAS_CHECK_CTX(lt().cublasLtMatrixLayoutCreate(&l.d, t, uint64_t(m.cols), uint64_t(m.rows), m.ld),
                        std::string("cuBLASLt layout of ") + name);
}

std::string dimsStr(const GemmProblem& p) {
  return std::to_string(p.a.rows) + "x" + std::to_string(p.b.cols) + "x" + std::to_string(p.a.cols);
}

float hostGelu(float x) {
  const float k = 0.7978845608028654f; // sqrt(2/pi)
  return 0.5f * x * (1.0f + std::tanh(k * (x + 0.044715f * x * x * x)));
}

float hostEpilogue(GemmEpilogue e, float x) {
  switch (e) {
  case GemmEpilogue::bias_relu: return x > 0 ? x : 0.0f;
  case GemmEpilogue::bias_gelu: return hostGelu(x);
  default: return x;
  }
}

// K == 0: D = epilogue(bias + residual) in every row (or zeros), on the host, written row
// by row (the gaps between rows of a strided D are not kiln's to touch).
void fillWithoutK(const GemmProblem& p, CUstream stream) {
  const int64_t M = p.d.rows, N = p.d.cols;
  const int64_t es = size_of(p.dtype);
  std::vector<float> bias(size_t(N), 0.0f);
  KILN_CU_CHECK(driver().cuStreamSynchronize(stream));
  if (p.epilogue != GemmEpilogue::none) {
    std::vector<unsigned char> raw(size_t(N * es));
    KILN_CU_CHECK(driver().cuMemcpyDtoH_v2(raw.data(), p.bias, raw.size()));
    for (int64_t j = 0; j < N; ++j) bias[size_t(j)] = load_as_f32(raw.data(), p.dtype, j);
  }
  std::vector<unsigned char> row(size_t(N * es), 0), res(size_t(N * es), 0);
  for (int64_t i = 0; i < M; ++i) {
    if (p.residual.ptr)
      KILN_CU_CHECK(driver().cuMemcpyDtoH_v2(res.data(), p.residual.ptr + CUdeviceptr(i * p.residual.ld * es), res.size()));
    for (int64_t j = 0; j < N; ++j) {
      float x = bias[size_t(j)] + (p.residual.ptr ? load_as_f32(res.data(), p.dtype, j) : 0.0f);
      store_from_f32(row.data(), p.dtype, j, hostEpilogue(p.epilogue, x));
    }
    KILN_CU_CHECK(driver().cuMemcpyHtoD_v2(p.d.ptr + CUdeviceptr(i * p.d.ld * es), row.data(), row.size()));
  }
}

} // namespace

bool cublasLtAvailable(std::string* why) {
  const LoadResult& r = loaded();
  if (!r.api && why) *why = r.error;
  return r.api != nullptr;
}

std::string cublasLtVersionString() { return lt().versionString; }

std::string cublasStatusName(cublasStatus_t s) {
  const LoadResult& r = loaded();
  if (r.api) {
    if (const char* n = r.api->cublasLtGetStatusName(s); n && *n) return n;
  }
  if (const char* n = builtinStatusName(s)) return n;
  return "cublasStatus_t " + std::to_string(static_cast<int>(s));
}

namespace detail {

void throwCublasError(cublasStatus_t s, const char* expr, const char* file, int line,
                      const std::string& context) {
  std::string msg = context.empty() ? std::string() : context + ": ";
  msg += std::string(expr) + " failed: " + cublasStatusName(s);
  const LoadResult& r = loaded();
  if (r.api)
    if (const char* text = r.api->cublasLtGetStatusString(s); text && *text) msg += std::string(" (") + text + ")";
  msg += " at " + detail::shortPath(file) + ":" + std::to_string(line);
  ErrorKind kind = ErrorKind::Runtime;
  if (s == CUBLAS_STATUS_NOT_SUPPORTED || s == CUBLAS_STATUS_ARCH_MISMATCH) kind = ErrorKind::Unsupported;
  if (s == CUBLAS_STATUS_INVALID_VALUE) kind = ErrorKind::InvalidArgument;
  throw Error(kind, msg);
}

} // namespace detail

namespace {
// Set by an exit handler registered after the process's first cublasLtCreate. cuBLASLt sets
// up its own process-wide state in that first call, and tears it down at exit, in reverse
// order of registration: before a Runtime made earlier (an engine's static, the test
// suite's) is destroyed. A cublasLtDestroy after that frees freed memory: it crashed 1 in 10
// processes on the H200 (SIGSEGV in free() under cublasLtShutdownCtx, after every test had
// passed). Handlers run in reverse order too, so this one runs before cuBLASLt's teardown
// and tells the handles still alive then to leave it alone: the process is ending.
std::atomic<bool> gExiting{false};
void markExiting() { gExiting.store(true); }
} // namespace

CublasLtGemm::CublasLtGemm() {
  KILN_CUBLAS_CHECK(lt().cublasLtCreate(&handle_));
  static const bool registered = std::atexit(markExiting) == 0;
  (void)registered;
  workspace_ = DeviceBuffer(kWorkspaceBytes);
}

CublasLtGemm::~CublasLtGemm() {
  if (!handle_ || gExiting.load()) return;
  const cublasStatus_t s = lt().cublasLtDestroy(handle_);
  if (s != CUBLAS_STATUS_SUCCESS)
    kiln::detail::logWarn("cublasLtDestroy failed in ~CublasLtGemm: " + cublasStatusName(s));
}

void CublasLtGemm::run(const GemmProblem& p, CUstream stream) {
  const int64_t M = p.a.rows, K = p.a.cols, N = p.b.cols;
  if (M == 0 || N == 0) return;
  if (K == 0) return fillWithoutK(p, stream);
  const CublasLtApi& api = lt();
  const cudaDataType_t t = cudaType(p.dtype);

  // Row-major D = A @ B is column-major D^T = B^T @ A^T: cuBLASLt's "A" is kiln's B
  // (N x K column-major), its "B" is kiln's A (K x M), its D is N x M, and the bias (one
  // value per row of cuBLASLt's D) is indexed by kiln's column n, as wanted.
  MatmulDesc desc;
  KILN_CUBLAS_CHECK(api.cublasLtMatmulDescCreate(&desc.d, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t noTrans = CUBLAS_OP_N;
  desc.set(CUBLASLT_MATMUL_DESC_TRANSA, noTrans, "cuBLASLt TRANSA");
  desc.set(CUBLASLT_MATMUL_DESC_TRANSB, noTrans, "cuBLASLt TRANSB");
  if (p.epilogue != GemmEpilogue::none) {
    const cublasLtEpilogue_t e = p.epilogue == GemmEpilogue::bias_relu   ? CUBLASLT_EPILOGUE_RELU_BIAS
                                 : p.epilogue == GemmEpilogue::bias_gelu ? CUBLASLT_EPILOGUE_GELU_BIAS
                                                                         : CUBLASLT_EPILOGUE_BIAS;
    desc.set(CUBLASLT_MATMUL_DESC_EPILOGUE, e, "cuBLASLt epilogue");
    const void* bias = reinterpret_cast<const void*>(p.bias);
    desc.set(CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias, "cuBLASLt bias pointer");
    desc.set(CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, t, "cuBLASLt bias dtype");
  }

  Layout la, lb, ld, lc;
  makeColumnMajorLayout(la, t, p.b, "B");
  makeColumnMajorLayout(lb, t, p.a, "A");
  makeColumnMajorLayout(ld, t, p.d, "C");
  const bool residual = p.residual.ptr != 0;
  if (residual) makeColumnMajorLayout(lc, t, p.residual, "residual");

  Preference pref;
  KILN_CUBLAS_CHECK(api.cublasLtMatmulPreferenceCreate(&pref.d));
  const uint64_t ws = workspace_.size();
  pref.set(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, ws, "cuBLASLt workspace preference");
  const uint32_t alignA = alignmentOf(p.b.ptr), alignB = alignmentOf(p.a.ptr), alignD = alignmentOf(p.d.ptr);
  pref.set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, alignA, "cuBLASLt alignment preference");
  pref.set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, alignB, "cuBLASLt alignment preference");
  const uint32_t alignC = residual ? alignmentOf(p.residual.ptr) : alignD;
  pref.set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, alignC, "cuBLASLt alignment preference");
  pref.set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, alignD, "cuBLASLt alignment preference");

  cublasLtMatmulHeuristicResult_t heuristic{};
  int found = 0;
  const std::string what = "cuBLASLt GEMM " + dimsStr(p) + " " + to_string(p.dtype);
  KILN_CUBLAS_CHECK_CTX(api.cublasLtMatmulAlgoGetHeuristic(handle_, desc.d, la.d, lb.d, residual ? lc.d : ld.d, ld.d, pref.d, 1,
                                                           &heuristic, &found),
                        what);
  if (found == 0)
    throw Error(ErrorKind::Unsupported, what + ": cuBLASLt has no algorithm for this problem (dtype, "
                                               "epilogue, leading dimensions, alignment)");

  const float alpha = 1.0f, beta = residual ? 1.0f : 0.0f;
  const auto* A = reinterpret_cast<const void*>(p.b.ptr);
  const auto* B = reinterpret_cast<const void*>(p.a.ptr);
  auto* D = reinterpret_cast<void*>(p.d.ptr);
  const auto* C = residual ? reinterpret_cast<const void*>(p.residual.ptr) : D;
  KILN_CUBLAS_CHECK_CTX(api.cublasLtMatmul(handle_, desc.d, &alpha, A, la.d, B, lb.d, &beta, C, residual ? lc.d : ld.d, D, ld.d,
                                           &heuristic.algo, reinterpret_cast<void*>(workspace_.ptr()),
                                           workspace_.size(), stream),
                        what);
  // Again after the first product: after whatever cuBLASLt sets up lazily there.
  static const bool registered = std::atexit(markExiting) == 0;
  (void)registered;
}

} // namespace kiln::cuda
