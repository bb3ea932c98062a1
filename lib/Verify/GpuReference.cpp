// reference::gpu_gemm: argument checks (any backend), then the runtime's backend runs it
// (the CUDA backend with cuBLASLt: backends/cuda/Cublas.cpp).
#include <algorithm>
#include <initializer_list>
#include <limits>
#include <utility>

#include "kiln/error.hpp"
#include "kiln/reference.hpp"
#include "kiln/runtime.hpp"
#include "Runtime/RuntimeImpl.h"

namespace kiln::reference {

namespace {

[[noreturn]] void fail(const std::string& what) {
  throw Error(ErrorKind::InvalidArgument, "reference::gpu_gemm: " + what);
}

void checkView(const char* name, const TensorView& v, int64_t rank, DType dtype) {
  if (v.rank() != rank)
    fail(std::string(name) + " must be rank " + std::to_string(rank) + ", got " + v.describe());
  if (!v.strides.empty() && v.strides.size() != v.dims.size())
    fail(std::string(name) + " has " + std::to_string(v.strides.size()) + " strides for rank " +
         std::to_string(rank));
  for (int64_t d : v.dims)
    if (d < 0) fail(std::string(name) + " has a negative dim: " + v.describe());
  if (v.dtype != dtype)
    fail(std::string(name) + " must have A's dtype " + to_string(dtype) + " (cuBLASLt runs one dtype for A, B, "
         "bias and C), got " + v.describe());
  if (v.numel() > 0 && v.data == nullptr) fail(std::string(name) + " has a null data pointer: " + v.describe());
}

// A rank-2 view as cuBLASLt can read it: inner stride 1, rows ld >= cols elements apart.
detail::GemmOperand matrix(const char* name, const TensorView& v, DType dtype) {
  checkView(name, v, 2, dtype);
  const std::vector<int64_t> st = v.effective_strides();
  const int64_t rows = v.dims[0], cols = v.dims[1];
  if (cols > 1 && st[1] != 1)
    fail(std::string(name) + " must have inner stride 1 (cuBLASLt reads rows of contiguous elements), got " +
         v.describe());
  // A single row, or no elements at all: the row stride is never used.
  const int64_t ld = rows > 1 && cols > 0 ? st[0] : std::max<int64_t>(cols, 1);
  if (ld < std::max<int64_t>(cols, 1))
    fail(std::string(name) + " must have a row stride >= its row length " + std::to_string(cols) +
         " (rows must not overlap), got " + v.describe());
  return {v.data, rows, cols, ld};
}

} // namespace

namespace {

detail::GpuGemmArgs validate(const TensorView& a, const TensorView& b, const TensorView* bias, Epilogue epilogue,
                             const TensorView& c, const TensorView* residual) {
  detail::GpuGemmArgs g;
  g.dtype = a.dtype;
  g.epilogue = epilogue;
  g.a = matrix("A", a, a.dtype);
  g.b = matrix("B", b, a.dtype);
  g.c = matrix("C", c, a.dtype);
  if (g.a.cols != g.b.rows)
    fail("A.dims[1] must equal B.dims[0] (K), got A " + a.describe() + " and B " + b.describe());
  if (g.c.rows != g.a.rows || g.c.cols != g.b.cols)
    fail("C must be [" + std::to_string(g.a.rows) + "x" + std::to_string(g.b.cols) + "] (M x N), got " +
         c.describe());
  if (epilogue != Epilogue::none) {
    if (bias == nullptr) fail("bias is required for a bias, bias_relu or bias_gelu epilogue");
    checkView("bias", *bias, 1, a.dtype);
    if (bias->dims[0] != g.b.cols)
      fail("bias must have length " + std::to_string(g.b.cols) + " (N), got " + bias->describe());
    if (bias->dims[0] > 1 && bias->effective_strides()[0] != 1)
      fail("bias must be contiguous (cuBLASLt takes no bias stride), got " + bias->describe());
    g.bias = bias->data;
  }
  if (residual) {
    g.residual = matrix("residual", *residual, a.dtype);
    if (g.residual.rows != g.c.rows || g.residual.cols != g.c.cols)
      fail("residual must be [" + std::to_string(g.c.rows) + "x" + std::to_string(g.c.cols) + "] (M x N), got " +
           residual->describe());
  }
  return g;
}

} // namespace

void gpu_gemm(const Runtime& rt, const TensorView& a, const TensorView& b, const TensorView* bias,
              Epilogue epilogue, const TensorView& c, const TensorView* residual) {
  detail::RuntimeAccess::impl(rt).gpuGemm(validate(a, b, bias, epilogue, c, residual));
}

void gpu_gemm_async(const Runtime& rt, const TensorView& a, const TensorView& b, const TensorView* bias,
                    Epilogue epilogue, const TensorView& c, const TensorView* residual, void* stream) {
  detail::GpuGemmArgs g = validate(a, b, bias, epilogue, c, residual);
  g.stream = stream;
  g.wait = false;
  detail::RuntimeAccess::impl(rt).gpuGemm(g);
}

namespace {

// `who`: the function the user called, for the messages.
detail::GpuAttentionArgs validateAttention(const TensorView& q, const TensorView& k, const TensorView& v,
                                           bool causal, const TensorView& o, const TensorView* lse,
                                           const char* who = "reference::gpu_attention") {
  auto bad = [who](const std::string& what) { throw Error(ErrorKind::InvalidArgument, std::string(who) + ": " + what); };
  auto check = [&](const char* name, const TensorView& t, int64_t rank) {
    if (t.rank() != rank) bad(std::string(name) + " must be rank " + std::to_string(rank) + ", got " + t.describe());
    if (!t.strides.empty() && t.strides.size() != t.dims.size())
      bad(std::string(name) + " has " + std::to_string(t.strides.size()) + " strides for rank " + std::to_string(rank));
    for (int64_t d : t.dims)
      if (d <= 0) bad(std::string(name) + " must have positive dims, got " + t.describe());
    if (t.data == nullptr) bad(std::string(name) + " has a null data pointer: " + t.describe());
  };
  check("Q", q, 4);
  check("K", k, 4);
  check("V", v, 4);
  check("O", o, 4);
  if (q.dtype != DType::bf16 && q.dtype != DType::f16)
    bad(std::string("Q must be bf16 or f16 (cuDNN's fused attention has no ") + to_string(q.dtype) + " kernel), got " +
        q.describe());
  for (const auto& [name, t] : std::initializer_list<std::pair<const char*, const TensorView*>>{{"K", &k}, {"V", &v}, {"O", &o}})
    if (t->dtype != q.dtype) bad(std::string(name) + " must have Q's dtype " + to_string(q.dtype) + ", got " + t->describe());
  const int64_t B = q.dims[0], H = q.dims[1], T = q.dims[2], D = q.dims[3];
  if (k.dims[0] != B || k.dims[3] != D)
    bad("K must be [B, G, S, D] with Q's B = " + std::to_string(B) + " and D = " + std::to_string(D) + ", got " +
        k.describe());
  if (v.dims != k.dims) bad("V must have K's dims, got V " + v.describe() + " and K " + k.describe());
  if (o.dims != q.dims) bad("O must have Q's dims, got O " + o.describe() + " and Q " + q.describe());
  const int64_t G = k.dims[1], S = k.dims[2];
  if (H % G != 0)
    bad("the query heads H = " + std::to_string(H) + " must be a multiple of K's heads G = " + std::to_string(G));
  if (T > S) bad("Q's T = " + std::to_string(T) + " queries past K's S = " + std::to_string(S) + " positions");
  for (const auto& [name, t] : std::initializer_list<std::pair<const char*, const TensorView*>>{{"Q", &q}, {"K", &k}, {"V", &v}, {"O", &o}})
    if (t->effective_strides()[3] != 1)
      bad(std::string(name) + " must have inner stride 1 (cuDNN reads rows of D contiguous elements), got " +
          t->describe());
  detail::GpuAttentionArgs a{q, k, v, o, {}, {}, causal};
  if (lse) {
    check("LSE", *lse, 3);
    if (lse->dtype != DType::f32) bad("LSE must be f32, got " + lse->describe());
    if (lse->dims != std::vector<int64_t>{B, H, T})
      bad("LSE must be [B, H, T] = [" + std::to_string(B) + ", " + std::to_string(H) + ", " + std::to_string(T) +
          "], got " + lse->describe());
    if (lse->effective_strides() != std::vector<int64_t>{H * T, T, 1})
      bad("LSE must be contiguous (cuDNN writes its statistics densely), got " + lse->describe());
    a.lse = *lse;
  }
  return a;
}

// gpu_attention_padded's arguments: gpu_attention's, T == S, and the lengths i32 [B], contiguous.
detail::GpuAttentionArgs validatePadded(const TensorView& q, const TensorView& k, const TensorView& v,
                                        const TensorView& lens, bool causal, const TensorView& o) {
  const char* who = "reference::gpu_attention_padded";
  detail::GpuAttentionArgs a = validateAttention(q, k, v, causal, o, nullptr, who);
  auto bad = [who](const std::string& what) { throw Error(ErrorKind::InvalidArgument, std::string(who) + ": " + what); };
  const int64_t B = q.dims[0];
  if (q.dims[2] != k.dims[2])
    bad("Q's rows T = " + std::to_string(q.dims[2]) + " must equal K's positions S = " + std::to_string(k.dims[2]) +
        " (each sequence is padded to S, its queries and its keys alike)");
  if (lens.dtype != DType::i32 || lens.rank() != 1 || lens.dims[0] != B || lens.effective_strides()[0] != 1)
    bad("the lengths must be i32 [B] = [" + std::to_string(B) + "], contiguous, got " + lens.describe());
  if (lens.data == nullptr) bad("the lengths have a null data pointer: " + lens.describe());
  a.lens = lens;
  return a;
}

// gpu_attention_packed's arguments: Q, O [H,T,D]; K, V [G,T,D]; offsets i32 [B+1]; 1 <= max_len <= T.
detail::GpuAttentionArgs validatePacked(const TensorView& q, const TensorView& k, const TensorView& v,
                                        const TensorView& offsets, int64_t maxLen, bool causal, const TensorView& o) {
  const char* who = "reference::gpu_attention_packed";
  auto bad = [who](const std::string& what) { throw Error(ErrorKind::InvalidArgument, std::string(who) + ": " + what); };
  const std::initializer_list<std::pair<const char*, const TensorView*>> all{{"Q", &q}, {"K", &k}, {"V", &v}, {"O", &o}};
  for (const auto& [name, t] : all) {
    if (t->rank() != 3) bad(std::string(name) + " must be rank 3 ([heads, T, D]), got " + t->describe());
    if (!t->strides.empty() && t->strides.size() != 3)
      bad(std::string(name) + " has " + std::to_string(t->strides.size()) + " strides for rank 3");
    for (int64_t d : t->dims)
      if (d <= 0) bad(std::string(name) + " must have positive dims, got " + t->describe());
    if (t->data == nullptr) bad(std::string(name) + " has a null data pointer: " + t->describe());
    if (t->effective_strides()[2] != 1)
      bad(std::string(name) + " must have inner stride 1 (cuDNN reads rows of D contiguous elements), got " +
          t->describe());
  }
  if (q.dtype != DType::bf16 && q.dtype != DType::f16)
    bad(std::string("Q must be bf16 or f16 (cuDNN's fused attention has no ") + to_string(q.dtype) + " kernel), got " +
        q.describe());
  for (const auto& [name, t] : all)
    if (t->dtype != q.dtype) bad(std::string(name) + " must have Q's dtype " + to_string(q.dtype) + ", got " + t->describe());
  const int64_t T = q.dims[1], D = q.dims[2];
  if (k.dims[1] != T || k.dims[2] != D)
    bad("K must be [G, T, D] with Q's T = " + std::to_string(T) + " and D = " + std::to_string(D) + ", got " +
        k.describe());
  if (v.dims != k.dims) bad("V must have K's dims, got V " + v.describe() + " and K " + k.describe());
  if (o.dims != q.dims) bad("O must have Q's dims, got O " + o.describe() + " and Q " + q.describe());
  if (q.dims[0] % k.dims[0] != 0)
    bad("the query heads H = " + std::to_string(q.dims[0]) + " must be a multiple of K's heads G = " +
        std::to_string(k.dims[0]));
  if (offsets.dtype != DType::i32 || offsets.rank() != 1 || offsets.dims[0] < 2 || offsets.effective_strides()[0] != 1)
    bad("the offsets must be i32 [B + 1] with B >= 1 sequences, contiguous, got " + offsets.describe());
  if (offsets.data == nullptr) bad("the offsets have a null data pointer: " + offsets.describe());
  if (maxLen < 1 || maxLen > T)
    bad("max_len = " + std::to_string(maxLen) + " must be 1 .. T = " + std::to_string(T) +
        " (a bound on every sequence's length)");
  // cuDNN's ragged offsets are i32 elements: the last token's row must be reachable.
  for (const auto& [name, t] : all) {
    const std::vector<int64_t> st = t->effective_strides();
    if (st[1] > 0 && T > std::numeric_limits<int32_t>::max() / st[1])
      throw Error(ErrorKind::Unsupported, std::string(who) + ": " + name + "'s tokens lie past what cuDNN's 32-bit " +
                                              "ragged offsets reach (T = " + std::to_string(T) + " tokens of " +
                                              std::to_string(st[1]) + " elements each), got " + t->describe());
  }
  detail::GpuAttentionArgs a{q, k, v, o, {}, {}, causal};
  a.offsets = offsets;
  a.maxLen = maxLen;
  return a;
}

} // namespace

void gpu_attention(const Runtime& rt, const TensorView& q, const TensorView& k, const TensorView& v, bool causal,
                   const TensorView& o, const TensorView* lse) {
  detail::RuntimeAccess::impl(rt).gpuAttention(validateAttention(q, k, v, causal, o, lse));
}

void gpu_attention_async(const Runtime& rt, const TensorView& q, const TensorView& k, const TensorView& v,
                         bool causal, const TensorView& o, const TensorView* lse, void* stream) {
  detail::GpuAttentionArgs a = validateAttention(q, k, v, causal, o, lse);
  a.stream = stream;
  a.wait = false;
  detail::RuntimeAccess::impl(rt).gpuAttention(a);
}

void gpu_attention_padded(const Runtime& rt, const TensorView& q, const TensorView& k, const TensorView& v,
                          const TensorView& lens, bool causal, const TensorView& o) {
  detail::RuntimeAccess::impl(rt).gpuAttention(validatePadded(q, k, v, lens, causal, o));
}

void gpu_attention_padded_async(const Runtime& rt, const TensorView& q, const TensorView& k, const TensorView& v,
                                const TensorView& lens, bool causal, const TensorView& o, void* stream) {
  detail::GpuAttentionArgs a = validatePadded(q, k, v, lens, causal, o);
  a.stream = stream;
  a.wait = false;
  detail::RuntimeAccess::impl(rt).gpuAttention(a);
}

void gpu_attention_packed(const Runtime& rt, const TensorView& q, const TensorView& k, const TensorView& v,
                          const TensorView& offsets, int64_t max_len, bool causal, const TensorView& o) {
  detail::RuntimeAccess::impl(rt).gpuAttention(validatePacked(q, k, v, offsets, max_len, causal, o));
}

void gpu_attention_packed_async(const Runtime& rt, const TensorView& q, const TensorView& k, const TensorView& v,
                                const TensorView& offsets, int64_t max_len, bool causal, const TensorView& o,
                                void* stream) {
  detail::GpuAttentionArgs a = validatePacked(q, k, v, offsets, max_len, causal, o);
  a.stream = stream;
  a.wait = false;
  detail::RuntimeAccess::impl(rt).gpuAttention(a);
}

} // namespace kiln::reference
