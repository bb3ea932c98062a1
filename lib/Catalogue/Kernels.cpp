// The catalogue kernels, in the public DSL: read these as the DSL's worked examples.
#include "kiln/catalogue.hpp"
#include "kiln/dsl.hpp"

#include <limits>

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

} // namespace kiln::catalogue
