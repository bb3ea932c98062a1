// kiln-llama's two paths through the layer: kiln's kernels, and the framework's library calls
// with its separate elementwise kernels.
#include "llama_layer.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>

namespace llama {

using kiln::DType;
using kiln::TensorView;
using Clock = std::chrono::steady_clock;

namespace {

double msSince(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

// The device copies of what the layer reads and the buffers it writes, shared by both paths'
// builders (each uploads its own form of the gate and up weights). `zero` is a zero bias (kiln's residual GEMM takes one); the caches are decode's.
struct Tensors {
  TensorView x, wqkv, wo, wd, w1, w2, cos, sin, pos, zero, n1, qkv, a, x1, n2, hm, y, kc, vc;
};

Tensors upload(Path& p, const Shape& s, const Host& h, DType dt) {
  auto up = [&](const kiln::HostTensor& t) {
    p.memory.push_back(p.rt.upload(t));
    return p.memory.back().view();
  };
  auto alloc = [&](int64_t rows, int64_t cols) {
    p.memory.push_back(p.rt.allocate(dt, {rows, cols}));
    return p.memory.back().view();
  };
  kiln::HostTensor zero(dt, {s.hidden});
  std::memset(zero.data(), 0, size_t(s.hidden) * kiln::size_of(dt));
  const int64_t R = s.rows(), D = s.hidden;
  Tensors t{up(h.x), up(h.wqkv), up(h.wo), up(h.wd), up(h.w1), up(h.w2), up(h.cos), up(h.sin), up(h.pos), up(zero),
            alloc(R, D), alloc(R, s.qkv()), alloc(R, s.heads * s.hd()), alloc(R, D), alloc(R, D), alloc(R, s.mlp),
            {}, {}, {}};
  p.y = p.rt.allocate(dt, {R, D});
  t.y = p.y.view();
  if (s.decode()) {
    t.kc = up(h.kCache);
    t.vc = up(h.vCache);
  }
  return t;
}

// Where attention reads Q, K and V and writes O: views of QKV's rows in prefill; in decode
// K and V are the cache's first positions() positions, the new token's written by the step.
struct AttentionViews {
  TensorView q, k, v, o;
};
AttentionViews attentionViews(const Shape& s, const Tensors& t) {
  const int64_t H = s.heads, G = s.kvHeads, hd = s.hd(), B = s.batch;
  if (s.decode())
    return {heads_view(t.qkv, B, 0, H, hd), cache_prefix(t.kc, s.positions()), cache_prefix(t.vc, s.positions()),
            heads_view(t.a, B, 0, H, hd)};
  return {heads_view(t.qkv, B, 0, H, hd), heads_view(t.qkv, B, H * hd, G, hd), heads_view(t.qkv, B, (H + G) * hd, G, hd),
          heads_view(t.a, B, 0, H, hd)};
}

// The engine's own kernel for decode (not in kiln's catalogue): the new token's K rotated
// by RoPE and written into the cache at its position, its V copied beside it, one program
// per token and 8 K/V heads. Kc and Vc are views of the caches' slots ([T, G, D], strided).
kiln::Kernel ropeKvIntoCache(DType dt, int64_t hd) {
  using namespace kiln::dsl;
  return kernel("rope_kv_into_cache", [=](Builder& k) {
    auto [T, G, P] = k.dims("T", "G", "P");
    const int64_t half = hd / 2, heads = 8;
    auto K = k.input("K", {T, G, hd}, dt), V = k.input("V", {T, G, hd}, dt);
    auto Cos = k.input("Cos", {P, half}, f32), Sin = k.input("Sin", {P, half}, f32);
    auto Positions = k.input("Positions", {T}, i32);
    auto Kc = k.output("Kc", {T, G, hd}, dt), Vc = k.output("Vc", {T, G, hd}, dt);
    k.grid({T, cdiv(G, heads)}, [&](Index tok, Index hb) {
      Index pos = k.read(Positions, {tok});
      Index z = k.constant(0), one = k.constant(1);
      Tile c = k.load(Cos.tile({pos, z}, {half})), s = k.load(Sin.tile({pos, z}, {half}));
      Tile x1 = cast(k.load(K.tile({tok, hb, z}, {heads, half})), f32);
      Tile x2 = cast(k.load(K.tile({tok, hb, one}, {heads, half})), f32);
      k.store(Kc.tile({tok, hb, z}, {heads, half}), cast(x1 * rows(c) - x2 * rows(s), dt));
      k.store(Kc.tile({tok, hb, one}, {heads, half}), cast(x2 * rows(c) + x1 * rows(s), dt));
      k.store(Vc.tile({tok, hb, z}, {heads, hd}), k.load(V.tile({tok, hb, z}, {heads, hd})));
    });
  });
}

} // namespace

void build_kiln(Path& p, const Shape& s, const Host& h, DType dt) {
  namespace cat = kiln::catalogue;
  const Tensors t = upload(p, s, h, dt);
  p.memory.push_back(p.rt.upload(h.wg));
  const TensorView wg = p.memory.back().view();
  p.memory.push_back(p.rt.upload(h.wu));
  const TensorView wu = p.memory.back().view();
  const int64_t H = s.heads, G = s.kvHeads, hd = s.hd(), B = s.batch;
  const std::string target = p.rt.fingerprint().target;
  auto compile = [&](const kiln::Kernel& k) { return std::make_shared<kiln::CompiledKernel>(p.rt.compile(k)); };
  const auto t0 = Clock::now();
  const kiln::Kernel attention =
      s.decode() ? cat::kernel_for(cat::find("attention_decode"), dt, {B, H, G, s.tokens, s.positions(), hd}, target)
                 : cat::kernel_for(cat::find("attention_causal"), dt, {B, H, G, s.tokens, hd}, target);
  // RMSNorm's tiles by the rows it normalises, as an engine picks per phase: few rows (decode)
  // take one row a program over 2048 columns a step (H200, bf16, N = 4096, 16 rows: 6.6 us
  // against 19.6 with the default 4 x 256); many (prefill) keep the default (2048 rows: 27.4
  // against 39.6). docs/benchmarks/2026-12-04-h200-llama-layer/README.md.
  const cat::RowTiles normTiles = s.rows() <= 512 ? cat::RowTiles{1, 2048} : cat::RowTiles{};
  auto norm = compile(cat::rmsnorm(dt, 1e-6, normTiles)), proj = compile(cat::gemm(dt)), rope = compile(cat::rope(dt, hd)),
       attn = compile(attention), resid = compile(cat::gemm_bias_residual(dt)), mlp = compile(cat::swiglu(dt));
  auto kv = s.decode() ? compile(ropeKvIntoCache(dt, hd)) : nullptr;
  p.compile_ms = msSince(t0);

  const TensorView q = tokens_view(t.qkv, 0, H, hd), k = tokens_view(t.qkv, H * hd, G, hd),
                   v = tokens_view(t.qkv, (H + G) * hd, G, hd);
  const AttentionViews av = attentionViews(s, t);
  p.steps = {
      {"attn_norm", [=] { norm->launch({t.x, t.w1, t.n1}, nullptr); }},
      {"qkv", [=] { proj->launch({t.n1, t.wqkv, t.qkv}, nullptr); }},
      {"rope",
       [=] {
         rope->launch({q, t.cos, t.sin, t.pos, q}, nullptr);
         if (kv) // decode: K rotated straight into the cache, V beside it
           kv->launch({k, v, t.cos, t.sin, t.pos, cache_slot(t.kc, s.cached), cache_slot(t.vc, s.cached)}, nullptr);
         else
           rope->launch({k, t.cos, t.sin, t.pos, k}, nullptr);
       }},
      {"attention", [=] { attn->launch({av.q, av.k, av.v, av.o}, nullptr); }},
      {"o_proj", [=] { resid->launch({t.a, t.wo, t.zero, t.x, t.x1}, nullptr); }},
      {"mlp_norm", [=] { norm->launch({t.x1, t.w2, t.n2}, nullptr); }},
      {"gate_up", [=] { mlp->launch({t.n2, wg, wu, t.hm}, nullptr); }},
      {"down", [=] { resid->launch({t.hm, t.wd, t.zero, t.x1, t.y}, nullptr); }},
  };
}

namespace {

// The framework's elementwise kernels, as an engine built on a framework has them (one
// launch each, f32 math, 256 threads): compiled once with NVRTC, counted as import.
//   -DT_CODE=0|1|2: f32 | bf16 | f16
const char* kFrameworkCu = R"CUDA(
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#if T_CODE == 1
typedef __nv_bfloat16 T;
__device__ __forceinline__ float toF(T x) { return __bfloat162float(x); }
__device__ __forceinline__ T fromF(float x) { return __float2bfloat16(x); }
#elif T_CODE == 2
typedef __half T;
__device__ __forceinline__ float toF(T x) { return __half2float(x); }
__device__ __forceinline__ T fromF(float x) { return __float2half(x); }
#else
typedef float T;
__device__ __forceinline__ float toF(T x) { return x; }
__device__ __forceinline__ T fromF(float x) { return x; }
#endif

// One block per row: y = x / sqrt(mean(x^2) + eps) * w.
extern "C" __global__ void __launch_bounds__(256) rmsnorm(const T* x, const T* w, T* y, int n, float eps) {
  const T* xr = x + size_t(blockIdx.x) * n;
  T* yr = y + size_t(blockIdx.x) * n;
  float ss = 0.0f;
  for (int i = threadIdx.x; i < n; i += 256) { const float v = toF(xr[i]); ss += v * v; }
  for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
  __shared__ float part[8];
  if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = ss;
  __syncthreads();
  float total = 0.0f;
  for (int i = 0; i < 8; ++i) total += part[i];
  const float r = rsqrtf(total / float(n) + eps);
  for (int i = threadIdx.x; i < n; i += 256) yr[i] = fromF(toF(xr[i]) * r * toF(w[i]));
}

// One block per token: RoPE (rotate-half) in place over the first `heads` heads of its row.
extern "C" __global__ void __launch_bounds__(256) rope(T* x, const float* cs, const float* sn, const int* pos,
                                                      int heads, int hd, int ld) {
  const int half = hd / 2, p = pos[blockIdx.x];
  T* row = x + size_t(blockIdx.x) * ld;
  for (int i = threadIdx.x; i < heads * half; i += 256) {
    T* a = row + (i / half) * hd + i % half;
    const float c = cs[size_t(p) * half + i % half], s = sn[size_t(p) * half + i % half];
    const float x1 = toF(a[0]), x2 = toF(a[half]);
    a[0] = fromF(x1 * c - x2 * s);
    a[half] = fromF(x2 * c + x1 * s);
  }
}

// One block per sequence: its new token's K and V (kv heads x hd each, from its QKV row)
// into the caches [B, G, P, hd] at position `at`.
extern "C" __global__ void __launch_bounds__(256) cache_kv(const T* qkv, T* kc, T* vc, int ld, int kcol, int vcol,
                                                          int g, int hd, int p, int at) {
  const T* row = qkv + size_t(blockIdx.x) * ld;
  for (int i = threadIdx.x; i < g * hd; i += 256) {
    const size_t c = (size_t(blockIdx.x) * g + i / hd) * p * hd + size_t(at) * hd + i % hd;
    kc[c] = row[kcol + i];
    vc[c] = row[vcol + i];
  }
}

// h = silu(gu[:, :f]) * gu[:, f:], gu the one GEMM over [Wg | Wu].
extern "C" __global__ void __launch_bounds__(256) silu_mul(const T* gu, T* h, int m, int f) {
  const int col = blockIdx.x * 256 + threadIdx.x;
  if (col >= f) return;
  for (int row = blockIdx.y; row < m; row += gridDim.y) {
    const float g = toF(gu[size_t(row) * 2 * f + col]), u = toF(gu[size_t(row) * 2 * f + f + col]);
    h[size_t(row) * f + col] = fromF(g / (1.0f + __expf(-g)) * u);
  }
}
)CUDA";

int32_t i32(int64_t v) { return int32_t(v); }

} // namespace

void build_framework(Path& p, const Shape& s, const Host& h, DType dt) {
  using kiln::reference::Epilogue;
  const Tensors t = upload(p, s, h, dt);
  const int64_t R = s.rows(), D = s.hidden, H = s.heads, G = s.kvHeads, hd = s.hd(), F = s.mlp;
  // Gate and up as one GEMM, as engines merge them: [Wg | Wu], [D, 2F].
  kiln::HostTensor wguHost(dt, {D, 2 * F});
  const size_t rowBytes = size_t(F) * kiln::size_of(dt);
  auto* to = static_cast<uint8_t*>(wguHost.data());
  for (int64_t r = 0; r < D; ++r) { // row r: Wg's row r, then Wu's
    std::memcpy(to + 2 * r * rowBytes, static_cast<const uint8_t*>(h.wg.data()) + r * rowBytes, rowBytes);
    std::memcpy(to + (2 * r + 1) * rowBytes, static_cast<const uint8_t*>(h.wu.data()) + r * rowBytes, rowBytes);
  }
  p.memory.push_back(p.rt.upload(wguHost));
  const TensorView wgu = p.memory.back().view();
  p.memory.push_back(p.rt.allocate(dt, {R, 2 * F}));
  const TensorView gu = p.memory.back().view();

  const auto t0 = Clock::now();
  auto build = [&](const char* entry) {
    kiln::CudaSource src{"llama_framework.cu", kFrameworkCu, entry,
                         {"-DT_CODE=" + std::to_string(dt == DType::bf16 ? 1 : dt == DType::f16 ? 2 : 0)}};
    return std::make_shared<kiln::HandwrittenKernel>(kiln::compile_cuda(p.rt, src));
  };
  auto norm = build("rmsnorm"), rope = build("rope"), cache = build("cache_kv"), silu = build("silu_mul");
  p.import_ms = msSince(t0);

  const kiln::Runtime* rt = &p.rt;
  const AttentionViews av = attentionViews(s, t);
  const unsigned rows = unsigned(R), block = 256;
  p.steps = {
      {"attn_norm", [=] { norm->launch({rows}, {block}, 0, {t.x, t.w1, t.n1, i32(D), 1e-6f}); }},
      {"qkv", [=] { kiln::reference::gpu_gemm_async(*rt, t.n1, t.wqkv, nullptr, Epilogue::none, t.qkv, nullptr, nullptr); }},
      {"rope",
       [=] {
         rope->launch({rows}, {block}, 0, {t.qkv, t.cos, t.sin, t.pos, i32(H + G), i32(hd), i32(s.qkv())});
         if (s.decode())
           cache->launch({unsigned(s.batch)}, {block}, 0,
                         {t.qkv, t.kc, t.vc, i32(s.qkv()), i32(H * hd), i32((H + G) * hd), i32(G), i32(hd),
                          i32(s.positions()), i32(s.cached)});
       }},
      {"attention", [=] { kiln::reference::gpu_attention_async(*rt, av.q, av.k, av.v, true, av.o, nullptr, nullptr); }},
      {"o_proj", [=] { kiln::reference::gpu_gemm_async(*rt, t.a, t.wo, nullptr, Epilogue::none, t.x1, &t.x, nullptr); }},
      {"mlp_norm", [=] { norm->launch({rows}, {block}, 0, {t.x1, t.w2, t.n2, i32(D), 1e-6f}); }},
      {"gate_up",
       [=] {
         kiln::reference::gpu_gemm_async(*rt, t.n2, wgu, nullptr, Epilogue::none, gu, nullptr, nullptr);
         silu->launch({unsigned((F + 255) / 256), unsigned(std::min<int64_t>(R, 65535))}, {block}, 0,
                      {gu, t.hm, i32(R), i32(F)});
       }},
      {"down", [=] { kiln::reference::gpu_gemm_async(*rt, t.hm, t.wd, nullptr, Epilogue::none, t.y, &t.x1, nullptr); }},
  };
}

} // namespace llama
