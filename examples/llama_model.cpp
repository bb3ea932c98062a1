// kiln-llama's model: the shape, the host weights and cache, the views both paths take,
// and the f64 reference of a sequence's rows.
#include "llama_layer.hpp"

#include <cmath>
#include <cstring>
#include <utility>

namespace llama {

using kiln::DType;
using kiln::HostTensor;
using kiln::TensorView;

std::string Shape::describe() const {
  auto n = [](int64_t v) { return std::to_string(v); };
  return std::string(decode() ? "decode" : "prefill") + " B" + n(batch) + "xT" + n(tokens) +
         (decode() ? " after " + n(cached) + " cached" : "") + ", hidden " + n(hidden) + ", heads " + n(heads) + "/" +
         n(kvHeads) + " (hd " + n(hd()) + "), MLP " + n(mlp);
}

std::string Shape::key() const {
  auto n = [](int64_t v) { return std::to_string(v); };
  return "B" + n(batch) + "xT" + n(tokens) + "xL" + n(cached) + "xD" + n(hidden) + "xH" + n(heads) + "xG" + n(kvHeads) +
         "xF" + n(mlp);
}

double Shape::flops() const {
  const double r = double(rows()), D = double(hidden), F = double(mlp);
  const double gemms = 2.0 * r * (D * double(qkv()) + double(heads * hd()) * D + 3.0 * D * F);
  // Each query row sees its cached positions and the new ones up to itself.
  const double seen = double(tokens) * double(cached) + 0.5 * double(tokens) * double(tokens + 1);
  return gemms + 4.0 * double(batch) * double(heads) * seen * double(hd());
}

Host make_host(const Shape& s, DType dt) {
  const int64_t D = s.hidden, F = s.mlp, hd = s.hd(), P = s.positions();
  // Weights scaled by 1/sqrt(fan_in), as initialisers do; rmsnorm weights near 1.
  auto random = [&](std::vector<int64_t> dims, uint64_t seed, float lo, float hi) {
    HostTensor t(dt, std::move(dims));
    t.fill_random(seed, lo, hi);
    return t;
  };
  auto weight = [&](std::vector<int64_t> dims, uint64_t seed, int64_t fanIn) {
    const float a = 1.0f / std::sqrt(float(fanIn));
    return random(std::move(dims), seed, -a, a);
  };
  Host h{random({s.rows(), D}, 1, -1.0f, 1.0f),
         weight({D, s.qkv()}, 2, D),
         weight({s.heads * hd, D}, 3, s.heads * hd),
         weight({D, F}, 4, D),
         weight({D, F}, 5, D),
         weight({F, D}, 6, F),
         random({D}, 7, 0.8f, 1.2f),
         random({D}, 8, 0.8f, 1.2f),
         HostTensor(DType::f32, {P, hd / 2}),
         HostTensor(DType::f32, {P, hd / 2}),
         HostTensor(DType::i32, {s.rows()}),
         {},
         {}};
  for (int64_t p = 0; p < P; ++p)
    for (int64_t i = 0; i < hd / 2; ++i) {
      const double a = double(p) * std::pow(10000.0, -2.0 * double(i) / double(hd));
      h.cos.set(p * (hd / 2) + i, float(std::cos(a)));
      h.sin.set(p * (hd / 2) + i, float(std::sin(a)));
    }
  for (int64_t r = 0; r < s.rows(); ++r) h.pos.set(r, float(s.cached + r % s.tokens));
  if (s.decode()) { // what earlier steps left in the cache: values like rotated keys and values
    h.kCache = random({s.batch, s.kvHeads, P, hd}, 9, -1.0f, 1.0f);
    h.vCache = random({s.batch, s.kvHeads, P, hd}, 10, -1.0f, 1.0f);
  }
  return h;
}

TensorView heads_view(const TensorView& base, int64_t batch, int64_t col0, int64_t heads, int64_t hd) {
  const int64_t T = base.dims[0] / batch, row = base.dims[1], es = int64_t(kiln::size_of(base.dtype));
  return {static_cast<uint8_t*>(base.data) + col0 * es, base.dtype, {batch, heads, T, hd}, {T * row, hd, row, 1}};
}

TensorView tokens_view(const TensorView& base, int64_t col0, int64_t heads, int64_t hd) {
  const int64_t T = base.dims[0], row = base.dims[1], es = int64_t(kiln::size_of(base.dtype));
  return {static_cast<uint8_t*>(base.data) + col0 * es, base.dtype, {T, heads, hd}, {row, hd, 1}};
}

TensorView cache_prefix(const TensorView& cache, int64_t len) {
  TensorView v = cache;
  v.strides = cache.effective_strides();
  v.dims[2] = len;
  return v;
}

TensorView cache_slot(const TensorView& cache, int64_t at) {
  const std::vector<int64_t> st = cache.effective_strides();
  const int64_t es = int64_t(kiln::size_of(cache.dtype));
  return {static_cast<uint8_t*>(cache.data) + at * st[2] * es, cache.dtype, {cache.dims[0], cache.dims[1], cache.dims[3]},
          {st[0], st[1], st[3]}};
}

namespace {

HostTensor asF32(const std::vector<double>& v, std::vector<int64_t> dims) {
  HostTensor t(DType::f32, std::move(dims));
  for (size_t i = 0; i < v.size(); ++i) t.set(int64_t(i), float(v[i]));
  return t;
}

// Rows [r0, r0 + n) of a row-major matrix, as a view into it.
TensorView rowsOf(const HostTensor& t, int64_t r0, int64_t n) {
  TensorView v = const_cast<HostTensor&>(t).view();
  v.strides = v.effective_strides();
  v.data = static_cast<uint8_t*>(v.data) + r0 * v.strides[0] * int64_t(kiln::size_of(v.dtype));
  v.dims[0] = n;
  return v;
}

} // namespace

std::vector<double> reference(const Shape& s, const Host& h, int64_t seq, int64_t n) {
  namespace ref = kiln::reference;
  const int64_t D = s.hidden, H = s.heads, G = s.kvHeads, hd = s.hd(), Nq = s.qkv(), r0 = seq * s.tokens;
  const int64_t L = s.cached + n; // keys this sequence's rows see in all
  const TensorView x = rowsOf(h.x, r0, n), pos = rowsOf(h.pos, r0, n);
  HostTensor n1 = asF32(ref::rmsnorm(x, view_of(h.w1), 1e-6), {n, D});
  HostTensor qkv = asF32(ref::gemm(n1.view(), view_of(h.wqkv), nullptr, ref::Epilogue::none), {n, Nq});
  for (auto [col0, heads] : {std::pair<int64_t, int64_t>{0, H}, {H * hd, G}}) {
    const std::vector<double> r = ref::rope(tokens_view(qkv.view(), col0, heads, hd), view_of(h.cos), view_of(h.sin), pos);
    for (int64_t t = 0; t < n; ++t)
      for (int64_t e = 0; e < heads * hd; ++e) qkv.set(t * Nq + col0 + e, float(r[size_t(t * heads * hd + e)]));
  }
  // K and V as this sequence sees them: its cached positions, then its new rows.
  HostTensor k(DType::f32, {1, G, L, hd}), v(DType::f32, {1, G, L, hd});
  for (int64_t g = 0; g < G; ++g)
    for (int64_t p = 0; p < L; ++p)
      for (int64_t e = 0; e < hd; ++e) {
        const int64_t at = (g * L + p) * hd + e;
        if (p < s.cached) {
          const int64_t c = ((seq * G + g) * s.positions() + p) * hd + e;
          k.set(at, h.kCache.get(c));
          v.set(at, h.vCache.get(c));
        } else {
          const int64_t row = (p - s.cached) * Nq;
          k.set(at, qkv.get(row + (H + g) * hd + e));
          v.set(at, qkv.get(row + (H + G + g) * hd + e));
        }
      }
  HostTensor a(DType::f32, {n, H * hd});
  {
    const std::vector<double> r = ref::attention(heads_view(qkv.view(), 1, 0, H, hd), k.view(), v.view(), /*causal=*/true);
    for (int64_t hh = 0; hh < H; ++hh) // [1, H, n, hd] back to token-major rows
      for (int64_t t = 0; t < n; ++t)
        for (int64_t e = 0; e < hd; ++e) a.set(t * H * hd + hh * hd + e, float(r[size_t((hh * n + t) * hd + e)]));
  }
  HostTensor zero(DType::f32, {D});
  std::memset(zero.data(), 0, size_t(D) * 4);
  const TensorView z = zero.view();
  HostTensor x1 = asF32(ref::gemm(a.view(), view_of(h.wo), &z, ref::Epilogue::bias, &x), {n, D});
  HostTensor n2 = asF32(ref::rmsnorm(x1.view(), view_of(h.w2), 1e-6), {n, D});
  HostTensor hm = asF32(ref::swiglu(n2.view(), view_of(h.wg), view_of(h.wu)), {n, s.mlp});
  const TensorView x1v = x1.view();
  return ref::gemm(hm.view(), view_of(h.wd), &z, ref::Epilogue::bias, &x1v);
}

} // namespace llama
