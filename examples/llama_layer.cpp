// A Llama-style decoder layer (prefill, one sequence) through kiln's catalogue kernels:
//   N1  = rmsnorm(X, w1)                          (T x Dm)          rmsnorm
//   QKV = N1 @ Wqkv                               (T x (H+2G) hd)   gemm
//   Q, K rotated in place by position             ([T, H|G, hd])    rope, over views of QKV
//   A   = causal attention(Q, K, V), GQA          (T x H hd)        attention_causal, views
//   X1  = A @ Wo + X                              (T x Dm)          gemm_bias_residual (bias 0)
//   N2  = rmsnorm(X1, w2)
//   Hm  = silu(N2 @ Wg) * (N2 @ Wu)               (T x F)           swiglu
//   Y   = Hm @ Wd + X1                            (T x Dm)          gemm_bias_residual (bias 0)
// Q, K and V are never copied out of QKV: the kernels take them as strided views of its
// token-major rows, as an engine keeps them. The layer's output is verified against an f32
// reference of the whole layer (each step in f64 from kiln::reference, rounded to f32
// between steps), and the whole layer is timed (model_ms: the median of --reps runs, CUDA
// events on a GPU, caches flushed before each, after warm-up).
//
//   kiln-llama [--backend auto|cpu|cuda] [--tokens T] [--hidden Dm] [--heads H] [--kv-heads G]
//              [--mlp F] [--dtype bf16|f16|f32] [--reps N]
// Defaults: on a GPU a 7-8B model's layer (T=2048, Dm=4096, H=32, G=8, F=14336, bf16); on the
// CPU T=24, Dm=64, H=4, G=2, F=96, f32 (what CI runs).
// Not yet: the framework path (cuBLASLt, cuDNN, separate elementwise kernels) beside it, and
// decode (a K/V cache).
#include <kiln/kiln.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;
using kiln::DType;
using kiln::HostTensor;
using kiln::TensorView;

struct Config {
  std::string backend = "auto", dtype;
  int64_t tokens = 0, hidden = 0, heads = 0, kvHeads = 0, mlp = 0; // 0: the backend's default
  int reps = 10;
};

int64_t positive(const std::string& flag, const char* v) {
  char* end = nullptr;
  const long long x = std::strtoll(v, &end, 10);
  if (!*v || *end || x <= 0) throw kiln::Error(kiln::ErrorKind::InvalidArgument, flag + " takes a positive integer");
  return x;
}

void parse(int argc, char** argv, Config& c) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> const char* {
      if (i + 1 >= argc) throw kiln::Error(kiln::ErrorKind::InvalidArgument, a + " needs a value");
      return argv[++i];
    };
    if (a == "--backend") c.backend = value();
    else if (a == "--dtype") c.dtype = value();
    else if (a == "--tokens") c.tokens = positive(a, value());
    else if (a == "--hidden") c.hidden = positive(a, value());
    else if (a == "--heads") c.heads = positive(a, value());
    else if (a == "--kv-heads") c.kvHeads = positive(a, value());
    else if (a == "--mlp") c.mlp = positive(a, value());
    else if (a == "--reps") c.reps = int(positive(a, value()));
    else throw kiln::Error(kiln::ErrorKind::NotFound, "unknown flag '" + a + "' (see the comment at the top of llama_layer.cpp)");
  }
}

// A view of `base` (a [rows, cols] buffer, token-major) as [1, heads, T, hd]: head h's rows
// start at column `col0 + h hd`, token t at row t. The attention kernels' layout.
TensorView headsView(const TensorView& base, int64_t col0, int64_t heads, int64_t hd) {
  const int64_t T = base.dims[0], row = base.dims[1], es = int64_t(kiln::size_of(base.dtype));
  return {static_cast<uint8_t*>(base.data) + col0 * es, base.dtype, {1, heads, T, hd}, {T * row, hd, row, 1}};
}
// The same columns as rope's [T, heads, hd].
TensorView tokensView(const TensorView& base, int64_t col0, int64_t heads, int64_t hd) {
  const int64_t T = base.dims[0], row = base.dims[1], es = int64_t(kiln::size_of(base.dtype));
  return {static_cast<uint8_t*>(base.data) + col0 * es, base.dtype, {T, heads, hd}, {row, hd, 1}};
}

HostTensor asF32(const std::vector<double>& v, std::vector<int64_t> dims) {
  HostTensor t(DType::f32, std::move(dims));
  for (size_t i = 0; i < v.size(); ++i) t.set(int64_t(i), float(v[i]));
  return t;
}

} // namespace

int main(int argc, char** argv) try {
  Config c;
  parse(argc, argv, c);
  kiln::Runtime rt = kiln::Runtime::create(kiln::parse_backend(c.backend));
  const bool gpu = rt.backend() == kiln::Backend::cuda;
  auto pick = [&](int64_t v, int64_t g, int64_t cpu) { return v ? v : gpu ? g : cpu; };
  const int64_t T = pick(c.tokens, 2048, 24), Dm = pick(c.hidden, 4096, 64), H = pick(c.heads, 32, 4),
                G = pick(c.kvHeads, 8, 2), F = pick(c.mlp, 14336, 96);
  const std::string dtName = c.dtype.empty() ? (gpu ? "bf16" : "f32") : c.dtype;
  const std::optional<DType> parsed = kiln::parse_dtype(dtName);
  if (!parsed) throw kiln::Error(kiln::ErrorKind::InvalidArgument, "--dtype takes bf16, f16 or f32, got '" + dtName + "'");
  const DType dt = *parsed;
  if (Dm % H != 0 || H % G != 0 || (Dm / H) % 2 != 0)
    throw kiln::Error(kiln::ErrorKind::InvalidArgument,
                      "--hidden must be a multiple of --heads with an even head dim, and --heads a multiple of --kv-heads");
  const int64_t hd = Dm / H, Nqkv = (H + 2 * G) * hd;
  std::printf("llama layer: T=%lld Dm=%lld H=%lld G=%lld hd=%lld F=%lld %s on %s\n", (long long)T, (long long)Dm,
              (long long)H, (long long)G, (long long)hd, (long long)F, kiln::to_string(dt), rt.describe().c_str());

  // Weights scaled by 1/sqrt(fan_in), as initialisers do; rmsnorm weights near 1.
  auto weight = [&](std::vector<int64_t> dims, uint64_t seed, float scale) {
    HostTensor t(dt, std::move(dims));
    t.fill_random(seed, -scale, scale);
    return t;
  };
  HostTensor x = weight({T, Dm}, 1, 1.0f), wqkv = weight({Dm, Nqkv}, 2, 1.0f / std::sqrt(float(Dm))),
                   wo = weight({H * hd, Dm}, 3, 1.0f / std::sqrt(float(H * hd))),
                   wg = weight({Dm, F}, 4, 1.0f / std::sqrt(float(Dm))), wu = weight({Dm, F}, 5, 1.0f / std::sqrt(float(Dm))),
                   wd = weight({F, Dm}, 6, 1.0f / std::sqrt(float(F)));
  HostTensor w1(dt, {Dm}), w2(dt, {Dm}), zero(dt, {Dm}), cosT(DType::f32, {T, hd / 2}), sinT(DType::f32, {T, hd / 2}),
      pos(DType::i32, {T});
  w1.fill_random(7, 0.8f, 1.2f);
  w2.fill_random(8, 0.8f, 1.2f);
  std::memset(zero.data(), 0, size_t(Dm) * kiln::size_of(dt));
  for (int64_t t = 0; t < T; ++t) {
    pos.set(t, float(t));
    for (int64_t i = 0; i < hd / 2; ++i) {
      const double a = double(t) * std::pow(10000.0, -2.0 * double(i) / double(hd));
      cosT.set(t * (hd / 2) + i, float(std::cos(a)));
      sinT.set(t * (hd / 2) + i, float(std::sin(a)));
    }
  }

  // The kiln path: every tensor in the runtime's memory, each kernel compiled once.
  namespace cat = kiln::catalogue;
  const std::string target = rt.fingerprint().target;
  auto t0 = Clock::now();
  kiln::CompiledKernel norm = rt.compile(cat::rmsnorm(dt)), proj = rt.compile(cat::gemm(dt)),
                       rope = rt.compile(cat::rope(dt, hd)),
                       attn = rt.compile(cat::kernel_for(cat::find("attention_causal"), dt, {1, H, G, T, hd}, target)),
                       resid = rt.compile(cat::gemm_bias_residual(dt)), mlp = rt.compile(cat::swiglu(dt));
  const double compileMs = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  kiln::DeviceTensor dx = rt.upload(x), dWqkv = rt.upload(wqkv), dWo = rt.upload(wo), dWg = rt.upload(wg),
                     dWu = rt.upload(wu), dWd = rt.upload(wd), dw1 = rt.upload(w1), dw2 = rt.upload(w2),
                     dZero = rt.upload(zero), dCos = rt.upload(cosT), dSin = rt.upload(sinT), dPos = rt.upload(pos),
                     n1 = rt.allocate(dt, {T, Dm}), qkv = rt.allocate(dt, {T, Nqkv}), a = rt.allocate(dt, {T, H * hd}),
                     x1 = rt.allocate(dt, {T, Dm}), n2 = rt.allocate(dt, {T, Dm}), hm = rt.allocate(dt, {T, F}),
                     y = rt.allocate(dt, {T, Dm});
  const TensorView qkvV = qkv.view(), aV = a.view();
  const TensorView qRope = tokensView(qkvV, 0, H, hd), kRope = tokensView(qkvV, H * hd, G, hd);
  const TensorView q = headsView(qkvV, 0, H, hd), k = headsView(qkvV, H * hd, G, hd),
                   v = headsView(qkvV, (H + G) * hd, G, hd), o = headsView(aV, 0, H, hd);
  auto layer = [&] {
    norm.launch({dx.view(), dw1.view(), n1.view()}, nullptr);
    proj.launch({n1.view(), dWqkv.view(), qkvV}, nullptr);
    rope.launch({qRope, dCos.view(), dSin.view(), dPos.view(), qRope}, nullptr);
    rope.launch({kRope, dCos.view(), dSin.view(), dPos.view(), kRope}, nullptr);
    attn.launch({q, k, v, o}, nullptr);
    resid.launch({aV, dWo.view(), dZero.view(), dx.view(), x1.view()}, nullptr);
    norm.launch({x1.view(), dw2.view(), n2.view()}, nullptr);
    mlp.launch({n2.view(), dWg.view(), dWu.view(), hm.view()}, nullptr);
    resid.launch({hm.view(), dWd.view(), dZero.view(), x1.view(), y.view()}, nullptr);
  };
  layer(); // first run: verified
  rt.synchronize();
  HostTensor got(dt, {T, Dm});
  rt.download(y, got);

  // The reference: each step in f64 (kiln::reference), rounded to f32 between steps.
  namespace ref = kiln::reference;
  HostTensor rN1 = asF32(ref::rmsnorm(x.view(), w1.view(), 1e-6), {T, Dm});
  HostTensor rQkv = asF32(ref::gemm(rN1.view(), wqkv.view(), nullptr, ref::Epilogue::none), {T, Nqkv});
  for (auto [col0, heads] : {std::pair<int64_t, int64_t>{0, H}, {H * hd, G}}) {
    const TensorView part = tokensView(rQkv.view(), col0, heads, hd);
    const std::vector<double> r = ref::rope(part, cosT.view(), sinT.view(), pos.view());
    for (int64_t t = 0; t < T; ++t)
      for (int64_t e = 0; e < heads * hd; ++e) rQkv.set(t * Nqkv + col0 + e, float(r[size_t(t * heads * hd + e)]));
  }
  HostTensor rA(DType::f32, {T, H * hd});
  {
    const std::vector<double> r = ref::attention(headsView(rQkv.view(), 0, H, hd), headsView(rQkv.view(), H * hd, G, hd),
                                                 headsView(rQkv.view(), (H + G) * hd, G, hd), /*causal=*/true);
    for (int64_t h = 0; h < H; ++h) // [1, H, T, hd] back to token-major rows
      for (int64_t t = 0; t < T; ++t)
        for (int64_t e = 0; e < hd; ++e) rA.set(t * H * hd + h * hd + e, float(r[size_t((h * T + t) * hd + e)]));
  }
  HostTensor zero32(DType::f32, {Dm});
  std::memset(zero32.data(), 0, size_t(Dm) * 4);
  const TensorView xv = x.view(), z32 = zero32.view();
  HostTensor rX1 = asF32(ref::gemm(rA.view(), wo.view(), &z32, ref::Epilogue::bias, &xv), {T, Dm});
  HostTensor rN2 = asF32(ref::rmsnorm(rX1.view(), w2.view(), 1e-6), {T, Dm});
  HostTensor rH = asF32(ref::swiglu(rN2.view(), wg.view(), wu.view()), {T, F});
  const TensorView x1v = rX1.view();
  const std::vector<double> want = ref::gemm(rH.view(), wd.view(), &z32, ref::Epilogue::bias, &x1v);
  kiln::verify::Report rep = kiln::verify::compare(got.view(), want, kiln::verify::Tolerance::for_dtype(dt));

  // Warm: the whole layer, timed as kiln bench times a kernel (CUDA events on a GPU, the
  // steady clock on the CPU; caches flushed before each run, warm-up first): the median.
  const kiln::profile::TimingOptions timing{c.reps, 2, true};
  const double model = kiln::profile::summarize(kiln::profile::time(rt, layer, timing))->median;
  const double flops = 2.0 * double(T) * (double(Dm) * double(Nqkv) + double(H * hd) * double(Dm) +
                                          3.0 * double(Dm) * double(F)) +
                       4.0 * double(H) * 0.5 * double(T) * double(T) * double(hd);
  std::printf("compile %.1f ms (6 kernels), model_ms %.3f (%.0f tokens/s, %.2f TFLOP/s), %s\n", compileMs, model,
              double(T) / model * 1e3, flops / model * 1e-9, rep.summary().c_str());
  std::printf("model_ok=%s\n", rep.ok ? "true" : "false");
  return rep.ok ? 0 : 1;
} catch (const kiln::Error& e) {
  std::fprintf(stderr, "kiln-llama: %s\n", e.what());
  return 2;
}
