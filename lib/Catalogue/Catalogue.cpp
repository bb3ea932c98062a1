#include "kiln/catalogue.hpp"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cmath>
#include <functional>
#include <limits>

#include "kiln/error.hpp"
#include "kiln/reference.hpp"

namespace kiln::catalogue {

namespace detail {
Handwritten gemmHandwritten(DType dtype, reference::Epilogue epilogue); // Handwritten.cpp
}

std::vector<TensorView> Problem::views() {
  std::vector<TensorView> v;
  for (auto& a : args) v.push_back(a.view());
  return v;
}

namespace {

// Seeds per argument differ so A and B never hold the same numbers.
HostTensor random(DType dt, std::vector<int64_t> dims, uint64_t seed) {
  HostTensor t(dt, std::move(dims));
  t.fill_random(seed);
  return t;
}
HostTensor poisoned(DType dt, std::vector<int64_t> dims) {
  HostTensor t(dt, std::move(dims));
  t.poison();
  return t;
}

// Arguments A, B[, bias][, R], C; a residual goes with Epilogue::bias.
Problem gemmProblem(const std::vector<int64_t>& s, DType dt, uint64_t seed, reference::Epilogue epi,
                    const Runtime* gpu = nullptr) {
  int64_t M = s[0], N = s[1], K = s[2];
  const bool residual = epi == reference::Epilogue::bias;
  Problem p;
  p.args.push_back(random(dt, {M, K}, seed));
  p.args.push_back(random(dt, {K, N}, seed + 1));
  if (epi != reference::Epilogue::none) p.args.push_back(random(dt, {N}, seed + 2));
  if (residual) p.args.push_back(random(dt, {M, N}, seed + 3));
  p.args.push_back(poisoned(dt, {M, N}));
  p.output = p.args.size() - 1;
  TensorView a = p.args[0].view(), b = p.args[1].view();
  TensorView bias = epi != reference::Epilogue::none ? p.args[2].view() : TensorView{};
  TensorView r = residual ? p.args[3].view() : TensorView{};
  p.flops = 2.0 * M * N * K;
  if (!gpu) {
    p.reference = reference::gemm(a, b, epi != reference::Epilogue::none ? &bias : nullptr, epi, residual ? &r : nullptr);
    return p;
  }
  // cuBLASLt on the device, into a copy of the (poisoned) output, read back as doubles.
  DeviceProblem d = upload(*gpu, p);
  const TensorView* dbias = epi != reference::Epilogue::none ? &d.views[2] : nullptr;
  reference::gpu_gemm(*gpu, d.views[0], d.views[1], dbias, epi, d.views[p.output], residual ? &d.views[3] : nullptr);
  HostTensor c(dt, {M, N});
  gpu->download(d.tensors[p.output], c);
  p.reference.resize(size_t(M * N));
  for (int64_t i = 0; i < M * N; ++i) p.reference[size_t(i)] = c.get(i);
  return p;
}

// The heads an attention problem may have: H a multiple of G, D one the catalogue builds.
void checkHeads(const std::string& name, int64_t H, int64_t G, int64_t D) {
  if (H % G != 0)
    throw Error(ErrorKind::InvalidArgument, name + ": the query heads H (" + std::to_string(H) +
                                                ") must be a multiple of the K/V heads G (" + std::to_string(G) + ")");
  if (D != 32 && D != 64 && D != 128)
    throw Error(ErrorKind::Unsupported, name + ": head dim D = " + std::to_string(D) + " (the catalogue's "
                                        "attention is built for D = 32, 64 or 128)");
}

// Arguments Q, K, V, O for B heads-of-batch x H query heads x G K/V heads, T queries (the
// last of the S positions) and head dim D. Every output row is checked against the f64 host
// reference while that costs at most 2^31 multiply-adds; past that, 256 rows spread over
// every batch, head and position (the first and last rows of the sequence among them), the
// whole reference taking minutes at the benchmark's sizes.
Problem attentionProblem(const std::string& name, int64_t B, int64_t H, int64_t G, int64_t T, int64_t S, int64_t D,
                         DType dt, uint64_t seed, bool causal, bool lse = false) {
  checkHeads(name, H, G, D);
  if (T > S)
    throw Error(ErrorKind::InvalidArgument, name + ": T = " + std::to_string(T) + " queries past the cache's S = " +
                                                std::to_string(S) + " positions (the queries are the last T of S)");
  Problem p;
  p.args.push_back(random(dt, {B, H, T, D}, seed));
  p.args.push_back(random(dt, {B, G, S, D}, seed + 1));
  p.args.push_back(random(dt, {B, G, S, D}, seed + 2));
  p.args.push_back(poisoned(dt, {B, H, T, D}));
  p.output = 3;
  // Q K^T and P V: 2 * D multiply-adds per (query, visible key) pair. Causal: query r of T
  // sees r + S - T + 1 keys, T S - T (T - 1) / 2 pairs (S^2 / 2 + S / 2 at T = S, counted
  // as S^2 / 2 like FlashAttention's papers).
  const double pairs = !causal ? double(T) * double(S)
                       : T == S ? 0.5 * double(S) * double(S)
                                : double(T) * double(S) - 0.5 * double(T) * double(T - 1);
  p.flops = 4.0 * double(B) * double(H) * pairs * double(D);
  const int64_t rows = B * H * T;
  std::vector<int64_t> sample;
  if (2.0 * double(rows) * double(S) * double(D) > double(int64_t(1) << 31)) {
    const int64_t n = std::min<int64_t>(rows, 256);
    for (int64_t k = 0; k < n; ++k) sample.push_back(k * (rows - 1) / std::max<int64_t>(n - 1, 1));
    sample.push_back(T - 1); // the first head's last query row, under causal its longest
    for (int64_t r : sample)
      for (int64_t d = 0; d < D; ++d) p.checked.push_back(r * D + d);
  }
  std::vector<double> lseReference;
  p.reference = reference::attention(p.args[0].view(), p.args[1].view(), p.args[2].view(), causal, sample,
                                     lse ? &lseReference : nullptr);
  if (lse) { // LSE [B, H, T]: its flat index is O's row
    p.args.push_back(poisoned(DType::f32, {B, H, T}));
    p.more_outputs.push_back({"LSE", 4, std::move(lseReference), sample});
  }
  return p;
}

// The framework's attention over a Problem's arguments Q, K, V, O (and LSE): cuDNN's.
std::function<void(const Runtime&, const std::vector<TensorView>&, void*)> cudnnAttention(bool causal, bool lse) {
  return [causal, lse](const Runtime& rt, const std::vector<TensorView>& v, void* stream) {
    reference::gpu_attention_async(rt, v.at(0), v.at(1), v.at(2), causal, v.at(3), lse ? &v.at(4) : nullptr, stream);
  };
}

// The framework's attention over padded sequences (Q, K, V, Lens, O): cuDNN's, with its
// padding mask.
std::function<void(const Runtime&, const std::vector<TensorView>&, void*)> cudnnPaddedAttention(bool causal) {
  return [causal](const Runtime& rt, const std::vector<TensorView>& v, void* stream) {
    reference::gpu_attention_padded_async(rt, v.at(0), v.at(1), v.at(2), v.at(3), causal, v.at(4), stream);
  };
}

// The framework's attention over packed sequences (Q, K, V, Offsets, O): cuDNN's ragged
// tensors with its padding mask, its plan made for sequences of at most `maxLen` tokens (0:
// as many as the tensors hold, which serves any problem).
std::function<void(const Runtime&, const std::vector<TensorView>&, void*)> cudnnPackedAttention(bool causal,
                                                                                               int64_t maxLen) {
  return [causal, maxLen](const Runtime& rt, const std::vector<TensorView>& v, void* stream) {
    const int64_t bound = maxLen > 0 ? std::min(maxLen, v.at(0).dims.at(1)) : v.at(0).dims.at(1);
    reference::gpu_attention_packed_async(rt, v.at(0), v.at(1), v.at(2), v.at(3), bound, causal, v.at(4), stream);
  };
}

// The padded entries' framework: the shape's bound on the lengths is their tensors' own.
std::function<void(const Runtime&, const std::vector<TensorView>&, void*)> cudnnPaddedFramework(bool causal, int64_t) {
  return cudnnPaddedAttention(causal);
}

// f32 has no tensor-core path: its products run on the CUDA cores, and 64 x 64 tiles would
// not fit the registers (16 x 16 leaves a margin: 32 x 32 spills). On sm_90a the sm_90a
// twin runs the 16-bit kernels with 128 keys a step: at head dim 128 (H200, 2026-12-02, B4
// H32 S4096 D128 bf16: 567 against 480 TFLOP/s with 64; causal 460 against 422), at head
// dim 64 with three programs a CTA (H200, 2026-12-03, B4 H32 S4096 D64 bf16: 515 against
// 456 with 64 keys; docs/benchmarks/2026-12-03-h200-attention-fence), and over a K/V cache
// (`decode`), where a step streams the cache once and bytes per step are what count
// (docs/benchmarks/2026-12-02-h200-attention-decode). Elsewhere the portable kernel's 64
// keys (at 128 it needs 153 KiB of shared memory, more than sm_86/89 have, and spills).
AttentionTiles attentionTiles(DType d, const std::string& target = "") {
  if (d == DType::f32) return {16, 16};
  return target == "sm_90a" ? AttentionTiles{64, 128} : AttentionTiles{64, 64};
}

// attention_padded and attention_packed run the portable kernel off sm_90a: 64 query rows and 32 keys a step, where 64 keys spill on sm_80 and sm_90a at head dim 128 (the
// windows' bounds take registers the plain kernel has free).
AttentionTiles packedTiles(DType d) { return d == DType::f32 ? AttentionTiles{16, 16} : AttentionTiles{64, 32}; }

// B sequence lengths: the first S, the others drawn from the seed in 1 .. S.
std::vector<int64_t> sequenceLengths(int64_t B, int64_t S, uint64_t seed) {
  std::vector<int64_t> lens;
  uint64_t state = seed * 0x9E3779B97F4A7C15ull + 1;
  for (int64_t n = 0; n < B; ++n) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    lens.push_back(n == 0 ? S : 1 + int64_t((state >> 33) % uint64_t(S)));
  }
  return lens;
}

// The (query, key) pairs of sequences of `lens` tokens: L^2 each, half under a causal mask.
double sequencePairs(const std::vector<int64_t>& lens, bool causal) {
  double pairs = 0;
  for (int64_t L : lens) pairs += double(L) * double(L);
  return causal ? 0.5 * pairs : pairs;
}

// Whether a problem's whole f64 host reference would take too long (2 H D sum of L^2 past
// 2^31 multiply-adds): then it is checked on a sample of rows.
bool sampleReference(int64_t H, int64_t D, const std::vector<int64_t>& lens) {
  return 2.0 * double(H) * sequencePairs(lens, false) * double(D) > double(int64_t(1) << 31);
}

// Element `element` of a host tensor, as a view's data pointer.
void* elementAt(const HostTensor& t, int64_t element) {
  return static_cast<char*>(const_cast<void*>(t.data())) + element * size_of(t.dtype());
}

// One sequence's attention reference (q [1, H, len, D], k and v [1, G, len, D]): every row,
// or (`sampled`) four of each head's, its first, last and two between; put(h, i, d, value)
// for each element.
void sequenceReference(const TensorView& q, const TensorView& k, const TensorView& v, bool causal, bool sampled,
                       const std::function<void(int64_t, int64_t, int64_t, double)>& put) {
  const int64_t H = q.dims[1], len = q.dims[2], D = q.dims[3];
  std::vector<int64_t> rows; // of [H, len]; empty: all
  if (sampled)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t r = 0; r < 4; ++r) rows.push_back(h * len + (r == 3 ? len - 1 : r * (len - 1) / 3));
  const std::vector<double> out = reference::attention(q, k, v, causal, rows);
  const int64_t count = sampled ? int64_t(rows.size()) : H * len;
  for (int64_t r = 0; r < count; ++r) {
    const int64_t row = sampled ? rows[size_t(r)] : r;
    for (int64_t d = 0; d < D; ++d) put(row / len, row % len, d, out[size_t(r * D + d)]);
  }
}

// attention_padded's problem: B sequences padded to S, the first S long and the others of
// lengths drawn from the seed in 1 .. S (Lens); K and V past each length a thousand times
// their random values (a padded key let into a softmax, or a padded value row into a product
// with a weight other than 0, would swamp the result), Q random there. Finite, not NaN: a
// framework reads the padding's V rows too and multiplies them by zero weights (cuDNN's
// padding mask does), which is right for any finite padding; kiln's windows read zeros there
// and its own tests put NaN in it (test_gpu_kernels.cpp). The reference holds
// each sequence's rows (every one where the problem is small, a sample of every head's
// otherwise): the padding's rows are not checked.
Problem paddedAttentionProblem(const std::string& name, int64_t B, int64_t H, int64_t G, int64_t S, int64_t D,
                               DType dt, uint64_t seed, bool causal) {
  checkHeads(name, H, G, D);
  const std::vector<int64_t> lens = sequenceLengths(B, S, seed);
  Problem p;
  p.args.push_back(random(dt, {B, H, S, D}, seed));
  p.args.push_back(random(dt, {B, G, S, D}, seed + 1));
  p.args.push_back(random(dt, {B, G, S, D}, seed + 2));
  HostTensor l(DType::i32, {B});
  for (int64_t n = 0; n < B; ++n) {
    l.set(n, float(lens[size_t(n)]));
    for (int64_t g = 0; g < G; ++g)
      for (int64_t e = ((n * G + g) * S + lens[size_t(n)]) * D; e < (n * G + g + 1) * S * D; ++e)
        p.args[1].set(e, 1000.0f * p.args[1].get(e)), p.args[2].set(e, 1000.0f * p.args[2].get(e));
  }
  p.args.push_back(std::move(l));
  p.args.push_back(poisoned(dt, {B, H, S, D}));
  p.output = 4;
  p.flops = 4.0 * double(H) * sequencePairs(lens, causal) * double(D);
  const bool sampled = sampleReference(H, D, lens);
  for (int64_t n = 0; n < B; ++n) {
    const int64_t len = lens[size_t(n)];
    for (int64_t h = 0; h < H; ++h)
      if (len < S) p.padding.push_back({((n * H + h) * S + len) * D, (n * H + h + 1) * S * D});
    auto seq = [&](const HostTensor& t, int64_t heads) {
      return TensorView{elementAt(t, n * heads * S * D), dt, {1, heads, len, D}, {heads * S * D, S * D, D, 1}};
    };
    sequenceReference(seq(p.args[0], H), seq(p.args[1], G), seq(p.args[2], G), causal, sampled,
                      [&](int64_t h, int64_t i, int64_t d, double v) {
                        p.checked.push_back(((n * H + h) * S + i) * D + d);
                        p.reference.push_back(v);
                      });
  }
  return p;
}

// attention_packed's problem: B sequences of at most S tokens packed end to end, the first S
// long and the others of lengths drawn from the seed in 1 .. S; Q, K, V and O head-major
// [heads, T, D] (one contiguous view; an engine's token-major memory is the same kernel with
// other strides). The reference is each sequence's attention alone, scattered into O's
// layout: every element where the problem is small, a sample of rows of every sequence and
// head otherwise.
Problem packedAttentionProblem(const std::string& name, int64_t B, int64_t H, int64_t G, int64_t S, int64_t D,
                               DType dt, uint64_t seed, bool causal) {
  checkHeads(name, H, G, D);
  if (S > std::numeric_limits<int32_t>::max() / std::max<int64_t>(B, 1))
    throw Error(ErrorKind::InvalidArgument, name + ": B x S = " + std::to_string(B) + " x " + std::to_string(S) +
                                                " tokens do not fit the i32 offsets");
  std::vector<int64_t> offsets{0};
  for (int64_t len : sequenceLengths(B, S, seed)) offsets.push_back(offsets.back() + len);
  const int64_t T = offsets.back();
  Problem p;
  p.args.push_back(random(dt, {H, T, D}, seed));
  p.args.push_back(random(dt, {G, T, D}, seed + 1));
  p.args.push_back(random(dt, {G, T, D}, seed + 2));
  HostTensor off(DType::i32, {B + 1});
  for (int64_t n = 0; n <= B; ++n) off.set(n, float(offsets[size_t(n)]));
  p.args.push_back(std::move(off));
  p.args.push_back(poisoned(dt, {H, T, D}));
  p.output = 4;
  std::vector<int64_t> lens;
  for (int64_t n = 0; n < B; ++n) lens.push_back(offsets[size_t(n) + 1] - offsets[size_t(n)]);
  p.flops = 4.0 * double(H) * sequencePairs(lens, causal) * double(D);
  const bool sampled = sampleReference(H, D, lens);
  std::vector<double> whole(sampled ? 0 : size_t(H * T * D));
  for (int64_t n = 0; n < B; ++n) {
    const int64_t first = offsets[size_t(n)], len = offsets[size_t(n) + 1] - first;
    // Sequence n alone, as [1, heads, len, D] views into the packed tensors.
    auto seq = [&](const HostTensor& t, int64_t heads) {
      return TensorView{elementAt(t, first * D), dt, {1, heads, len, D}, {heads * T * D, T * D, D, 1}};
    };
    sequenceReference(seq(p.args[0], H), seq(p.args[1], G), seq(p.args[2], G), causal, sampled,
                      [&](int64_t h, int64_t i, int64_t d, double v) {
                        const int64_t element = (h * T + first + i) * D + d;
                        if (sampled) p.checked.push_back(element), p.reference.push_back(v);
                        else whole[size_t(element)] = v;
                      });
  }
  if (!sampled) p.reference = std::move(whole);
  return p;
}

std::vector<Entry> makeAll() {
  using reference::Epilogue;
  std::vector<Entry> e;
  auto gemmEntry = [&](std::string name, std::string summary, Kernel (*make)(DType, GemmTiles),
                       Epilogue epi) {
    e.push_back({name, summary, "MxNxK", 3, [make](DType d) { return make(d, GemmTiles{}); },
                 [epi](const std::vector<int64_t>& s, DType d, uint64_t seed) {
                   return gemmProblem(s, d, seed, epi);
                 },
                 epi == Epilogue::bias ? std::function<Handwritten(DType)>()
                                       : [epi](DType d) { return detail::gemmHandwritten(d, epi); },
                 [make](DType d, GemmTiles t) { return make(d, t); },
                 [epi](const Runtime& rt, const std::vector<int64_t>& s, DType d, uint64_t seed) {
                   return gemmProblem(s, d, seed, epi, &rt);
                 }});
  };
  gemmEntry("gemm", "C = A @ B (f32 accumulate)", gemm, Epilogue::none);
  gemmEntry("gemm_bias_relu", "C = relu(A @ B + bias)", gemm_bias_relu, Epilogue::bias_relu);
  gemmEntry("gemm_bias_gelu", "C = gelu(A @ B + bias), tanh approximation", gemm_bias_gelu,
            Epilogue::bias_gelu);
  gemmEntry("gemm_bias_residual", "C = A @ B + bias + R (R: the residual, M x N)", gemm_bias_residual,
            Epilogue::bias);
  e.push_back({"softmax", "Y = softmax(X) along each row (online, any N)", "MxN", 2,
               [](DType d) { return softmax(d); },
               [](const std::vector<int64_t>& s, DType d, uint64_t seed) {
                 Problem p;
                 p.args.push_back(random(d, {s[0], s[1]}, seed));
                 p.args.push_back(poisoned(d, {s[0], s[1]}));
                 p.output = 1;
                 p.reference = reference::softmax(p.args[0].view());
                 p.flops = 5.0 * s[0] * s[1];
                 return p;
               }});
  e.push_back({"add", "Z = X + Y elementwise", "MxN", 2, [](DType d) { return add(d); },
               [](const std::vector<int64_t>& s, DType d, uint64_t seed) {
                 Problem p;
                 p.args.push_back(random(d, {s[0], s[1]}, seed));
                 p.args.push_back(random(d, {s[0], s[1]}, seed + 1));
                 p.args.push_back(poisoned(d, {s[0], s[1]}));
                 p.output = 2;
                 p.reference = reference::add(p.args[0].view(), p.args[1].view());
                 p.flops = 1.0 * s[0] * s[1];
                 return p;
               }});
  e.push_back({"rmsnorm", "Y = X / sqrt(mean(X^2) + 1e-6) * W per row", "MxN", 2,
               [](DType d) { return rmsnorm(d); },
               [](const std::vector<int64_t>& s, DType d, uint64_t seed) {
                 Problem p;
                 p.args.push_back(random(d, {s[0], s[1]}, seed));
                 p.args.push_back(random(d, {s[1]}, seed + 1));
                 p.args.push_back(poisoned(d, {s[0], s[1]}));
                 p.output = 2;
                 p.reference = reference::rmsnorm(p.args[0].view(), p.args[1].view(), 1e-6);
                 p.flops = 4.0 * s[0] * s[1];
                 return p;
               }});
  e.push_back({"swiglu", "H = silu(X @ Wg) * (X @ Wu): a SwiGLU MLP's gate and up projections in one kernel",
               "MxNxK", 3, [](DType d) { return swiglu(d); },
               [](const std::vector<int64_t>& s, DType d, uint64_t seed) {
                 const int64_t M = s[0], N = s[1], K = s[2];
                 Problem p;
                 p.args.push_back(random(d, {M, K}, seed));
                 p.args.push_back(random(d, {K, N}, seed + 1));
                 p.args.push_back(random(d, {K, N}, seed + 2));
                 p.args.push_back(poisoned(d, {M, N}));
                 p.output = 3;
                 p.reference = reference::swiglu(p.args[0].view(), p.args[1].view(), p.args[2].view());
                 p.flops = 4.0 * double(M) * double(N) * double(K); // two products
                 return p;
               }});
  {
    // RoPE over T tokens of H heads, tables of T + 16 positions (theta_i = 10000^(-2i/D)), each
    // token at a position drawn from the seed: the gather by position is what is tested.
    Entry r{"rope", "Y = RoPE(X): each head's halves rotated by cos/sin of its token's position (Llama's)", "TxHxD",
            3, [](DType d) { return rope(d, 128); },
            [](const std::vector<int64_t>& s, DType d, uint64_t seed) {
              const int64_t T = s[0], H = s[1], D = s[2], P = T + 16;
              if (D < 2 || D % 2 != 0)
                throw Error(ErrorKind::InvalidArgument, "rope: the head dim D must be even, got " + std::to_string(D));
              Problem p;
              p.args.push_back(random(d, {T, H, D}, seed));
              HostTensor c(DType::f32, {P, D / 2}), sn(DType::f32, {P, D / 2}), pos(DType::i32, {T});
              for (int64_t q = 0; q < P; ++q)
                for (int64_t i = 0; i < D / 2; ++i) {
                  const double a = double(q) * std::pow(10000.0, -2.0 * double(i) / double(D));
                  c.set(q * (D / 2) + i, float(std::cos(a)));
                  sn.set(q * (D / 2) + i, float(std::sin(a)));
                }
              uint64_t state = seed * 0x9E3779B97F4A7C15ull + 7;
              for (int64_t t = 0; t < T; ++t) {
                state = state * 6364136223846793005ull + 1442695040888963407ull;
                pos.set(t, float(int64_t((state >> 33) % uint64_t(P))));
              }
              p.args.push_back(std::move(c));
              p.args.push_back(std::move(sn));
              p.args.push_back(std::move(pos));
              p.args.push_back(poisoned(d, {T, H, D}));
              p.output = 4;
              p.reference = reference::rope(p.args[0].view(), p.args[1].view(), p.args[2].view(), p.args[3].view());
              p.flops = 6.0 * double(T) * double(H) * double(D / 2);
              return p;
            }};
    r.make_for_shape = [](DType d, const std::vector<int64_t>& s, const std::string&) { return rope(d, s.at(2)); };
    r.specialisation = [](const std::vector<int64_t>& s) { return "D=" + std::to_string(s.at(2)); };
    e.push_back(std::move(r));
  }
  for (bool lse : {false, true})
    for (bool causal : {false, true}) {
      const std::string name = std::string(causal ? "attention_causal" : "attention") + (lse ? "_lse" : "");
      const std::string what = std::string(causal ? "O = softmax(Q K^T / sqrt(D), causal) V per head"
                                                  : "O = softmax(Q K^T / sqrt(D)) V per head") +
                               " (flash, online softmax; GQA when G < H)" +
                               (lse ? "; LSE = each query row's log-sum-exp of its scaled scores" : "");
      auto make = [causal, lse](DType d, int64_t D, AttentionTiles t) {
        return lse ? attention_lse(d, D, causal, t) : attention(d, D, causal, t);
      };
      Entry a{name, what, "BxHxGxSxD", 5, [make](DType d) { return make(d, 128, attentionTiles(d)); },
              [name, causal, lse](const std::vector<int64_t>& s, DType d, uint64_t seed) {
                return attentionProblem(name, s[0], s[1], s[2], s[3], s[3], s[4], d, seed, causal, lse);
              }};
      a.make_for_shape = [make](DType d, const std::vector<int64_t>& s, const std::string& target) {
        return make(d, s.at(4), attentionTiles(d, target));
      };
      a.specialisation = [](const std::vector<int64_t>& s) { return "D=" + std::to_string(s.at(4)); };
      a.framework = cudnnAttention(causal, lse);
      e.push_back(std::move(a));
    }
  for (bool lse : {false, true}) {
    const std::string name = lse ? "attention_decode_lse" : "attention_decode";
    auto make = [lse](DType d, int64_t D, AttentionTiles t) {
      return lse ? attention_decode_lse(d, D, t) : attention_decode(d, D, t);
    };
    Entry dec{name,
              std::string("O = softmax(Q K^T / sqrt(D), causal) V for T new queries against an S-long K/V cache (decode; "
                          "GQA)") +
                  (lse ? "; LSE = each query row's log-sum-exp of its scaled scores" : ""),
              "BxHxGxTxSxD", 6, [make](DType d) { return make(d, 128, attentionTiles(d)); },
              [name, lse](const std::vector<int64_t>& s, DType d, uint64_t seed) {
                return attentionProblem(name, s[0], s[1], s[2], s[3], s[4], s[5], d, seed, true, lse);
              }};
    dec.make_for_shape = [make](DType d, const std::vector<int64_t>& s, const std::string& target) {
      return make(d, s.at(5), attentionTiles(d, target));
    };
    dec.specialisation = [](const std::vector<int64_t>& s) { return "D=" + std::to_string(s.at(5)); };
    dec.framework = cudnnAttention(true, lse);
    e.push_back(std::move(dec));
  }
  // Sequences of different lengths: padded to S (i32 lengths) or packed end to end (i32
  // offsets), on the portable kernel's tiles but where the twin takes them.
  using SequencesKernel = Kernel (*)(DType, int64_t, bool, AttentionTiles);
  using SequencesProblem = Problem (*)(const std::string&, int64_t, int64_t, int64_t, int64_t, int64_t, DType,
                                       uint64_t, bool);
  using SequencesFramework = std::function<void(const Runtime&, const std::vector<TensorView>&, void*)> (*)(
      bool causal, int64_t maxLen);
  // `twin`: on sm_90a the attention twin's tiles (it takes Q, K, V and O windowed to each
  // sequence).
  // `framework`: the framework route for a causal flag and a bound on the lengths (0: any),
  // or null where there is none.
  auto sequences = [&](const std::string& base, const std::string& how, SequencesKernel make, SequencesProblem problem,
                       bool twin, SequencesFramework framework) {
    for (bool causal : {false, true}) {
      const std::string name = base + (causal ? "_causal" : "");
      Entry a{name,
              std::string("O = softmax(Q K^T / sqrt(D)") + (causal ? ", causal" : "") + ") V per sequence of B " + how,
              "BxHxGxSxD", 5, [make, causal](DType d) { return make(d, 128, causal, packedTiles(d)); },
              [name, causal, problem](const std::vector<int64_t>& s, DType d, uint64_t seed) {
                return problem(name, s[0], s[1], s[2], s[3], s[4], d, seed, causal);
              }};
      a.make_for_shape = [make, causal, twin](DType d, const std::vector<int64_t>& s, const std::string& target) {
        return make(d, s.at(4), causal, twin && target == "sm_90a" ? attentionTiles(d, target) : packedTiles(d));
      };
      a.specialisation = [](const std::vector<int64_t>& s) { return "D=" + std::to_string(s.at(4)); };
      if (framework) {
        a.framework = framework(causal, 0);
        a.framework_for_shape = [framework, causal](const std::vector<int64_t>& s) { return framework(causal, s.at(3)); };
      }
      e.push_back(std::move(a));
    }
  };
  sequences("attention_padded", "padded to S (i32 lengths drawn up to S; GQA)", attention_padded,
            paddedAttentionProblem, /*twin=*/true, cudnnPaddedFramework);
  sequences("attention_packed", "packed end to end (i32 offsets; lengths drawn up to S; GQA)", attention_packed,
            packedAttentionProblem, /*twin=*/true, cudnnPackedAttention);
  return e;
}

} // namespace

const std::vector<Entry>& all() {
  static const std::vector<Entry> entries = makeAll();
  return entries;
}

const Entry& find(const std::string& name) {
  std::string names;
  for (const Entry& e : all()) {
    if (e.name == name) return e;
    names += (names.empty() ? "" : ", ") + e.name;
  }
  throw Error(ErrorKind::NotFound, "unknown kernel '" + name + "' (the catalogue has: " + names + ")");
}

std::function<void(const Runtime&, const std::vector<TensorView>&, void*)> framework_for(const Entry& entry,
                                                                                       const std::vector<int64_t>& shape) {
  return entry.framework_for_shape ? entry.framework_for_shape(shape) : entry.framework;
}

Kernel kernel_for(const Entry& entry, DType dtype, const std::vector<int64_t>& shape, const std::string& target) {
  return entry.make_for_shape ? entry.make_for_shape(dtype, shape, target) : entry.make(dtype);
}

std::vector<int64_t> parse_shape(const std::string& text, const Entry& entry) {
  std::vector<int64_t> out;
  size_t pos = 0;
  auto bad = [&](const std::string& why) -> Error {
    return Error(ErrorKind::InvalidArgument, "kernel '" + entry.name + "': shape '" + text +
                                                 "' " + why + " (expected " + entry.shape_help +
                                                 ", e.g. " + (entry.name == "rope"        ? "77x32x128"
                                                  : entry.shape_rank == 6 ? "2x8x2x4x1000x128"
                                                  : entry.shape_rank == 5 ? "2x8x2x1000x128"
                                                  : entry.shape_rank == 3 ? "257x129x65" : "127x1000") + ")");
  };
  while (pos <= text.size()) {
    size_t x = text.find('x', pos);
    std::string part = text.substr(pos, x == std::string::npos ? std::string::npos : x - pos);
    if (part.empty() || part.find_first_not_of("0123456789") != std::string::npos)
      throw bad("has a part '" + part + "' that is not a positive integer");
    if (part.size() > 12) throw bad("has a dim too large");
    int64_t v = std::stoll(part);
    if (v <= 0) throw bad("has a dim that is not positive");
    out.push_back(v);
    if (x == std::string::npos) break;
    pos = x + 1;
  }
  if (out.size() != entry.shape_rank)
    throw bad("has " + std::to_string(out.size()) + " dims");
  return out;
}

namespace {
// One output against its reference: every element, or those `checked` lists.
verify::Report verifyOne(HostTensor& out, const std::vector<double>& reference, const std::vector<int64_t>& checked) {
  const verify::Tolerance tol = verify::Tolerance::for_dtype(out.dtype());
  if (checked.empty()) return verify::compare(out.view(), reference, tol);
  if (checked.size() != reference.size())
    throw Error(ErrorKind::InvalidArgument, "verify_output: the problem checks " + std::to_string(checked.size()) +
                                                " elements but its reference holds " + std::to_string(reference.size()));
  HostTensor sample(out.dtype(), {int64_t(checked.size())});
  for (size_t i = 0; i < checked.size(); ++i) {
    if (checked[i] < 0 || checked[i] >= out.numel())
      throw Error(ErrorKind::InvalidArgument, "verify_output: checked element " + std::to_string(checked[i]) +
                                                  " is outside the output's " + std::to_string(out.numel()));
    sample.set(int64_t(i), out.get(checked[i]));
  }
  return verify::compare(sample.view(), reference, tol);
}

// The first failing output's report, else the first output's.
verify::Report verdict(const std::vector<verify::Report>& reports) {
  for (const verify::Report& r : reports)
    if (!r.ok) return r;
  return reports.front();
}
} // namespace

RunResult run_and_verify(const Runtime& rt, const Entry& entry, const std::vector<int64_t>& shape,
                         DType dtype, uint64_t seed) {
  RunResult r;
  r.seed = seed;
  for (size_t i = 0; i < shape.size(); ++i) r.shape += (i ? "x" : "") + std::to_string(shape[i]);
  auto t0 = std::chrono::steady_clock::now();
  Kernel k = kernel_for(entry, dtype, shape, rt.fingerprint().target);
  r.trace_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  CompiledKernel ck = rt.compile(k);
  r.compile = ck.times();
  r.cache = ck.cache();
  r.kernel = ck.report();
  Problem p = entry.problem(shape, dtype, seed);
  r.flops = p.flops;
  DeviceProblem d = upload(rt, p);
  r.launch_path = ck.launch_path(d.views);
  t0 = std::chrono::steady_clock::now();
  ck.launch(d.views);
  r.run_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  r.outputs = verify_outputs(rt, d, p);
  r.report = verdict(r.outputs);
  return r;
}

DeviceProblem upload(const Runtime& rt, const Problem& p) {
  DeviceProblem d;
  for (const HostTensor& h : p.args) {
    d.tensors.push_back(rt.upload(h));
    d.views.push_back(d.tensors.back().view());
  }
  return d;
}


void Problem::poison_outputs() {
  args.at(output).poison();
  for (const More& m : more_outputs) args.at(m.arg).poison();
}

std::vector<verify::Report> verify_outputs(const Runtime& rt, const DeviceProblem& d, Problem& p) {
  HostTensor& out = p.args.at(p.output);
  rt.download(d.tensors.at(p.output), out);
  std::vector<verify::Report> reports = {verifyOne(out, p.reference, p.checked)};
  for (const Problem::More& m : p.more_outputs) {
    rt.download(d.tensors.at(m.arg), p.args.at(m.arg));
    reports.push_back(verifyOne(p.args.at(m.arg), m.reference, m.checked));
    reports.back().output = m.name;
  }
  return reports;
}

verify::Report verify_output(const Runtime& rt, const DeviceProblem& d, Problem& p) {
  return verdict(verify_outputs(rt, d, p));
}

} // namespace kiln::catalogue
