// The catalogue's hand-written CUDA C++ kernels (lib/Catalogue/cuda/*.cu, embedded at
// build time) and their launch rules.
#include <algorithm>

#include "kiln/catalogue.hpp"
#include "kiln/error.hpp"
#include "kiln/reference.hpp"

namespace kiln::catalogue::detail {

namespace {
const char* kGemmEpilogueCu =
#include "gemm_epilogue.cu.inc"
    ;
const char* kEpilogueCu =
#include "epilogue.cu.inc"
    ;

int dtypeCode(DType d) {
  if (!is_float(d)) throw Error(ErrorKind::Unsupported, std::string("handwritten kernels take f32, f16 or bf16, not ") + to_string(d));
  return d == DType::f32 ? 0 : d == DType::bf16 ? 1 : 2;
}
int epilogueCode(reference::Epilogue e) {
  switch (e) {
  case reference::Epilogue::none: return 0;
  case reference::Epilogue::bias_relu: return 1;
  case reference::Epilogue::bias_gelu: return 2;
  default: break;
  }
  throw Error(ErrorKind::Unsupported, "gemm_epilogue.cu has no bias-only (residual) epilogue");
}
int asInt(int64_t v, const char* what) {
  if (v < 0 || v > 0x7fffffff)
    throw Error(ErrorKind::InvalidArgument, std::string("hand-written gemm_epilogue.cu: ") + what + " = " +
                                                std::to_string(v) + " does not fit its int parameter");
  return int(v);
}
} // namespace

Handwritten gemmHandwritten(DType dtype, reference::Epilogue epilogue) {
  Handwritten h;
  h.source.name = "gemm_epilogue.cu";
  h.source.entry = "gemm_epilogue";
  h.source.code = kGemmEpilogueCu;
  h.source.options = {"-DKILN_DTYPE=" + std::to_string(dtypeCode(dtype)),
                      "-DKILN_EPILOGUE=" + std::to_string(epilogueCode(epilogue))};
  const bool bias = epilogue != reference::Epilogue::none;
  const int64_t tile = dtype == DType::f32 ? 64 : 128;
  h.launch = [bias, tile, dtype](const HandwrittenKernel& k, const std::vector<TensorView>& a, void* stream) {
    if (a.size() != (bias ? 4u : 3u) || a[0].rank() != 2 || a[1].rank() != 2 || a.back().rank() != 2)
      throw Error(ErrorKind::InvalidArgument, "hand-written gemm_epilogue.cu takes A[M,K], B[K,N]" +
                                                  std::string(bias ? ", bias[N]" : "") + " and C[M,N]");
    const TensorView &A = a[0], &B = a[1], &C = a.back();
    for (const TensorView* v : {&A, &B, &C})
      if (v->dtype != dtype || (v->dims[1] > 1 && v->effective_strides()[1] != 1))
        throw Error(ErrorKind::InvalidArgument, "hand-written gemm_epilogue.cu needs " + std::string(to_string(dtype)) +
                                                    " matrices with inner stride 1, got " + v->describe());
    const int64_t M = A.dims[0], K = A.dims[1], N = B.dims[1];
    if (B.dims[0] != K || C.dims[0] != M || C.dims[1] != N)
      throw Error(ErrorKind::InvalidArgument, "hand-written gemm_epilogue.cu: shapes disagree: A " + A.describe() +
                                                  ", B " + B.describe() + ", C " + C.describe());
    if (bias && (a[2].rank() != 1 || a[2].dims[0] != N || a[2].dtype != dtype ||
                 (N > 1 && a[2].effective_strides()[0] != 1)))
      throw Error(ErrorKind::InvalidArgument, "hand-written gemm_epilogue.cu: bias must be a contiguous " +
                                                  std::string(to_string(dtype)) + "[" + std::to_string(N) + "], got " +
                                                  a[2].describe());
    auto ld = [](const TensorView& v) { return v.dims[0] > 1 ? v.effective_strides()[0] : v.dims[1]; };
    const int64_t lda = ld(A), ldb = ld(B), ldc = ld(C);
    auto aligned16 = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
    const int vec = lda % 8 == 0 && ldb % 8 == 0 && aligned16(A.data) && aligned16(B.data);
    TensorView none{nullptr, dtype, {0}, {}};
    k.launch({unsigned((N + tile - 1) / tile), unsigned((M + tile - 1) / tile), 1}, {256, 1, 1}, 0,
             {A, B, bias ? a[2] : none, C, asInt(M, "M"), asInt(N, "N"), asInt(K, "K"), asInt(lda, "lda"),
              asInt(ldb, "ldb"), asInt(ldc, "ldc"), int32_t(vec)},
             stream);
  };
  return h;
}

} // namespace kiln::catalogue::detail

namespace kiln::catalogue {

EagerEpilogue eager_epilogue(DType dtype) {
  EagerEpilogue e;
  e.source.name = "epilogue.cu";
  e.source.entry = "epilogue";
  e.source.code = detail::kEpilogueCu;
  e.source.options = {"-DKILN_DTYPE=" + std::to_string(detail::dtypeCode(dtype))};
  e.launch = [dtype](const HandwrittenKernel& k, const TensorView& c, const TensorView* bias,
                     const TensorView* residual, Activation act, void* stream) {
    auto fail = [](const std::string& why) {
      throw Error(ErrorKind::InvalidArgument, "eager epilogue (epilogue.cu): " + why);
    };
    if (c.rank() != 2 || c.dtype != dtype || (c.dims[1] > 1 && c.effective_strides()[1] != 1))
      fail("C must be a " + std::string(to_string(dtype)) + " matrix with inner stride 1, got " + c.describe());
    const int64_t M = c.dims[0], N = c.dims[1];
    auto ld = [](const TensorView& v) { return v.dims[0] > 1 ? v.effective_strides()[0] : v.dims[1]; };
    if (bias && (bias->rank() != 1 || bias->dims[0] != N || bias->dtype != dtype))
      fail("bias must be " + std::string(to_string(dtype)) + "[" + std::to_string(N) + "], got " + bias->describe());
    if (residual && (residual->dims != c.dims || residual->dtype != dtype ||
                     (N > 1 && residual->effective_strides()[1] != 1)))
      fail("residual must match C " + c.describe() + ", got " + residual->describe());
    if (!bias && !residual && act == Activation::none) return; // nothing left to do
    TensorView none{nullptr, dtype, {0}, {}};
    k.launch({unsigned((N + 255) / 256), unsigned(std::min<int64_t>(M, 65535)), 1}, {256, 1, 1}, 0,
             {c, bias ? *bias : none, residual ? *residual : none, detail::asInt(M, "M"), detail::asInt(N, "N"),
              detail::asInt(ld(c), "ldc"), detail::asInt(residual ? ld(*residual) : 0, "ldr"), int32_t(act)},
             stream);
  };
  return e;
}

} // namespace kiln::catalogue
