// Launch arguments are checked before a kernel runs; each mistake is a kiln::Error that
// names the kernel, the argument and the rule broken.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>

#include "kiln/catalogue.hpp"
#include "kiln/dsl.hpp"
#include "kiln/error.hpp"
#include "kiln/reference.hpp"
#include "kiln/runtime.hpp"

using namespace kiln;
using Catch::Matchers::Contains;

namespace {

struct Gemm {
  CompiledKernel ck = Runtime::create(Backend::cpu).compile(catalogue::gemm(DType::f32));
  HostTensor a{DType::f32, {8, 5}}, b{DType::f32, {5, 6}}, c{DType::f32, {8, 6}};
};

std::string launchError(const CompiledKernel& ck, const std::vector<TensorView>& args) {
  try {
    ck.launch(args);
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::InvalidArgument);
    return e.what();
  }
  FAIL("expected the launch to be rejected");
  return {};
}

} // namespace

TEST_CASE("a launch with the wrong number of arguments lists the signature", "[launch][errors]") {
  Gemm g;
  auto msg = launchError(g.ck, {g.a.view(), g.b.view()});
  CHECK_THAT(msg, Contains("kernel 'gemm': expects 3 arguments"));
  CHECK_THAT(msg, Contains("out C: f32[M, N]"));
}

TEST_CASE("a launch with the wrong rank names the argument", "[launch][errors]") {
  Gemm g;
  HostTensor v(DType::f32, {40});
  CHECK_THAT(launchError(g.ck, {g.a.view(), v.view(), g.c.view()}),
             Contains("argument 'B' must have rank 2"));
}

TEST_CASE("a launch with the wrong dtype names the argument and both dtypes", "[launch][errors]") {
  Gemm g;
  HostTensor b16(DType::bf16, {5, 6});
  CHECK_THAT(launchError(g.ck, {g.a.view(), b16.view(), g.c.view()}),
             Contains("argument 'B' must be f32, got bf16"));
}

TEST_CASE("disagreeing uses of a dim symbol name both arguments", "[launch][errors]") {
  Gemm g;
  HostTensor b(DType::f32, {7, 6});
  CHECK_THAT(launchError(g.ck, {g.a.view(), b.view(), g.c.view()}),
             Contains("argument 'B' dim 0 is 7 but K = 5 (from argument 'A' dim 1)"));
  HostTensor c(DType::f32, {8, 9});
  CHECK_THAT(launchError(g.ck, {g.a.view(), g.b.view(), c.view()}),
             Contains("argument 'C' dim 1 is 9 but N = 6"));
}

TEST_CASE("a constant dim must match exactly", "[launch][errors]") {
  using namespace kiln::dsl;
  Kernel k = kernel("fixed", [](Builder& b) {
    auto [M] = b.dims("M");
    auto X = b.input("X", {M, 64}, f32);
    auto Y = b.output("Y", {M, 64}, f32);
    b.grid({cdiv(M, 4)}, [&](Index i) {
      b.store(Y.tile({i, b.constant(0)}, {4, 64}), b.load(X.tile({i, b.constant(0)}, {4, 64})));
    });
  });
  CompiledKernel ck = Runtime::create(Backend::cpu).compile(k);
  HostTensor x(DType::f32, {3, 63}), y(DType::f32, {3, 64});
  CHECK_THAT(launchError(ck, {x.view(), y.view()}), Contains("argument 'X' dim 1 must be 64, got 63"));
}

TEST_CASE("negative, zero and mismatched strides are rejected", "[launch][errors]") {
  Gemm g;
  TensorView b = g.b.view();
  b.strides = {-6, 1};
  CHECK_THAT(launchError(g.ck, {g.a.view(), b, g.c.view()}),
             Contains("argument 'B' dim 0 has stride -6: strides must be positive"));
  b.strides = {0, 1};
  CHECK_THAT(launchError(g.ck, {g.a.view(), b, g.c.view()}), Contains("has stride 0"));
  b.strides = {6};
  CHECK_THAT(launchError(g.ck, {g.a.view(), b, g.c.view()}), Contains("has 1 strides for 2 dims"));
}

TEST_CASE("null data with elements and negative dims are rejected", "[launch][errors]") {
  Gemm g;
  TensorView a = g.a.view();
  a.data = nullptr;
  CHECK_THAT(launchError(g.ck, {a, g.b.view(), g.c.view()}), Contains("argument 'A' has null data"));
  TensorView c = g.c.view();
  c.dims = {-8, 6};
  CHECK_THAT(launchError(g.ck, {g.a.view(), g.b.view(), c}), Contains("argument 'C' dim 0 is negative"));
}

TEST_CASE("a rejected launch writes nothing and the kernel stays usable", "[launch][errors]") {
  Gemm g;
  g.a.fill_random(1);
  g.b.fill_random(2);
  g.c.poison();
  HostTensor bad(DType::f32, {9, 6});
  launchError(g.ck, {g.a.view(), g.b.view(), bad.view()});
  for (int64_t i = 0; i < g.c.numel(); ++i) REQUIRE(std::isnan(g.c.get(i)));
  g.ck.launch({g.a.view(), g.b.view(), g.c.view()});
  auto ref = reference::gemm(g.a.view(), g.b.view(), nullptr, reference::Epilogue::none);
  CHECK(verify::compare(g.c.view(), ref, verify::Tolerance::for_dtype(DType::f32)).ok);
}

TEST_CASE("empty tensors launch: K = 0 gives zeros, M = 0 and N = 0 write nothing", "[launch]") {
  Gemm g;
  // K = 0: C = A @ B is all zeros (the row-major strides of a 5x0 A are {0, 1}).
  HostTensor a(DType::f32, {8, 0}), b(DType::f32, {0, 6}), c(DType::f32, {8, 6});
  c.poison();
  g.ck.launch({a.view(), b.view(), c.view()});
  for (int64_t i = 0; i < c.numel(); ++i) REQUIRE(c.get(i) == 0.0f);
  // M = 0 and N = 0: nothing to write, and nothing is refused.
  HostTensor a0(DType::f32, {0, 5}), c0(DType::f32, {0, 6}), b0(DType::f32, {5, 0}), cn(DType::f32, {8, 0});
  g.ck.launch({a0.view(), g.b.view(), c0.view()});
  g.ck.launch({g.a.view(), b0.view(), cn.view()});
  SUCCEED("0-row and 0-column GEMMs ran");
}

TEST_CASE("dims or strides whose span overflows int64 are rejected before the kernel runs", "[launch][errors]") {
  Gemm g;
  const int64_t big = int64_t(1) << 62;
  // Dims that fit no address space, over a real (small) buffer: the kernel would read and
  // write far outside it.
  TensorView a = g.a.view(), c = g.c.view();
  a.dims = {big, 5};
  c.dims = {big, 6};
  CHECK_THAT(launchError(g.ck, {a, g.b.view(), c}), Contains("argument 'A'") && Contains("spans more bytes"));
  a.dims = {3037000500, 5};
  c.dims = {3037000500, 6};
  a.strides = {3037000500, 1};
  CHECK_THAT(launchError(g.ck, {a, g.b.view(), c}), Contains("argument 'A'") && Contains("spans more bytes"));
  // Strides alone: INT64_MAX / 2 per row over 8 rows.
  TensorView b = g.b.view();
  b.strides = {INT64_MAX / 2, 1};
  CHECK_THAT(launchError(g.ck, {g.a.view(), b, g.c.view()}), Contains("argument 'B'") && Contains("spans more bytes"));
  // Elements that fit in int64 but not their bytes (f32: 4 each).
  TensorView c2 = g.c.view();
  c2.dims = {INT64_MAX / 6, 6};
  c2.strides = {6, 1};
  CHECK_THAT(launchError(g.ck, {g.a.view(), g.b.view(), c2}), Contains("spans more bytes"));
}

TEST_CASE("an output that overlaps an input or itself is refused: no silent wrong answer", "[launch][errors]") {
  // A square GEMM where C could be laid over A or B: a contraction reads them while C is
  // written, so neither the same view nor a part of one is allowed.
  CompiledKernel ck = Runtime::create(Backend::cpu).compile(catalogue::gemm(DType::f32));
  HostTensor a(DType::f32, {8, 8}), b(DType::f32, {8, 8}), c(DType::f32, {8, 8});
  CHECK_THAT(launchError(ck, {a.view(), b.view(), a.view()}),
             Contains("output 'C' overlaps input 'A'") && Contains("a contraction reads input 'A'"));
  CHECK_THAT(launchError(ck, {a.view(), b.view(), b.view()}), Contains("output 'C' overlaps input 'B'"));
  TensorView part = a.view(); // C: the last 4 rows of A's buffer
  part.data = static_cast<float*>(a.data()) + 32;
  part.dims = {4, 8};
  HostTensor a4(DType::f32, {4, 8});
  CHECK_NOTHROW(ck.launch({a4.view(), b.view(), part})); // in A's buffer, but not A's memory here
  TensorView a8 = a.view();
  a8.dims = {4, 8};
  CHECK_THAT(launchError(ck, {a8, b.view(), [&] { TensorView v = a.view(); v.data = static_cast<float*>(a.data()) + 24; v.dims = {4, 8}; return v; }()}),
             Contains("overlaps input 'A'"));
  // C overlapping itself: strides {1, 1} and {4, 1} for 8 columns.
  for (std::vector<int64_t> strides : {std::vector<int64_t>{1, 1}, std::vector<int64_t>{4, 1}}) {
    TensorView self = c.view();
    self.strides = strides;
    CHECK_THAT(launchError(ck, {a.view(), b.view(), self}), Contains("output 'C' overlaps itself"));
  }
  // Padded rows and a column-major C are apart from themselves: accepted.
  HostTensor padded(DType::f32, {8, 12});
  TensorView p = padded.view();
  p.dims = {8, 8};
  CHECK_NOTHROW(ck.launch({a.view(), b.view(), p}));
  TensorView colMajor = c.view();
  colMajor.strides = {1, 8};
  CHECK_NOTHROW(ck.launch({a.view(), b.view(), colMajor}));
}

TEST_CASE("elementwise, row-wise and residual inputs may be written in place, as the very same view", "[launch]") {
  Runtime rt = Runtime::create(Backend::cpu);
  // add: Y = X0 + X1 into X0.
  catalogue::Problem p = catalogue::find("add").problem({7, 33}, DType::f32, 5);
  HostTensor x0 = p.args[0], x1 = p.args[1];
  CompiledKernel add = rt.compile(catalogue::add(DType::f32));
  add.launch({x0.view(), x1.view(), x0.view()});
  CHECK(verify::compare(x0.view(), p.reference, verify::Tolerance::for_dtype(DType::f32)).ok);
  // softmax in place.
  catalogue::Problem s = catalogue::find("softmax").problem({5, 300}, DType::f32, 6);
  HostTensor x = s.args[0];
  rt.compile(catalogue::softmax(DType::f32)).launch({x.view(), x.view()});
  CHECK(verify::compare(x.view(), s.reference, verify::Tolerance::for_dtype(DType::f32)).ok);
  // rmsnorm: Y over X.
  catalogue::Problem r = catalogue::find("rmsnorm").problem({6, 200}, DType::bf16, 7);
  HostTensor rx = r.args[0], rw = r.args[1];
  rt.compile(catalogue::rmsnorm(DType::bf16)).launch({rx.view(), rw.view(), rx.view()});
  CHECK(verify::compare(rx.view(), r.reference, verify::Tolerance::for_dtype(DType::bf16)).ok);
  // A GEMM's C written over its residual R (A, B, bias, R, C).
  catalogue::Problem g = catalogue::find("gemm_bias_residual").problem({33, 17, 9}, DType::f32, 8);
  HostTensor ga = g.args[0], gb = g.args[1], gbias = g.args[2], gr = g.args[3];
  rt.compile(catalogue::gemm_bias_residual(DType::f32)).launch({ga.view(), gb.view(), gbias.view(), gr.view(), gr.view()});
  CHECK(verify::compare(gr.view(), g.reference, verify::Tolerance::for_dtype(DType::f32)).ok);
  // A view that only partly covers the input is refused even there.
  TensorView shifted = x.view();
  shifted.data = static_cast<float*>(x.data()) + 1;
  shifted.dims = {4, 300};
  TensorView x4 = x.view();
  x4.dims = {4, 300};
  CHECK_THAT(launchError(rt.compile(catalogue::softmax(DType::f32)), {x4, shifted}),
             Contains("only the very same view of an input may be written in place"));
}

namespace {
// Y[i, j] = 2 X[i, j] with 4x8 tiles, optionally declared writable in place over X.
Kernel scale(bool inPlace) {
  return dsl::kernel(inPlace ? "scale_in_place" : "scale", [=](dsl::Builder& k) {
    auto [M, N] = k.dims("M", "N");
    auto X = k.input("X", {M, N}, DType::f32);
    auto Y = k.output("Y", {M, N}, DType::f32);
    if (inPlace) k.allow_in_place(Y, X);
    k.grid({dsl::cdiv(M, 4), dsl::cdiv(N, 8)}, [&](dsl::Index i, dsl::Index j) {
      k.store(Y.tile({i, j}, {4, 8}), k.load(X.tile({i, j}, {4, 8})) * k.full({4, 8}, 2.0));
    });
  });
}
} // namespace

TEST_CASE("a kernel runs in place only where it declares it may: an undeclared one is refused naming the rule",
          "[launch][errors]") {
  Runtime rt = Runtime::create(Backend::cpu);
  HostTensor x(DType::f32, {9, 20});
  for (int64_t e = 0; e < 9 * 20; ++e) static_cast<float*>(x.data())[e] = float(e % 13) - 6.0f;
  const HostTensor before = x;
  CHECK_THAT(launchError(rt.compile(scale(false)), {x.view(), x.view()}),
             Contains("output 'Y' overlaps input 'X'") &&
                 Contains("the kernel does not declare that output 'Y' may be written in place over input 'X' "
                          "(dsl::Builder::allow_in_place)"));
  CHECK(std::memcmp(x.data(), before.data(), 9 * 20 * sizeof(float)) == 0); // refused before it ran
  CompiledKernel declared = rt.compile(scale(true));
  CHECK(declared.signature().args[1].in_place_over == std::vector<std::string>{"X"});
  declared.launch({x.view(), x.view()});
  for (int64_t e = 0; e < 9 * 20; ++e)
    CHECK(static_cast<float*>(x.data())[e] == 2.0f * static_cast<const float*>(before.data())[e]);
  // Declared or not, two outputs never share memory, and a partial overlap is refused.
  TensorView shifted = x.view();
  shifted.data = static_cast<float*>(x.data()) + 20;
  shifted.dims = {8, 20};
  TensorView x8 = x.view();
  x8.dims = {8, 20};
  CHECK_THAT(launchError(declared, {x8, shifted}), Contains("only the very same view of an input may be written in place"));
}

TEST_CASE("a declaration covers its own pair only, and two outputs never share memory", "[launch][errors]") {
  // Y = X + W, declared in place over X only; Y2 = X, a second output.
  Kernel k = dsl::kernel("two_outs", [](dsl::Builder& b) {
    auto [M, N] = b.dims("M", "N");
    auto X = b.input("X", {M, N}, DType::f32), W = b.input("W", {M, N}, DType::f32);
    auto Y = b.output("Y", {M, N}, DType::f32), Y2 = b.output("Y2", {M, N}, DType::f32);
    b.allow_in_place(Y, X);
    b.grid({dsl::cdiv(M, 4), dsl::cdiv(N, 8)}, [&](dsl::Index i, dsl::Index j) {
      dsl::Tile x = b.load(X.tile({i, j}, {4, 8}));
      b.store(Y.tile({i, j}, {4, 8}), x + b.load(W.tile({i, j}, {4, 8})));
      b.store(Y2.tile({i, j}, {4, 8}), x);
    });
  });
  CompiledKernel ck = Runtime::create(Backend::cpu).compile(k);
  HostTensor x(DType::f32, {5, 9}), w(DType::f32, {5, 9}), y2(DType::f32, {5, 9}), y(DType::f32, {5, 9});
  CHECK_NOTHROW(ck.launch({x.view(), w.view(), x.view(), y2.view()}));
  CHECK_THAT(launchError(ck, {x.view(), w.view(), w.view(), y2.view()}),
             Contains("output 'Y' overlaps input 'W'") &&
                 Contains("the kernel does not declare that output 'Y' may be written in place over input 'W'"));
  CHECK_THAT(launchError(ck, {x.view(), w.view(), y.view(), y.view()}),
             Contains("overlaps output") && Contains("two outputs may not share memory"));
}
