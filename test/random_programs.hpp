#pragma once
// Random elementwise-and-row-reduction DSL programs for differential testing: each is one
// expression tree, built once as a kiln kernel (randomKernel) and once as a direct f64
// evaluation with the DSL's tile semantics (eval: a masked load reads 0 past the edge; a
// row reduction runs over the whole tile). Used by test_random_programs.cpp (a fixed seed)
// and the fuzz_dsl_program fuzzer (libFuzzer's bytes as the random source).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kiln/dsl.hpp"
#include "kiln/runtime.hpp"

namespace kiln::testing::random_programs {

using namespace kiln::dsl;

enum class Op { X, Y, Const, Add, Sub, Mul, Max, Min, Neg, Relu, Tanh, Sigmoid, ExpTanh, Silu, Gelu, Scale, SubRowMax, AddRowSum,
                WhereLe, LowerTriangle, TransposeTwice };

struct Node {
  Op op = Op::X;
  double c = 0;
  std::unique_ptr<Node> a, b;
};

inline std::unique_ptr<Node> randomTree(const std::function<uint64_t()>& rng, int depth) {
  auto n = std::make_unique<Node>();
  auto pick = [&](int k) { return int(rng() % uint64_t(k)); };
  if (depth == 0 || pick(5) == 0) {
    const int leaf = pick(5);
    n->op = leaf < 2 ? Op::X : leaf < 4 ? Op::Y : Op::Const;
    n->c = double(pick(9)) * 0.25 - 1.0;
    return n;
  }
  static const Op unary[] = {Op::Neg,   Op::Relu,      Op::Tanh,      Op::Sigmoid,       Op::ExpTanh,       Op::Silu,
                             Op::Gelu,  Op::Scale,     Op::SubRowMax, Op::AddRowSum, Op::LowerTriangle, Op::TransposeTwice};
  static const Op binary[] = {Op::Add, Op::Sub, Op::Mul, Op::Max, Op::Min, Op::WhereLe};
  if (pick(2) == 0) {
    n->op = unary[pick(int(std::size(unary)))];
    n->c = double(pick(7)) * 0.25 - 0.75; // Scale's factor
    n->a = randomTree(rng, depth - 1);
  } else {
    n->op = binary[pick(int(std::size(binary)))];
    n->a = randomTree(rng, depth - 1);
    n->b = randomTree(rng, depth - 1);
  }
  return n;
}

inline std::string show(const Node& n) {
  static const char* names[] = {"X", "Y", "const", "add", "sub", "mul", "max", "min", "neg", "relu", "tanh", "sigmoid",
                                "exp(tanh)", "silu", "gelu", "scale", "sub_row_max", "add_row_sum",
                                "where_le", "lower_triangle", "transpose_twice"};
  std::string s = names[int(n.op)];
  if (n.op == Op::Const || n.op == Op::Scale) s += "[" + std::to_string(n.c) + "]";
  if (n.a) s += "(" + show(*n.a) + (n.b ? ", " + show(*n.b) : "") + ")";
  return s;
}

inline double refGelu(double x) { return 0.5 * x * (1 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x))); }
inline double refSigmoid(double x) { return 1 / (1 + std::exp(-x)); }

inline Tile build(const Node& n, const Tile& x, const Tile& y, Builder& k) {
  switch (n.op) {
  case Op::X: return x;
  case Op::Y: return y;
  case Op::Const: return k.full(x.shape(), n.c);
  case Op::Add: return build(*n.a, x, y, k) + build(*n.b, x, y, k);
  case Op::Sub: return build(*n.a, x, y, k) - build(*n.b, x, y, k);
  case Op::Mul: return build(*n.a, x, y, k) * build(*n.b, x, y, k);
  case Op::Max: return max(build(*n.a, x, y, k), build(*n.b, x, y, k));
  case Op::Min: return min(build(*n.a, x, y, k), build(*n.b, x, y, k));
  case Op::Neg: return -build(*n.a, x, y, k);
  case Op::Relu: return relu(build(*n.a, x, y, k));
  case Op::Tanh: return tanh(build(*n.a, x, y, k));
  case Op::Sigmoid: return sigmoid(build(*n.a, x, y, k));
  case Op::ExpTanh: return exp(tanh(build(*n.a, x, y, k)));
  case Op::Silu: return silu(build(*n.a, x, y, k));
  case Op::Gelu: return gelu(build(*n.a, x, y, k));
  case Op::Scale: return scale(build(*n.a, x, y, k), n.c);
  case Op::SubRowMax: {
    Tile t = build(*n.a, x, y, k);
    return t - cols(row_max(t));
  }
  case Op::AddRowSum: {
    Tile t = build(*n.a, x, y, k);
    return t + cols(scale(row_sum(t), 0.125));
  }
  case Op::WhereLe: { // min(a, b) by a comparison and a choice (continuous: no rounding flips it)
    Tile a = build(*n.a, x, y, k), b = build(*n.b, x, y, k);
    return where(a <= b, a, b);
  }
  case Op::LowerTriangle: { // the tile's elements on and below its diagonal, 0 above
    Tile t = build(*n.a, x, y, k);
    return t * (k.iota(t.shape(), 1) <= k.iota(t.shape(), 0));
  }
  case Op::TransposeTwice: return transpose(transpose(build(*n.a, x, y, k)));
  }
  return x;
}

using Grid = std::vector<double>; // one tile, row-major tm x tn
inline Grid eval(const Node& n, const Grid& x, const Grid& y, int64_t tm, int64_t tn) {
  auto map1 = [&](const std::function<double(double)>& f) {
    Grid g = eval(*n.a, x, y, tm, tn);
    for (double& v : g) v = f(v);
    return g;
  };
  auto map2 = [&](const std::function<double(double, double)>& f) {
    Grid g = eval(*n.a, x, y, tm, tn), h = eval(*n.b, x, y, tm, tn);
    for (size_t i = 0; i < g.size(); ++i) g[i] = f(g[i], h[i]);
    return g;
  };
  auto rows = [&](bool isMax) {
    Grid g = eval(*n.a, x, y, tm, tn);
    for (int64_t r = 0; r < tm; ++r) {
      double acc = isMax ? -INFINITY : 0;
      for (int64_t c = 0; c < tn; ++c) acc = isMax ? std::max(acc, g[size_t(r * tn + c)]) : acc + g[size_t(r * tn + c)];
      for (int64_t c = 0; c < tn; ++c) g[size_t(r * tn + c)] += isMax ? -acc : 0.125 * acc;
    }
    return g;
  };
  switch (n.op) {
  case Op::X: return x;
  case Op::Y: return y;
  case Op::Const: return Grid(x.size(), n.c);
  case Op::Add: return map2([](double a, double b) { return a + b; });
  case Op::Sub: return map2([](double a, double b) { return a - b; });
  case Op::Mul: return map2([](double a, double b) { return a * b; });
  case Op::Max: return map2([](double a, double b) { return std::max(a, b); });
  case Op::Min: return map2([](double a, double b) { return std::min(a, b); });
  case Op::Neg: return map1([](double a) { return -a; });
  case Op::Relu: return map1([](double a) { return std::max(a, 0.0); });
  case Op::Tanh: return map1([](double a) { return std::tanh(a); });
  case Op::Sigmoid: return map1(refSigmoid);
  case Op::ExpTanh: return map1([](double a) { return std::exp(std::tanh(a)); });
  case Op::Silu: return map1([](double a) { return a * refSigmoid(a); });
  case Op::Gelu: return map1(refGelu);
  case Op::Scale: return map1([&](double a) { return a * n.c; });
  case Op::SubRowMax: return rows(true);
  case Op::AddRowSum: return rows(false);
  case Op::WhereLe: return map2([](double a, double b) { return a <= b ? a : b; });
  case Op::LowerTriangle: {
    Grid g = eval(*n.a, x, y, tm, tn);
    for (int64_t r = 0; r < tm; ++r)
      for (int64_t c = r + 1; c < tn; ++c) g[size_t(r * tn + c)] = 0;
    return g;
  }
  case Op::TransposeTwice: return eval(*n.a, x, y, tm, tn);
  }
  return x;
}

inline Kernel randomKernel(const Node& tree, int64_t tm, int64_t tn, const std::string& name) {
  return kernel(name, [&](Builder& b) {
    auto [Md, Nd] = b.dims("M", "N");
    auto X = b.input("X", {Md, Nd}, f32), Y = b.input("Y", {Md, Nd}, f32);
    auto Z = b.output("Z", {Md, Nd}, f32);
    b.grid({cdiv(Md, tm), cdiv(Nd, tn)}, [&](Index i, Index j) {
      Tile x = b.load(X.tile({i, j}, {tm, tn})), y = b.load(Y.tile({i, j}, {tm, tn}));
      b.store(Z.tile({i, j}, {tm, tn}), build(tree, x, y, b));
    });
  });
}


/// Runs `tree` as a kiln kernel on `rt` (CPU, or a GPU: through device copies) with `tm` x
/// `tn` tiles on the M x N inputs `x` and `y` (row-major f32) and compares every output element with the f64 evaluation. Returns
/// the number of elements off by more than 1e-3 (relative, or absolute below 1), and
/// sets `worst` to the largest such error (infinity for a NaN).
inline int compareWithEval(const Runtime& rt, const Node& tree, int64_t tm, int64_t tn, HostTensor& x,
                           HostTensor& y, const std::string& name, double& worst) {
  const int64_t M = x.view().dims[0], N = x.view().dims[1];
  HostTensor z(DType::f32, {M, N});
  for (int64_t i = 0; i < M * N; ++i) z.set(i, NAN);
  CompiledKernel ck = rt.compile(randomKernel(tree, tm, tn, name));
  if (rt.backend() == Backend::cuda) {
    DeviceTensor dx = rt.upload(x), dy = rt.upload(y), dz = rt.upload(z);
    ck.launch({dx.view(), dy.view(), dz.view()});
    rt.synchronize();
    rt.download(dz, z);
  } else {
    ck.launch({x.view(), y.view(), z.view()});
  }
  int bad = 0;
  worst = 0;
  for (int64_t ti = 0; ti < (M + tm - 1) / tm; ++ti)
    for (int64_t tj = 0; tj < (N + tn - 1) / tn; ++tj) {
      Grid gx(size_t(tm * tn), 0.0), gy(size_t(tm * tn), 0.0);
      for (int64_t r = 0; r < tm; ++r)
        for (int64_t c = 0; c < tn; ++c) {
          const int64_t gr = ti * tm + r, gc = tj * tn + c;
          if (gr < M && gc < N) gx[size_t(r * tn + c)] = x.get(gr * N + gc), gy[size_t(r * tn + c)] = y.get(gr * N + gc);
        }
      const Grid want = eval(tree, gx, gy, tm, tn);
      for (int64_t r = 0; r < tm; ++r)
        for (int64_t c = 0; c < tn; ++c) {
          const int64_t gr = ti * tm + r, gc = tj * tn + c;
          if (gr >= M || gc >= N) continue;
          const double w = want[size_t(r * tn + c)], got = z.get(gr * N + gc);
          const double err = std::abs(got - w) / std::max(1.0, std::abs(w));
          worst = std::max(worst, std::isnan(got) ? INFINITY : err);
          bad += !(err <= 1e-3);
        }
    }
  return bad;
}

} // namespace kiln::testing::random_programs
