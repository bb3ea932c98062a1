// A differential test of the DSL and the CPU backend: random elementwise-and-row-reduction
// programs, each built twice from one expression tree, once as a kiln kernel and once as a
// direct f64 evaluation with the DSL's tile semantics (a masked load reads 0 past the edge;
// a row reduction runs over the whole tile), on ragged shapes. A fixed seed: the same
// programs on every machine; a failure prints the program.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kiln/dsl.hpp"
#include "kiln/runtime.hpp"

using namespace kiln;
using namespace kiln::dsl;

namespace {

enum class Op { X, Y, Const, Add, Sub, Mul, Max, Min, Neg, Relu, Tanh, Sigmoid, ExpTanh, Silu, Gelu, Scale, SubRowMax, AddRowSum };

struct Node {
  Op op = Op::X;
  double c = 0;
  std::unique_ptr<Node> a, b;
};

std::unique_ptr<Node> randomTree(std::mt19937_64& rng, int depth) {
  auto n = std::make_unique<Node>();
  auto pick = [&](int k) { return int(rng() % uint64_t(k)); };
  if (depth == 0 || pick(5) == 0) {
    const int leaf = pick(5);
    n->op = leaf < 2 ? Op::X : leaf < 4 ? Op::Y : Op::Const;
    n->c = double(pick(9)) * 0.25 - 1.0;
    return n;
  }
  static const Op unary[] = {Op::Neg, Op::Relu, Op::Tanh, Op::Sigmoid, Op::ExpTanh, Op::Silu, Op::Gelu, Op::Scale, Op::SubRowMax, Op::AddRowSum};
  static const Op binary[] = {Op::Add, Op::Sub, Op::Mul, Op::Max, Op::Min};
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

std::string show(const Node& n) {
  static const char* names[] = {"X", "Y", "const", "add", "sub", "mul", "max", "min", "neg", "relu", "tanh", "sigmoid",
                                "exp(tanh)", "silu", "gelu", "scale", "sub_row_max", "add_row_sum"};
  std::string s = names[int(n.op)];
  if (n.op == Op::Const || n.op == Op::Scale) s += "[" + std::to_string(n.c) + "]";
  if (n.a) s += "(" + show(*n.a) + (n.b ? ", " + show(*n.b) : "") + ")";
  return s;
}

double refGelu(double x) { return 0.5 * x * (1 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x))); }
double refSigmoid(double x) { return 1 / (1 + std::exp(-x)); }

Tile build(const Node& n, const Tile& x, const Tile& y, Builder& k) {
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
  }
  return x;
}

using Grid = std::vector<double>; // one tile, row-major tm x tn
Grid eval(const Node& n, const Grid& x, const Grid& y, int64_t tm, int64_t tn) {
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
  }
  return x;
}

Kernel randomKernel(const Node& tree, int64_t tm, int64_t tn, const std::string& name) {
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

} // namespace

TEST_CASE("random DSL programs agree with a direct evaluation of the same expression", "[dsl][cpu][random]") {
  std::mt19937_64 rng(20261201);
  Runtime rt = Runtime::create(Backend::cpu, {.cache_dir = "off"});
  const int64_t tileRows[] = {1, 4, 8, 16}, tileCols[] = {8, 16, 32, 64};
  for (int program = 0; program < 40; ++program) {
    std::shared_ptr<Node> tree = randomTree(rng, 4);
    const int64_t tm = tileRows[rng() % 4], tn = tileCols[rng() % 4];
    const int64_t M = 1 + int64_t(rng() % 40), N = 1 + int64_t(rng() % 90);
    INFO("program " << program << ": " << show(*tree) << " on " << M << "x" << N << ", tiles " << tm << "x" << tn);
    Kernel k = randomKernel(*tree, tm, tn, "random_" + std::to_string(program));
    CompiledKernel ck = rt.compile(k);
    HostTensor x(DType::f32, {M, N}), y(DType::f32, {M, N}), z(DType::f32, {M, N});
    std::uniform_real_distribution<float> u(-2.0f, 2.0f);
    for (int64_t i = 0; i < M * N; ++i) x.set(i, u(rng)), y.set(i, u(rng)), z.set(i, NAN);
    ck.launch({x.view(), y.view(), z.view()});
    // The reference, tile by tile: masked loads read 0 past the edges.
    int bad = 0;
    double worst = 0;
    for (int64_t ti = 0; ti < (M + tm - 1) / tm; ++ti)
      for (int64_t tj = 0; tj < (N + tn - 1) / tn; ++tj) {
        Grid gx(size_t(tm * tn), 0.0), gy(size_t(tm * tn), 0.0);
        for (int64_t r = 0; r < tm; ++r)
          for (int64_t c = 0; c < tn; ++c) {
            const int64_t gr = ti * tm + r, gc = tj * tn + c;
            if (gr < M && gc < N) gx[size_t(r * tn + c)] = x.get(gr * N + gc), gy[size_t(r * tn + c)] = y.get(gr * N + gc);
          }
        const Grid want = eval(*tree, gx, gy, tm, tn);
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
    INFO("worst relative error " << worst);
    CHECK(bad == 0);
  }
}

TEST_CASE("random DSL programs lower to PTX for sm_80 and sm_90a", "[dsl][cuda][random]") {
  // The CUDA lowering of the same kind of programs (no GPU here: PTX only; the CPU test
  // above checks their values).
  std::mt19937_64 rng(20261202);
  const int64_t tileRows[] = {1, 4, 8, 16}, tileCols[] = {8, 16, 32, 64};
  for (const char* arch : {"sm_80", "sm_90a"}) {
    Runtime rt = Runtime::create(Backend::cuda, {.compile_only = true, .arch = arch, .cache_dir = "off"});
    for (int program = 0; program < 8; ++program) {
      std::shared_ptr<Node> tree = randomTree(rng, 4);
      const int64_t tm = tileRows[rng() % 4], tn = tileCols[rng() % 4];
      INFO(arch << " program " << program << ": " << show(*tree) << ", tiles " << tm << "x" << tn);
      const std::string ptx = rt.emit(randomKernel(*tree, tm, tn, "random_" + std::to_string(program)), Stage::ptx);
      CHECK(ptx.find(".entry random_" + std::to_string(program)) != std::string::npos);
    }
  }
}
