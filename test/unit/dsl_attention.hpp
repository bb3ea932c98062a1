#pragma once
// Kernels with masks and a transposed operand, written in the DSL as a user would, for
// test_dsl_masks.cpp (CPU), test_cuda_compile.cpp (no GPU) and test_gpu_kernels.cpp (H200),
// with the host references they are checked against.
#include <cmath>
#include <cstring>
#include <algorithm>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "kiln/dsl.hpp"
#include "kiln/runtime.hpp"
#include "kiln/tensor.hpp"

namespace kiln::test {

/// Y = X where column <= row (the causal mask of a square score matrix), else -inf; 16 x 32
/// tiles over an M x N tensor of `dt`.
inline Kernel causalMask(DType dt) {
  using namespace kiln::dsl;
  return kernel("causal_mask", [=](Builder& b) {
    auto [M, N] = b.dims("M", "N");
    auto X = b.input("X", {M, N}, dt);
    auto Y = b.output("Y", {M, N}, dt);
    b.grid({cdiv(M, 16), cdiv(N, 32)}, [&](Index i, Index j) {
      Tile row = b.iota({16, 32}, 0, f32) + b.splat(i * 16, {16, 32});
      Tile col = b.iota({16, 32}, 1, f32) + b.splat(j * 32, {16, 32});
      Tile x = cast(b.load(X.tile({i, j}, {16, 32})), f32);
      Tile y = where(col <= row, x, b.full({16, 32}, -INFINITY));
      b.store(Y.tile({i, j}, {16, 32}), cast(y, dt));
    });
  });
}

/// Y (N x M) = X (M x N) transposed, by 16 x 32 tiles.
inline Kernel transposeCopy(DType dt) {
  using namespace kiln::dsl;
  return kernel("transpose_copy", [=](Builder& b) {
    auto [M, N] = b.dims("M", "N");
    auto X = b.input("X", {M, N}, dt);
    auto Y = b.output("Y", {N, M}, dt);
    b.grid({cdiv(M, 16), cdiv(N, 32)}, [&](Index i, Index j) {
      b.store(Y.tile({j, i}, {32, 16}), transpose(b.load(X.tile({i, j}, {16, 32}))));
    });
  });
}

/// Query tile `i` of one head: softmax(Q K^T / sqrt(D) [+ causal mask]) V by an online
/// softmax over key tiles of `tile` rows, the loop carrying the running max, the running sum
/// and the output's accumulator; keys past S are masked. `q`, `kAt(j)`, `vAt(j)`: the views.
/// `readsAcc`: the running sum also reads the accumulator (adds 0 x its row maximum, finite:
/// the same numbers), which keeps the sm_90a twin from overlapping a step's softmax with
/// the product before it. `steps`: the loop's count, when not cdiv(S, tile).
inline dsl::Tile attentionTile(dsl::Builder& b, const dsl::View& q, const std::function<dsl::View(dsl::Index)>& kAt,
                               const std::function<dsl::View(dsl::Index)>& vAt, dsl::Index S, dsl::Index i, DType dt,
                               int64_t D, bool causal, int64_t tile, bool readsAcc = false,
                               dsl::Index steps = dsl::Index()) {
  using namespace kiln::dsl;
  const double scale = 1.0 / std::sqrt(double(D));
  Tile qt = b.load(q);
  Tile row = b.iota({tile, tile}, 0) + b.splat(i * tile, {tile, tile});
  Tile keys = b.splat(S, {tile, tile});
  auto out = b.loop(steps.value() ? steps : cdiv(S, tile), 1, {b.full({tile}, -INFINITY), b.zeros({tile}), b.zeros({tile, D})},
                    [&](Index j, const std::vector<Tile>& c) {
    Tile k = b.load(kAt(j)), v = b.load(vAt(j));
    Tile s = dot(qt, transpose(k), b.zeros({tile, tile})) * scale;
    Tile col = b.iota({tile, tile}, 1) + b.splat(j * tile, {tile, tile});
    Tile keep = causal ? (col < keys) * (col <= row) : col < keys;
    s = where(keep, s, b.full({tile, tile}, -INFINITY));
    Tile m = max(c[0], row_max(s));
    Tile p = exp(s - cols(m));
    Tile alpha = exp(c[0] - m);
    Tile l = c[1] * alpha + row_sum(p);
    if (readsAcc) l = l + row_max(c[2]) * 0.0;
    Tile acc = dot(cast(p, dt), v, c[2] * cols(alpha));
    return std::vector<Tile>{m, l, acc};
  });
  return cast(out[2] / cols(out[1]), dt);
}

/// One head of attention, Q, K, V and O of S x D in `dt` (attentionTile over every query tile).
inline Kernel attention(DType dt, int64_t D, bool causal, int64_t tile = 64) {
  using namespace kiln::dsl;
  return kernel(causal ? "attention_causal" : "attention", [=](Builder& b) {
    auto [S] = b.dims("S");
    auto Q = b.input("Q", {S, D}, dt), K = b.input("K", {S, D}, dt), V = b.input("V", {S, D}, dt);
    auto O = b.output("O", {S, D}, dt);
    b.grid({cdiv(S, tile)}, [&](Index i) {
      Index z = b.constant(0);
      auto at = [&](const Tensor& T) { return [&, T](Index j) { return T.tile({j, z}, {tile, D}); }; };
      b.store(O.tile({i, z}, {tile, D}), attentionTile(b, Q.tile({i, z}, {tile, D}), at(K), at(V), S, i, dt, D, causal, tile));
    });
  });
}

/// Batched multi-head attention with grouped K/V heads: Q and O of [B, H, S, D], K and V of
/// [B, H / group, S, D] (query head h reads K/V head h / group); a grid of query tiles x
/// heads x batches, each view fixing its batch and head. `readsAcc`: see attentionTile.
inline Kernel groupedAttention(DType dt, int64_t D, bool causal, int64_t group, int64_t tile = 64,
                               bool readsAcc = false) {
  using namespace kiln::dsl;
  return kernel(readsAcc ? "grouped_attention_reads_acc" : "grouped_attention", [=](Builder& b) {
    auto [B, H, G, S] = b.dims("B", "H", "G", "S");
    auto Q = b.input("Q", {B, H, S, D}, dt), K = b.input("K", {B, G, S, D}, dt), V = b.input("V", {B, G, S, D}, dt);
    auto O = b.output("O", {B, H, S, D}, dt);
    b.grid({cdiv(S, tile), H, B}, [&](Index i, Index h, Index n) {
      Index z = b.constant(0), g = h / group;
      auto kv = [&](const Tensor& T) { return [&, T](Index j) { return T.tile({n, g, j, z}, {tile, D}); }; };
      b.store(O.tile({n, h, i, z}, {tile, D}),
              attentionTile(b, Q.tile({n, h, i, z}, {tile, D}), kv(K), kv(V), S, i, dt, D, causal, tile, readsAcc));
    });
  });
}

/// Attention over a batch of sequences padded to S: Q and O of [B, H, S, D], K and V of
/// [B, H / group, S, D], and Lens [B] (i32) each sequence's length. A program reads its
/// sequence's length and runs attentionTile over min(S, length) keys: its loop stops at the
/// last key tile holding one, and keys past it score -inf. Query rows past the length are
/// the padding's: computed (over the sequence's keys), never checked. `windowKV` false: K and
/// V are read through the padding, right only where it is finite.
inline Kernel paddedAttention(DType dt, int64_t D, bool causal, int64_t group, int64_t tile = 64, bool windowKV = true) {
  using namespace kiln::dsl;
  return kernel("padded_attention", [=](Builder& b) {
    auto [B, H, G, S] = b.dims("B", "H", "G", "S");
    auto Q = b.input("Q", {B, H, S, D}, dt), K = b.input("K", {B, G, S, D}, dt), V = b.input("V", {B, G, S, D}, dt);
    auto Lens = b.input("Lens", {B}, i32);
    auto O = b.output("O", {B, H, S, D}, dt);
    b.grid({cdiv(S, tile), H, B}, [&](Index i, Index h, Index n) {
      Index z = b.constant(0), g = h / group, len = min(S, b.read(Lens, {n}));
      // K and V windowed to the sequence: the last key tile's rows past len read zeros, not
      // the padding (which may hold anything, NaN included: 0 x NaN is NaN).
      auto kv = [&](const Tensor& T) {
        Tensor w = windowKV ? T.window(2, z, len) : T;
        return [&, w](Index j) { return w.tile({n, g, j, z}, {tile, D}); };
      };
      b.store(O.tile({n, h, i, z}, {tile, D}),
              attentionTile(b, Q.tile({n, h, i, z}, {tile, D}), kv(K), kv(V), len, i, dt, D, causal, tile));
    });
  });
}

/// Attention over a batch of sequences packed end to end: token-major Q and O of [T, H, D]
/// and K, V of [T, H / group, D] in memory, passed as [H, T, D] and [H / group, T, D] views
/// (strides [D, H * D, 1]: packedView), and Offsets [B + 1] (i32): sequence n is tokens
/// [Offsets[n], Offsets[n + 1]). Each tensor is windowed to the program's sequence, so its
/// tile indices count from the sequence's first token and nothing past its last is read or
/// written. The grid covers T / tile query tiles per sequence (what the longest sequence
/// could need); a program past its sequence's end runs no key step and stores nothing: with
/// n = cdiv(len, tile) key tiles, min(n, (n - i) * n) is n for a query tile i < n, else <= 0.
inline Kernel packedAttention(DType dt, int64_t D, bool causal, int64_t group, int64_t tile = 64) {
  using namespace kiln::dsl;
  return kernel("packed_attention", [=](Builder& b) {
    auto [H, G, T, B1] = b.dims("H", "G", "T", "B1");
    auto Q = b.input("Q", {H, T, D}, dt), K = b.input("K", {G, T, D}, dt), V = b.input("V", {G, T, D}, dt);
    auto Offsets = b.input("Offsets", {B1}, i32);
    auto O = b.output("O", {H, T, D}, dt);
    b.grid({cdiv(T, tile), H, B1 - b.constant(1)}, [&](Index i, Index h, Index n) {
      Index z = b.constant(0), g = h / group, at = b.read(Offsets, {n}), len = b.read(Offsets, {n + 1}) - at;
      Index tiles = cdiv(len, tile), steps = min(tiles, (tiles - i) * tiles);
      auto kv = [&](const Tensor& X) {
        Tensor w = X.window(1, at, len);
        return [&, w](Index j) { return w.tile({g, j, z}, {tile, D}); };
      };
      b.store(O.window(1, at, len).tile({h, i, z}, {tile, D}),
              attentionTile(b, Q.window(1, at, len).tile({h, i, z}, {tile, D}), kv(K), kv(V), len, i, dt, D, causal, tile,
                            false, steps));
    });
  });
}

/// The row max and row sum of the scores S = Q K^T (M x N, Q and K of M x D and N x D in
/// `dt`) by 64 x 64 tiles, stored as rank-1 tiles: Mx[i] = max_j S[i, j], Sum[i] = sum_j S[i, j]
/// (f32). On the GPU the rows stay in the scores' registers and one lane per quad stores them.
inline Kernel scoreRowStats(DType dt, int64_t D) {
  using namespace kiln::dsl;
  return kernel("score_row_stats", [=](Builder& b) {
    auto [M, N] = b.dims("M", "N");
    auto Q = b.input("Q", {M, D}, dt), K = b.input("K", {N, D}, dt);
    auto Mx = b.output("Mx", {M}, DType::f32), Sum = b.output("Sum", {M}, DType::f32);
    b.grid({cdiv(M, 64)}, [&](Index i) {
      Index z = b.constant(0);
      Tile q = b.load(Q.tile({i, z}, {64, D}));
      auto r = b.loop(cdiv(N, 64), 1, {b.full({64}, -INFINITY), b.zeros({64})}, [&](Index j, const std::vector<Tile>& c) {
        Tile s = dot(q, transpose(b.load(K.tile({j, z}, {64, D}))), b.zeros({64, 64}));
        Tile col = b.iota({64, 64}, 1) + b.splat(j * 64, {64, 64});
        Tile keep = col < b.splat(N, {64, 64});
        return std::vector<Tile>{max(c[0], row_max(where(keep, s, b.full({64, 64}, -INFINITY)))),
                                 c[1] + row_sum(where(keep, s, b.zeros({64, 64})))};
      });
      b.store(Mx.tile({i}, {64}), r[0]);
      b.store(Sum.tile({i}, {64}), r[1]);
    });
  });
}

/// The attention above in double precision on the host, from the tensors' own elements: one
/// head of S x D matrices starting at elements qAt (Q, and the result) and kvAt (K, V).
inline std::vector<double> attentionReference(const HostTensor& q, const HostTensor& k, const HostTensor& v,
                                              bool causal, int64_t S = -1, int64_t qAt = 0, int64_t kvAt = 0) {
  const int64_t D = q.dims().back();
  if (S < 0) S = q.dims()[0];
  std::vector<double> o(size_t(S * D), 0.0), p(static_cast<size_t>(S), 0.0);
  for (int64_t r = 0; r < S; ++r) {
    double m = -std::numeric_limits<double>::infinity(), sum = 0;
    const int64_t last = causal ? r : S - 1;
    for (int64_t c = 0; c <= last; ++c) {
      double s = 0;
      for (int64_t d = 0; d < D; ++d) s += double(q.get(qAt + r * D + d)) * double(k.get(kvAt + c * D + d));
      p[size_t(c)] = s / std::sqrt(double(D));
      m = std::max(m, p[size_t(c)]);
    }
    for (int64_t c = 0; c <= last; ++c) sum += (p[size_t(c)] = std::exp(p[size_t(c)] - m));
    for (int64_t c = 0; c <= last; ++c)
      for (int64_t d = 0; d < D; ++d) o[size_t(r * D + d)] += p[size_t(c)] / sum * double(v.get(kvAt + c * D + d));
  }
  return o;
}

/// The largest |o - want| over one head of `o` (S x D elements from element `at`); infinity
/// where an element is NaN (std::max would drop it: NaN compares false).
inline double worstError(const HostTensor& o, const std::vector<double>& want, int64_t at = 0) {
  double worst = 0;
  for (size_t e = 0; e < want.size(); ++e) {
    const double err = std::abs(double(o.get(at + int64_t(e))) - want[e]);
    worst = std::isnan(err) ? std::numeric_limits<double>::infinity() : std::max(worst, err);
  }
  return worst;
}

/// For groupedAttention's output `o` (q, k, v its inputs, [B, H, S, D] and [B, H / group, S,
/// D]): the worst error of each head against attentionReference, batch-major.
inline std::vector<double> groupedAttentionErrors(const HostTensor& q, const HostTensor& k, const HostTensor& v,
                                                  const HostTensor& o, int64_t group, bool causal) {
  const int64_t B = q.dims()[0], H = q.dims()[1], S = q.dims()[2], D = q.dims()[3], G = k.dims()[1];
  std::vector<double> worst;
  for (int64_t n = 0; n < B; ++n)
    for (int64_t h = 0; h < H; ++h) {
      const int64_t qAt = (n * H + h) * S * D, kvAt = (n * G + h / group) * S * D;
      worst.push_back(worstError(o, attentionReference(q, k, v, causal, S, qAt, kvAt), qAt));
    }
  return worst;
}

/// For paddedAttention's output `o`: the worst error of each head's first min(S, lens[n])
/// rows against attentionReference over that many keys, batch-major.
inline std::vector<double> paddedAttentionErrors(const HostTensor& q, const HostTensor& k, const HostTensor& v,
                                                 const HostTensor& o, const std::vector<int32_t>& lens, int64_t group,
                                                 bool causal) {
  const int64_t B = q.dims()[0], H = q.dims()[1], S = q.dims()[2], D = q.dims()[3], G = k.dims()[1];
  std::vector<double> worst;
  for (int64_t n = 0; n < B; ++n)
    for (int64_t h = 0; h < H; ++h) {
      const int64_t len = std::min<int64_t>(S, lens[size_t(n)]);
      const int64_t qAt = (n * H + h) * S * D, kvAt = (n * G + h / group) * S * D;
      worst.push_back(len <= 0 ? 0.0 : worstError(o, attentionReference(q, k, v, causal, len, qAt, kvAt), qAt));
    }
  return worst;
}

/// packedAttention's host tensors, token-major: q [T, H, D], k and v [T, G, D] random (the
/// tokens after the last sequence NaN in q, k and v: nothing of them may reach a result), o
/// [T, H, D] poisoned, and `offsets` as an i32 tensor.
struct PackedInputs {
  HostTensor q, k, v, o, offsets;
  PackedInputs(DType dt, int64_t T, int64_t H, int64_t G, int64_t D, const std::vector<int32_t>& at)
      : q(dt, {T, H, D}), k(dt, {T, G, D}), v(dt, {T, G, D}), o(dt, {T, H, D}), offsets(DType::i32, {int64_t(at.size())}) {
    q.fill_random(1), k.fill_random(2), v.fill_random(3);
    for (int64_t e = int64_t(at.back()) * G * D; e < T * G * D; ++e) k.set(e, NAN), v.set(e, NAN);
    for (int64_t e = int64_t(at.back()) * H * D; e < T * H * D; ++e) q.set(e, NAN);
    for (size_t n = 0; n < at.size(); ++n) offsets.set(int64_t(n), float(at[n]));
    o.poison();
  }
};

/// How many elements of `now` in [from, to) (to the end by default) differ, bit for bit,
/// from `before`'s.
inline int64_t changedFrom(const HostTensor& now, const HostTensor& before, int64_t from, int64_t to = -1) {
  const int64_t size = size_of(now.dtype());
  int64_t changed = 0;
  for (int64_t e = from; e < (to < 0 ? now.numel() : to); ++e)
    changed += std::memcmp(static_cast<const char*>(now.data()) + e * size,
                           static_cast<const char*>(before.data()) + e * size, size_t(size)) != 0;
  return changed;
}

/// A token-major [T, heads, D] tensor seen as [heads, T, D] (packedAttention's arguments).
inline TensorView packedView(TensorView t) {
  const int64_t T = t.dims[0], heads = t.dims[1], D = t.dims[2];
  t.dims = {heads, T, D};
  t.strides = {D, heads * D, 1};
  return t;
}

/// For packedAttention's output `o` (token-major q, k, v, o; sequence n is tokens
/// [offsets[n], offsets[n + 1])): the worst error of each sequence's heads against
/// attentionReference over that sequence alone, sequence-major.
inline std::vector<double> packedAttentionErrors(const HostTensor& q, const HostTensor& k, const HostTensor& v,
                                                 const HostTensor& o, const std::vector<int32_t>& offsets,
                                                 int64_t group, bool causal) {
  const int64_t H = q.dims()[1], D = q.dims()[2], G = k.dims()[1];
  // One head of one sequence, gathered into a contiguous len x D tensor.
  auto gather = [&](const HostTensor& t, int64_t heads, int64_t head, int64_t from, int64_t len) {
    HostTensor out(t.dtype(), {std::max<int64_t>(len, 1), D});
    for (int64_t r = 0; r < len; ++r)
      for (int64_t d = 0; d < D; ++d) out.set(r * D + d, t.get(((from + r) * heads + head) * D + d));
    return out;
  };
  std::vector<double> worst;
  for (size_t n = 0; n + 1 < offsets.size(); ++n) {
    const int64_t from = offsets[n], len = offsets[n + 1] - offsets[n];
    for (int64_t h = 0; h < H; ++h) {
      if (len <= 0) { worst.push_back(0.0); continue; }
      HostTensor qs = gather(q, H, h, from, len), ks = gather(k, G, h / group, from, len),
                 vs = gather(v, G, h / group, from, len), os = gather(o, H, h, from, len);
      worst.push_back(worstError(os, attentionReference(qs, ks, vs, causal, len)));
    }
  }
  return worst;
}

/// packedAttention's output in `in.o` after a launch (`before`: in.o as launched): every
/// sequence's heads within `tolerance` of the reference, and nothing written past the last
/// sequence's tokens.
inline void checkPacked(const PackedInputs& in, const HostTensor& before, const std::vector<int32_t>& offsets,
                        int64_t group, bool causal, double tolerance) {
  const int64_t H = in.q.dims()[1], D = in.q.dims()[2];
  const std::vector<double> worst = packedAttentionErrors(in.q, in.k, in.v, in.o, offsets, group, causal);
  REQUIRE(worst.size() == size_t((offsets.size() - 1) * H));
  for (size_t at = 0; at < worst.size(); ++at) {
    INFO("sequence " << at / H << " head " << at % H);
    CHECK(worst[at] < tolerance);
  }
  CHECK(changedFrom(in.o, before, offsets.back() * H * D) == 0);
}

/// packedAttention over offsets {-5, 100, 230}: a window starting before the tensor is empty
/// (Tensor::window: nothing read or written unless 0 <= start < the dim), so rows 0..99 stay
/// as they were while sequence [100, 230) is computed.
inline void checkPackedNegativeStart(const Runtime& rt, DType dt, int64_t D, bool causal, int64_t group, int64_t tile,
                                     double tolerance) {
  const int64_t H = 4, G = H / group, T = 240;
  PackedInputs in(dt, T, H, G, D, {-5, 100, 230});
  const HostTensor before = in.o;
  DeviceTensor q = rt.upload(in.q), k = rt.upload(in.k), v = rt.upload(in.v), off = rt.upload(in.offsets),
               o = rt.upload(in.o);
  rt.compile(packedAttention(dt, D, causal, group, tile))
      .launch({packedView(q.view()), packedView(k.view()), packedView(v.view()), off.view(), packedView(o.view())});
  rt.download(o, in.o);
  CHECK(changedFrom(in.o, before, 0, 100 * H * D) == 0);
  for (double e : packedAttentionErrors(in.q, in.k, in.v, in.o, {100, 230}, group, causal)) CHECK(e < tolerance);
  CHECK(changedFrom(in.o, before, 230 * H * D) == 0);
}

} // namespace kiln::test
