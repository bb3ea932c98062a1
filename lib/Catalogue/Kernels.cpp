// The catalogue kernels, in the public DSL: read these as the DSL's worked examples.
#include "kiln/catalogue.hpp"
#include "kiln/dsl.hpp"
#include "kiln/error.hpp"

#include <cmath>
#include <functional>
#include <limits>
#include <optional>
#include <string>

namespace kiln::catalogue {

using namespace kiln::dsl;

namespace {

enum class Epi { none, bias_relu, bias_gelu, bias_residual };

// C = epi(A @ B + bias) (or A @ B + bias + R): dtype in and out, f32 accumulate, ragged
// edges masked.
Kernel gemm_like(const std::string& name, DType dt, GemmTiles t, Epi epi) {
  return kernel(name, [=](Builder& k) {
    auto [M, N, K] = k.dims("M", "N", "K");
    auto A = k.input("A", {M, K}, dt), B = k.input("B", {K, N}, dt);
    Tensor bias;
    if (epi != Epi::none) bias = k.input("bias", {N}, dt);
    Tensor R;
    if (epi == Epi::bias_residual) R = k.input("R", {M, N}, dt);
    auto C = k.output("C", {M, N}, dt);
    if (epi == Epi::bias_residual) k.allow_in_place(C, R); // C += ... over the residual
    k.grid({cdiv(M, t.m), cdiv(N, t.n)}, [&](Index i, Index j) {
      Tile acc = k.loop(cdiv(K, t.k), t.stages, k.zeros({t.m, t.n}), [&](Index kk, const Tile& c) {
        return dot(k.load(A.tile({i, kk}, {t.m, t.k})), k.load(B.tile({kk, j}, {t.k, t.n})), c);
      });
      if (epi != Epi::none) {
        acc = acc + rows(cast(k.load(bias.tile({j}, {t.n})), f32));
        if (epi == Epi::bias_relu) acc = relu(acc);
        if (epi == Epi::bias_gelu) acc = gelu(acc);
        if (epi == Epi::bias_residual) acc = acc + cast(k.load(R.tile({i, j}, {t.m, t.n})), f32);
      }
      k.store(C.tile({i, j}, {t.m, t.n}), cast(acc, dt));
    });
  });
}

} // namespace

Kernel gemm(DType dt, GemmTiles t) { return gemm_like("gemm", dt, t, Epi::none); }
Kernel gemm_bias_relu(DType dt, GemmTiles t) { return gemm_like("gemm_bias_relu", dt, t, Epi::bias_relu); }
Kernel gemm_bias_gelu(DType dt, GemmTiles t) { return gemm_like("gemm_bias_gelu", dt, t, Epi::bias_gelu); }
Kernel gemm_bias_residual(DType dt, GemmTiles t) {
  return gemm_like("gemm_bias_residual", dt, t, Epi::bias_residual);
}

// H = silu(X @ Wg) * (X @ Wu): a SwiGLU MLP's gate and up projections in one kernel. One loop
// over K carries both accumulators (X's tile loaded once for both products), and the gating
// runs on them in registers: the framework path's two GEMMs, their two [M, N] outputs and the
// elementwise pass that reads them back become one kernel and one write. f32 accumulate,
// ragged edges masked.
Kernel swiglu(DType dt, GemmTiles t) {
  return kernel("swiglu", [=](Builder& k) {
    auto [M, N, K] = k.dims("M", "N", "K");
    auto X = k.input("X", {M, K}, dt), Wg = k.input("Wg", {K, N}, dt), Wu = k.input("Wu", {K, N}, dt);
    auto H = k.output("H", {M, N}, dt);
    k.grid({cdiv(M, t.m), cdiv(N, t.n)}, [&](Index i, Index j) {
      auto acc = k.loop(cdiv(K, t.k), t.stages, {k.zeros({t.m, t.n}), k.zeros({t.m, t.n})},
                        [&](Index kk, const std::vector<Tile>& c) {
        Tile x = k.load(X.tile({i, kk}, {t.m, t.k}));
        return std::vector<Tile>{dot(x, k.load(Wg.tile({kk, j}, {t.k, t.n})), c[0]),
                                 dot(x, k.load(Wu.tile({kk, j}, {t.k, t.n})), c[1])};
      });
      k.store(H.tile({i, j}, {t.m, t.n}), cast(silu(acc[0]) * acc[1], dt));
    });
  });
}

// Rotary position embedding (RoPE), the rotate-half form of Llama's: for token t at position
// p = Positions[t], each head's first and second halves x1, x2 (D / 2 each) become
// x1 cos - x2 sin and x2 cos + x1 sin, with cos and sin read from the tables' row p (an
// engine's cache of cos(p theta_i), sin(p theta_i)). One program per token and block of
// t.rows heads: a position read from an i32 input picks the tables' row; the two halves are
// two tiles of the head's row. In place over X.
Kernel rope(DType dt, int64_t D, RowTiles t) {
  // An odd D would leave each head's last column unwritten (two tiles of D / 2).
  if (D < 2 || D % 2 != 0)
    throw Error(ErrorKind::InvalidArgument, "catalogue::rope: the head dim D must be even and at least 2, got " +
                                                std::to_string(D));
  return kernel("rope", [=](Builder& k) {
    auto [T, H, P] = k.dims("T", "H", "P");
    const int64_t half = D / 2;
    auto X = k.input("X", {T, H, D}, dt);
    auto Cos = k.input("Cos", {P, half}, f32), Sin = k.input("Sin", {P, half}, f32);
    auto Positions = k.input("Positions", {T}, i32);
    auto Y = k.output("Y", {T, H, D}, dt);
    k.allow_in_place(Y, X);
    k.grid({T, cdiv(H, t.rows)}, [&](Index tok, Index hb) {
      Index pos = k.read(Positions, {tok});
      Index z = k.constant(0), one = k.constant(1);
      Tile c = k.load(Cos.tile({pos, z}, {half})), s = k.load(Sin.tile({pos, z}, {half}));
      Tile x1 = cast(k.load(X.tile({tok, hb, z}, {t.rows, half})), f32);
      Tile x2 = cast(k.load(X.tile({tok, hb, one}, {t.rows, half})), f32);
      k.store(Y.tile({tok, hb, z}, {t.rows, half}), cast(x1 * rows(c) - x2 * rows(s), dt));
      k.store(Y.tile({tok, hb, one}, {t.rows, half}), cast(x2 * rows(c) + x1 * rows(s), dt));
    });
  });
}

// Y = softmax(X) along rows. Online: one pass keeps the running max m and the sum s of
// exp(x - m), rescaling s when m grows; a second pass writes exp(x - m) / s.
Kernel softmax(DType dt, RowTiles t) {
  return kernel("softmax", [=](Builder& k) {
    auto [M, N] = k.dims("M", "N");
    auto X = k.input("X", {M, N}, dt);
    auto Y = k.output("Y", {M, N}, dt);
    k.allow_in_place(Y, X); // a row's last reads of X come before its writes of Y
    const double neg_inf = -std::numeric_limits<double>::infinity();
    k.grid({cdiv(M, t.rows)}, [&](Index i) {
      Index steps = cdiv(N, t.cols);
      auto ms = k.loop(steps, 1, {k.full({t.rows}, neg_inf), k.zeros({t.rows})},
                       [&](Index j, const std::vector<Tile>& c) {
        Tile x = cast(k.load(X.tile({i, j}, {t.rows, t.cols}), neg_inf), f32);
        Tile m = max(c[0], row_max(x));
        Tile s = c[1] * exp(c[0] - m) + row_sum(exp(x - cols(m)));
        return std::vector<Tile>{m, s};
      });
      k.loop(steps, 1, std::vector<Tile>{}, [&](Index j, const std::vector<Tile>&) {
        Tile x = cast(k.load(X.tile({i, j}, {t.rows, t.cols}), neg_inf), f32);
        k.store(Y.tile({i, j}, {t.rows, t.cols}), cast(exp(x - cols(ms[0])) / cols(ms[1]), dt));
        return std::vector<Tile>{};
      });
    });
  });
}

// Z = X + Y, elementwise over a 2-D tensor.
Kernel add(DType dt, RowTiles t) {
  return kernel("add", [=](Builder& k) {
    auto [M, N] = k.dims("M", "N");
    auto X = k.input("X", {M, N}, dt), Y = k.input("Y", {M, N}, dt);
    auto Z = k.output("Z", {M, N}, dt);
    k.allow_in_place(Z, X);
    k.allow_in_place(Z, Y);
    k.grid({cdiv(M, t.rows), cdiv(N, t.cols)}, [&](Index i, Index j) {
      Tile x = cast(k.load(X.tile({i, j}, {t.rows, t.cols})), f32);
      Tile y = cast(k.load(Y.tile({i, j}, {t.rows, t.cols})), f32);
      k.store(Z.tile({i, j}, {t.rows, t.cols}), cast(x + y, dt));
    });
  });
}

// Y = X / sqrt(mean(X^2) + eps) * W, per row.
Kernel rmsnorm(DType dt, double eps, RowTiles t) {
  return kernel("rmsnorm", [=](Builder& k) {
    auto [M, N] = k.dims("M", "N");
    auto X = k.input("X", {M, N}, dt), W = k.input("W", {N}, dt);
    auto Y = k.output("Y", {M, N}, dt);
    k.allow_in_place(Y, X);
    k.grid({cdiv(M, t.rows)}, [&](Index i) {
      Index steps = cdiv(N, t.cols);
      Tile ss = k.loop(steps, 1, k.zeros({t.rows}), [&](Index j, const Tile& acc) {
        Tile x = cast(k.load(X.tile({i, j}, {t.rows, t.cols})), f32);
        return acc + row_sum(x * x);
      });
      Tile inv = rsqrt(ss / k.splat(N, {t.rows}) + k.full({t.rows}, eps));
      k.loop(steps, 1, std::vector<Tile>{}, [&](Index j, const std::vector<Tile>&) {
        Tile x = cast(k.load(X.tile({i, j}, {t.rows, t.cols})), f32);
        Tile w = cast(k.load(W.tile({j}, {t.cols})), f32);
        k.store(Y.tile({i, j}, {t.rows, t.cols}), cast(x * cols(inv) * rows(w), dt));
        return std::vector<Tile>{};
      });
    });
  });
}

namespace {

// O = softmax(Q K^T / sqrt(D)) V, FlashAttention's way: each program owns t.q query rows of
// one head and walks the keys t.kv at a time with an online softmax. The loop carries the
// rows' running max m, their running sum l of exp(s - m), and the output's accumulator,
// rescaled by exp(m_old - m_new) whenever the max grows; one division at the end. The
// softmax runs in base 2 with 1/sqrt(D) folded into log2(e) (exp2 is the GPU's native
// exponential). Keys past S, and under `causal` keys after the query, score -inf; a causal
// program stops at the key tile holding its last query row.
//
// The queries are the last T of the sequence's S positions (T = S: a whole sequence; T < S:
// the new tokens of a decode step or a prefill chunk, the K/V cache holding all S), so
// query row r sits at position r + S - T. `kvCache` declares Q and O with their own length
// T; without it T is S and the program is the plain attention kernel.
//
// With `lse`, a second output LSE [B, H, T] (f32) takes each query row's log-sum-exp of its
// scaled scores, ln sum_keys e^(q.k / sqrt(D)): the loop's m and l are in base 2 with the
// scale folded in, so it is m ln 2 + ln l.
// The positions of a query tile's rows (its first at `first`), repeated along the keys.
Tile rowPositions(Builder& k, Index first, AttentionTiles t) {
  const Shape st = {t.q, t.kv};
  return k.iota(st, 0) + k.splat(first, st);
}

// A program's key steps over a sequence of `len` tokens, its query tile i (rows at `first`):
// the key tiles up to the diagonal (causal) or all of them, and none for a query tile wholly
// past the sequence (min(steps, (n - i) x key tiles) <= 0 there, n its query tiles).
Index sequenceSteps(Index len, Index i, Index first, bool causal, AttentionTiles t) {
  Index keyTiles = cdiv(len, t.kv);
  Index steps = causal ? min(keyTiles, cdiv(first + t.q, t.kv)) : keyTiles;
  return min(steps, (cdiv(len, t.q) - i) * keyTiles);
}

// One program's online softmax over `steps` key tiles (kAt(j), vAt(j): key tile j's views):
// its query tile `q` holds the rows at positions `row` (rowPositions), keys at `keys` and past
// score -inf (under `causal`, so do keys after the row's position). The running max m and sum
// l, in base 2 with the scale folded in, and the unnormalised output.
std::vector<Tile> flashLoop(Builder& k, const Tile& q, const std::function<View(Index)>& kAt,
                            const std::function<View(Index)>& vAt, Index keys, const Tile& row, Index steps, bool causal,
                            DType dt, int64_t D, AttentionTiles t) {
  const double c = std::log2(std::exp(1.0)) / std::sqrt(double(D));
  const double neg_inf = -std::numeric_limits<double>::infinity();
  const Shape st = {t.q, t.kv};
  return k.loop(steps, 1, {k.full({t.q}, neg_inf), k.zeros({t.q}), k.zeros({t.q, D})},
                [&](Index j, const std::vector<Tile>& run) {
    Tile s = dot(q, transpose(k.load(kAt(j))), k.zeros(st)) * c;
    Tile col = k.iota(st, 1) + k.splat(j * t.kv, st);
    Tile keep = causal ? (col < k.splat(keys, st)) * (col <= row) : col < k.splat(keys, st);
    s = where(keep, s, k.full(st, neg_inf));
    Tile m = max(run[0], row_max(s));
    Tile p = exp2(s - cols(m));
    Tile alpha = exp2(run[0] - m);
    Tile l = run[1] * alpha + row_sum(p);
    Tile acc = dot(cast(p, dt), k.load(vAt(j)), run[2] * cols(alpha));
    return std::vector<Tile>{m, l, acc};
  });
}

Kernel attention_like(const std::string& name, DType dt, int64_t D, bool causal, bool kvCache, AttentionTiles t,
                      bool lse = false) {
  return kernel(name, [=](Builder& k) {
    auto [B, H, G, S] = k.dims("B", "H", "G", "S");
    Index T = kvCache ? k.dim("T") : S;
    auto Q = k.input("Q", {B, H, T, D}, dt);
    auto K = k.input("K", {B, G, S, D}, dt), V = k.input("V", {B, G, S, D}, dt);
    auto O = k.output("O", {B, H, T, D}, dt);
    std::optional<Tensor> L;
    if (lse) L = k.output("LSE", {B, H, T}, f32);
    k.grid({cdiv(T, t.q), H, B}, [&](Index i, Index h, Index b) {
      Index z = k.constant(0), g = h / (H / G);
      Index first = kvCache ? i * t.q + (S - T) : i * t.q; // the position of the program's first query
      Tile q = k.load(Q.tile({b, h, i, z}, {t.q, D}));
      Tile row = rowPositions(k, first, t);
      Index steps = causal ? min(cdiv(S, t.kv), cdiv(first + t.q, t.kv)) : cdiv(S, t.kv);
      auto at = [&](const Tensor& X) { return [&, X](Index j) { return X.tile({b, g, j, z}, {t.kv, D}); }; };
      auto r = flashLoop(k, q, at(K), at(V), S, row, steps, causal, dt, D, t);
      k.store(O.tile({b, h, i, z}, {t.q, D}), cast(r[2] / cols(r[1]), dt));
      if (lse) k.store(L->tile({b, h, i}, {t.q}), r[0] * std::log(2.0) + log(r[1]));
    });
  });
}

// Sequences padded to one length S (attention_padded): sequence b's own length is Lens[b]
// (taken as S past it). K and V are windowed to it, so the key tile holding its end reads
// zeros past it, whatever the padding holds; the program's mask drops those keys. Q and O
// are not windowed: a query tile's rows past the length are padding, computed from the
// padding's queries and written (the sm_90a twin takes this form). A query tile wholly past
// the length runs no key step, and its rows are written as 0: O = acc / max(l, tiny), where
// a row that saw a key has l >= 1.
Kernel attention_padded_like(const std::string& name, DType dt, int64_t D, bool causal, AttentionTiles t) {
  return kernel(name, [=](Builder& k) {
    auto [B, H, G, S] = k.dims("B", "H", "G", "S");
    auto Q = k.input("Q", {B, H, S, D}, dt);
    auto K = k.input("K", {B, G, S, D}, dt), V = k.input("V", {B, G, S, D}, dt);
    auto Lens = k.input("Lens", {B}, i32);
    auto O = k.output("O", {B, H, S, D}, dt);
    k.grid({cdiv(S, t.q), H, B}, [&](Index i, Index h, Index b) {
      Index z = k.constant(0), g = h / (H / G), len = min(S, k.read(Lens, {b}));
      Tile q = k.load(Q.tile({b, h, i, z}, {t.q, D}));
      Index first = i * t.q, steps = sequenceSteps(len, i, first, causal, t);
      Tile row = rowPositions(k, first, t);
      auto at = [&](const Tensor& X) {
        Tensor w = X.window(2, z, len);
        return [&, w](Index j) { return w.tile({b, g, j, z}, {t.kv, D}); };
      };
      auto r = flashLoop(k, q, at(K), at(V), len, row, steps, causal, dt, D, t);
      k.store(O.tile({b, h, i, z}, {t.q, D}), cast(r[2] / cols(max(r[1], k.full({t.q}, 1e-30))), dt));
    });
  });
}

// Sequences packed end to end (attention_packed): sequence n is tokens [Offsets[n],
// Offsets[n + 1]); every tensor is windowed to the program's sequence, so tile indices count
// from its first token and nothing past its last is read (zeros) or written. The grid covers
// cdiv(T, t.q) query tiles of every sequence; a program past its sequence's n query tiles
// runs no key step (min(steps, (n - i) x key tiles) <= 0 there) and stores nothing.
Kernel attention_packed_like(const std::string& name, DType dt, int64_t D, bool causal, AttentionTiles t) {
  return kernel(name, [=](Builder& k) {
    auto [H, G, T, B1] = k.dims("H", "G", "T", "B1");
    auto Q = k.input("Q", {H, T, D}, dt);
    auto K = k.input("K", {G, T, D}, dt), V = k.input("V", {G, T, D}, dt);
    auto Offsets = k.input("Offsets", {B1}, i32);
    auto O = k.output("O", {H, T, D}, dt);
    k.grid({cdiv(T, t.q), H, B1 - k.constant(1)}, [&](Index i, Index h, Index n) {
      Index z = k.constant(0), g = h / (H / G);
      Index start = k.read(Offsets, {n}), len = k.read(Offsets, {n + 1}) - start;
      Tile q = k.load(Q.window(1, start, len).tile({h, i, z}, {t.q, D}));
      Index first = i * t.q, steps = sequenceSteps(len, i, first, causal, t);
      Tile row = rowPositions(k, first, t);
      auto at = [&](const Tensor& X) {
        Tensor w = X.window(1, start, len);
        return [&, w](Index j) { return w.tile({g, j, z}, {t.kv, D}); };
      };
      auto r = flashLoop(k, q, at(K), at(V), len, row, steps, causal, dt, D, t);
      k.store(O.window(1, start, len).tile({h, i, z}, {t.q, D}), cast(r[2] / cols(r[1]), dt));
    });
  });
}

} // namespace

Kernel attention(DType dt, int64_t D, bool causal, AttentionTiles t) {
  return attention_like(causal ? "attention_causal" : "attention", dt, D, causal, /*kvCache=*/false, t);
}

Kernel attention_decode(DType dt, int64_t D, AttentionTiles t) {
  return attention_like("attention_decode", dt, D, /*causal=*/true, /*kvCache=*/true, t);
}

Kernel attention_lse(DType dt, int64_t D, bool causal, AttentionTiles t) {
  return attention_like(causal ? "attention_causal_lse" : "attention_lse", dt, D, causal, /*kvCache=*/false, t,
                        /*lse=*/true);
}

Kernel attention_decode_lse(DType dt, int64_t D, AttentionTiles t) {
  return attention_like("attention_decode_lse", dt, D, /*causal=*/true, /*kvCache=*/true, t, /*lse=*/true);
}

Kernel attention_padded(DType dt, int64_t D, bool causal, AttentionTiles t) {
  return attention_padded_like(causal ? "attention_padded_causal" : "attention_padded", dt, D, causal, t);
}

Kernel attention_packed(DType dt, int64_t D, bool causal, AttentionTiles t) {
  return attention_packed_like(causal ? "attention_packed_causal" : "attention_packed", dt, D, causal, t);
}

} // namespace kiln::catalogue
