// Index tiles, comparisons, where() and transpose(): what attention needs to be written in
// the kernel (masks, K^T) rather than passed in as tensors. Run on the CPU backend here;
// test_gpu_kernels.cpp runs the same kernels on the GPU.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "dsl_attention.hpp"
#include "kiln/dsl.hpp"
#include "kiln/error.hpp"
#include "kiln/runtime.hpp"

using namespace kiln;
using namespace kiln::dsl;
using Catch::Matchers::Contains;

namespace {

std::string invalidKernel(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::InvalidKernel);
    return e.what();
  }
  FAIL("expected an InvalidKernel error");
  return {};
}

/// A kernel Y = body(b, x) over one 4 x 8 tile of a 4 x 8 f32 input, run on `in`.
HostTensor runTile(const std::function<Tile(Builder&, const Tile&)>& body, const HostTensor& in) {
  Kernel k = kernel("tile_op", [&](Builder& b) {
    auto X = b.input("X", {4, 8}, f32);
    auto Y = b.output("Y", {4, 8}, f32);
    b.grid({b.constant(1)}, [&](Index i) {
      b.store(Y.tile({i, i}, {4, 8}), body(b, b.load(X.tile({i, i}, {4, 8}))));
    });
  });
  HostTensor x = in, y(DType::f32, {4, 8});
  y.poison();
  Runtime::create(Backend::cpu).compile(k).launch({x.view(), y.view()});
  return y;
}

} // namespace

TEST_CASE("iota holds each element's index along one dim, offset by a splat to a tensor position", "[dsl][cpu]") {
  HostTensor x(DType::f32, {4, 8});
  x.fill_random(1);
  HostTensor rows = runTile([](Builder& b, const Tile&) { return b.iota({4, 8}, 0); }, x);
  HostTensor cols = runTile([](Builder& b, const Tile&) { return b.iota({4, 8}, 1) + b.full({4, 8}, 100.0); }, x);
  for (int64_t e = 0; e < 32; ++e) {
    CHECK(rows.get(e) == float(e / 8));
    CHECK(cols.get(e) == float(100 + e % 8));
  }
}

TEST_CASE("comparisons give 1 where they hold and 0 where not, NaN as C++ compares floats", "[dsl][cpu]") {
  HostTensor x(DType::f32, {4, 8});
  x.fill_random(2);
  x.set(5, std::numeric_limits<float>::quiet_NaN());
  x.set(6, 0.0f);
  using Cmp = Tile (*)(const Tile&, const Tile&, Where);
  struct Case {
    const char* name;
    Cmp op;
    bool (*want)(float, float);
  };
  const Case cases[] = {{"less", less, [](float a, float b) { return a < b; }},
                        {"less_equal", less_equal, [](float a, float b) { return a <= b; }},
                        {"greater", greater, [](float a, float b) { return a > b; }},
                        {"greater_equal", greater_equal, [](float a, float b) { return a >= b; }},
                        {"equal", equal, [](float a, float b) { return a == b; }},
                        {"not_equal", not_equal, [](float a, float b) { return a != b; }}};
  for (const Case& c : cases) {
    INFO(c.name);
    HostTensor y = runTile([&](Builder& b, const Tile& t) { return c.op(t, b.zeros({4, 8}), Where::current()); }, x);
    for (int64_t e = 0; e < 32; ++e) CHECK(y.get(e) == (c.want(x.get(e), 0.0f) ? 1.0f : 0.0f));
  }
  // The operators are the named functions.
  HostTensor lt = runTile([](Builder& b, const Tile& t) { return t < b.zeros({4, 8}); }, x);
  HostTensor ge = runTile([](Builder& b, const Tile& t) { return t >= b.zeros({4, 8}); }, x);
  for (int64_t e = 0; e < 32; ++e) {
    CHECK(lt.get(e) == (x.get(e) < 0.0f ? 1.0f : 0.0f));
    CHECK(ge.get(e) == (x.get(e) >= 0.0f ? 1.0f : 0.0f));
  }
}

TEST_CASE("where picks the first choice where the mask is not 0, NaN included", "[dsl][cpu]") {
  HostTensor x(DType::f32, {4, 8});
  x.fill_random(3);
  x.set(3, 0.0f);
  x.set(4, std::numeric_limits<float>::quiet_NaN());
  HostTensor y = runTile([](Builder& b, const Tile& t) { return where(t, b.full({4, 8}, 7.0), b.full({4, 8}, -7.0)); }, x);
  for (int64_t e = 0; e < 32; ++e) CHECK(y.get(e) == (x.get(e) != 0.0f ? 7.0f : -7.0f));
  CHECK(y.get(3) == -7.0f);
  CHECK(y.get(4) == 7.0f);
}

TEST_CASE("a causal mask written with iota and where runs on ragged shapes", "[dsl][cpu]") {
  auto ck = Runtime::create(Backend::cpu).compile(test::causalMask(DType::bf16));
  for (auto [m, n] : {std::pair<int64_t, int64_t>{16, 32}, {33, 70}, {5, 3}}) {
    INFO(m << "x" << n);
    HostTensor x(DType::bf16, {m, n}), y(DType::bf16, {m, n});
    x.fill_random(uint64_t(m * n));
    y.poison();
    ck.launch({x.view(), y.view()});
    for (int64_t r = 0; r < m; ++r)
      for (int64_t c = 0; c < n; ++c)
        REQUIRE(y.get(r * n + c) == (c <= r ? x.get(r * n + c) : -INFINITY));
  }
}

TEST_CASE("transpose swaps a tile's dims", "[dsl][cpu]") {
  auto ck = Runtime::create(Backend::cpu).compile(test::transposeCopy(DType::f16));
  for (auto [m, n] : {std::pair<int64_t, int64_t>{16, 32}, {40, 70}, {1, 5}}) {
    INFO(m << "x" << n);
    HostTensor x(DType::f16, {m, n}), y(DType::f16, {n, m});
    x.fill_random(uint64_t(m + n));
    y.poison();
    ck.launch({x.view(), y.view()});
    for (int64_t r = 0; r < m; ++r)
      for (int64_t c = 0; c < n; ++c) REQUIRE(y.get(c * m + r) == x.get(r * n + c));
  }
}

TEST_CASE("attention written with transpose, iota and where agrees with a double-precision reference", "[dsl][cpu]") {
  auto rt = Runtime::create(Backend::cpu);
  for (bool causal : {false, true}) {
    auto ck = rt.compile(test::attention(DType::f32, 32, causal, 16));
    for (int64_t S : {16, 45}) {
      INFO((causal ? "causal" : "full") << " S=" << S);
      HostTensor q(DType::f32, {S, 32}), k(DType::f32, {S, 32}), v(DType::f32, {S, 32}), o(DType::f32, {S, 32});
      q.fill_random(uint64_t(S)), k.fill_random(uint64_t(S) + 1), v.fill_random(uint64_t(S) + 2);
      o.poison();
      ck.launch({q.view(), k.view(), v.view(), o.view()});
      CHECK(test::worstError(o, test::attentionReference(q, k, v, causal)) < 1e-5);
    }
  }
}

TEST_CASE("a tile of fewer dims than its tensor fixes the leading dims, and past them reads and writes nothing",
          "[dsl][cpu]") {
  // Y[b] = 2 X[b] for b < B, by 4 x 8 tiles, over a grid one batch too long.
  Kernel k = kernel("batched_copy", [](Builder& b) {
    auto [B, M, N] = b.dims("B", "M", "N");
    auto X = b.input("X", {B, M, N}, f32);
    auto Y = b.output("Y", {B, M, N}, f32);
    b.grid({cdiv(M, 4), cdiv(N, 8), B + 1}, [&](Index i, Index j, Index n) {
      b.store(Y.tile({n, i, j}, {4, 8}), b.load(X.tile({n, i, j}, {4, 8}), 5.0) * 2.0);
    });
  });
  CHECK_THAT(k.tile_ir(), Contains("-> <4x8xf32>"));
  auto ck = Runtime::create(Backend::cpu).compile(k);
  HostTensor x(DType::f32, {3, 9, 13}), y(DType::f32, {3, 9, 13});
  x.fill_random(11);
  y.poison();
  ck.launch({x.view(), y.view()});
  for (int64_t e = 0; e < x.numel(); ++e) REQUIRE(y.get(e) == 2.0f * x.get(e));
}

TEST_CASE("row statistics of a product's scores, carried by a loop and stored as rows, match the host", "[dsl][cpu]") {
  const int64_t M = 70, N = 150, D = 32;
  auto ck = Runtime::create(Backend::cpu).compile(test::scoreRowStats(DType::bf16, D));
  HostTensor q(DType::bf16, {M, D}), k(DType::bf16, {N, D}), mx(DType::f32, {M}), sum(DType::f32, {M});
  q.fill_random(4), k.fill_random(5);
  mx.poison(), sum.poison();
  ck.launch({q.view(), k.view(), mx.view(), sum.view()});
  for (int64_t r = 0; r < M; ++r) {
    double m = -INFINITY, t = 0;
    for (int64_t c = 0; c < N; ++c) {
      double s = 0;
      for (int64_t d = 0; d < D; ++d) s += double(q.get(r * D + d)) * double(k.get(c * D + d));
      m = std::max(m, s), t += s;
    }
    INFO("row " << r);
    CHECK(std::abs(mx.get(r) - m) <= 1e-4 * (1 + std::abs(m)));
    CHECK(std::abs(sum.get(r) - t) <= 1e-3 * (1 + std::abs(t)));
  }
}

TEST_CASE("index division by an index rounds down, never traps on a zero, and min picks the smaller", "[dsl][cpu]") {
  // Y[i] = i / (P - Q), Z[i] = min(i, P - Q): the divisor is a launch value, here 3, 1, 0 and -2.
  Kernel k = kernel("index_math", [](Builder& b) {
    auto [N, P, Q] = b.dims("N", "P", "Q");
    b.input("A", {P}, f32), b.input("B", {Q}, f32);
    auto Y = b.output("Y", {N}, f32), Z = b.output("Z", {N}, f32);
    b.grid({N}, [&](Index i) {
      b.store(Y.tile({i}, {1}), b.splat(i / (P - Q), {1}));
      b.store(Z.tile({i}, {1}), b.splat(min(i, P - Q), {1}));
    });
  });
  auto ck = Runtime::create(Backend::cpu).compile(k);
  for (int64_t d : {3, 1, 0, -2}) {
    const int64_t n = 10, p = 4 + (d < 0 ? 0 : d), q = p - d;
    HostTensor a(DType::f32, {p}), bq(DType::f32, {q}), y(DType::f32, {n}), z(DType::f32, {n});
    y.poison(), z.poison();
    ck.launch({a.view(), bq.view(), y.view(), z.view()});
    INFO("divisor " << d);
    for (int64_t i = 0; i < n; ++i) {
      CHECK(y.get(i) == float(d >= 1 ? i / d : i)); // below 1: divided by 1
      CHECK(z.get(i) == float(std::min(i, d)));
    }
  }
}

TEST_CASE("batched attention with grouped K/V heads agrees with the reference head by head", "[dsl][cpu]") {
  const int64_t B = 2, H = 4, group = 2, G = H / group, S = 45, D = 32;
  auto ck = Runtime::create(Backend::cpu).compile(test::groupedAttention(DType::f32, D, true, group, 16));
  HostTensor q(DType::f32, {B, H, S, D}), k(DType::f32, {B, G, S, D}), v(DType::f32, {B, G, S, D}), o(DType::f32, {B, H, S, D});
  q.fill_random(1), k.fill_random(2), v.fill_random(3);
  o.poison();
  ck.launch({q.view(), k.view(), v.view(), o.view()});
  const std::vector<double> worst = test::groupedAttentionErrors(q, k, v, o, group, true);
  REQUIRE(worst.size() == size_t(B * H));
  for (size_t head = 0; head < worst.size(); ++head) {
    INFO("batch " << head / H << " head " << head % H);
    CHECK(worst[head] < 1e-5);
  }
}

TEST_CASE("masks and transposes refuse malformed tiles by name", "[dsl][errors]") {
  auto inKernel = [](const std::function<void(Builder&)>& body) {
    return [body] {
      kernel("bad", [&](Builder& b) {
        auto X = b.input("X", {4, 8}, f32);
        auto Y = b.output("Y", {4, 8}, f32);
        body(b);
        b.store(Y.tile({b.constant(0), b.constant(0)}, {4, 8}), b.load(X.tile({b.constant(0), b.constant(0)}, {4, 8})));
      });
    };
  };
  CHECK_THAT(invalidKernel(inKernel([](Builder& b) { b.iota({4, 8}, 2); })),
             Contains("iota of 4x8xf32 along dim 2: out of range") && Contains("test_dsl_masks.cpp"));
  CHECK_THAT(invalidKernel(inKernel([](Builder& b) { b.iota({512, 2}, 0, bf16); })),
             Contains("indexes up to 511 along dim 0 are not exact in bf16 (at most 256): use f32"));
  CHECK_THAT(invalidKernel(inKernel([](Builder& b) { transpose(b.zeros({8})); })),
             Contains("transpose of 8xf32: needs a rank-2 tile"));
  CHECK_THAT(invalidKernel(inKernel([](Builder& b) { less(b.zeros({4, 8}), b.zeros({8, 4})); })),
             Contains("less of 4x8xf32 and 8x4xf32: tiles must match in shape and dtype"));
  CHECK_THAT(invalidKernel(inKernel([](Builder& b) { where(b.zeros({4, 8}), b.zeros({4, 8}), b.zeros({4, 8}, bf16)); })),
             Contains("where(4x8xf32, 4x8xf32, 4x8xbf16): the mask and both choices must match"));
}

TEST_CASE("attention over sequences padded to one length reads each sequence's length from an i32 input and "
          "agrees with the reference over that many keys",
          "[dsl][cpu]") {
  const int64_t B = 4, H = 4, S = 45, D = 32;
  // Lengths: whole, ragged, a tile's worth, and one past S (taken as S): rows and keys past
  // a sequence's length are never compared, and its keys never read.
  const std::vector<int32_t> lens = {45, 17, 16, 70};
  for (int64_t group : {1, 2})
    for (bool causal : {false, true}) {
      INFO("group " << group << (causal ? " causal" : " full"));
      const int64_t G = H / group;
      auto ck = Runtime::create(Backend::cpu).compile(test::paddedAttention(DType::f32, D, causal, group, 16));
      HostTensor q(DType::f32, {B, H, S, D}), k(DType::f32, {B, G, S, D}), v(DType::f32, {B, G, S, D}),
          o(DType::f32, {B, H, S, D}), l(DType::i32, {B});
      q.fill_random(1), k.fill_random(2), v.fill_random(3);
      for (int64_t n = 0; n < B; ++n) l.set(n, float(lens[size_t(n)]));
      o.poison();
      ck.launch({q.view(), k.view(), v.view(), l.view(), o.view()});
      const std::vector<double> worst = test::paddedAttentionErrors(q, k, v, o, lens, group, causal);
      REQUIRE(worst.size() == size_t(B * H));
      for (size_t head = 0; head < worst.size(); ++head) {
        INFO("batch " << head / H << " head " << head % H);
        CHECK(worst[head] < 1e-5);
      }
      // The keys past a length are not only masked: they change nothing. K and V there made
      // NaN, the checked rows are the same.
      HostTensor k2 = k, v2 = v, o2(DType::f32, {B, H, S, D});
      for (int64_t n = 0; n < B; ++n)
        for (int64_t g = 0; g < G; ++g)
          for (int64_t c = std::min<int64_t>(S, lens[size_t(n)]); c < S; ++c)
            for (int64_t d = 0; d < D; ++d) {
              k2.set(((n * G + g) * S + c) * D + d, NAN);
              v2.set(((n * G + g) * S + c) * D + d, NAN);
            }
      o2.poison();
      ck.launch({q.view(), k2.view(), v2.view(), l.view(), o2.view()});
      const std::vector<double> worst2 = test::paddedAttentionErrors(q, k2, v2, o2, lens, group, causal);
      for (size_t head = 0; head < worst2.size(); ++head) CHECK(worst2[head] < 1e-5);
    }
}

TEST_CASE("attention over sequences packed end to end windows each tensor to its sequence from an i32 offsets input "
          "and agrees with the reference per sequence",
          "[dsl][cpu]") {
  const int64_t H = 4, D = 32, T = 112;
  // Sequences of 45, 17, 16 (one tile), 0 and 30 tokens, then 4 tokens of no sequence: their
  // output rows must stay untouched, and their K/V (NaN) must never reach a result.
  const std::vector<int32_t> offsets = {0, 45, 62, 78, 78, 108};
  for (int64_t group : {1, 2})
    for (bool causal : {false, true}) {
      INFO("group " << group << (causal ? " causal" : " full"));
      const int64_t G = H / group;
      auto ck = Runtime::create(Backend::cpu).compile(test::packedAttention(DType::f32, D, causal, group, 16));
      test::PackedInputs in(DType::f32, T, H, G, D, offsets);
      const HostTensor untouched = in.o;
      ck.launch({test::packedView(in.q.view()), test::packedView(in.k.view()), test::packedView(in.v.view()),
                 in.offsets.view(), test::packedView(in.o.view())});
      test::checkPacked(in, untouched, offsets, group, causal, 1e-5);
    }
}

TEST_CASE("packed attention leaves a sequence whose window starts before the tensor empty, as Tensor::window says",
          "[dsl][cpu]") {
  for (bool causal : {false, true}) test::checkPackedNegativeStart(Runtime::create(Backend::cpu), DType::f32, 32, causal, 2, 16, 1e-5);
}

TEST_CASE("read() gives an i32 element as an index, 0 past its dim", "[dsl][cpu]") {
  // Y[i] = X[i] scaled by Idx[i] + Idx[i + 3] (past the end: 0), a program per element.
  Kernel k = kernel("read_index", [](Builder& b) {
    auto [N] = b.dims("N");
    auto X = b.input("X", {N}, f32);
    auto Idx = b.input("Idx", {N}, i32);
    auto Y = b.output("Y", {N}, f32);
    b.grid({N}, [&](Index i) {
      Index w = b.read(Idx, {i}) + b.read(Idx, {i + 3});
      b.store(Y.tile({i}, {1}), b.load(X.tile({i}, {1})) * b.splat(w, {1}));
    });
  });
  auto ck = Runtime::create(Backend::cpu).compile(k);
  HostTensor x(DType::f32, {5}), idx(DType::i32, {5}), y(DType::f32, {5});
  x.fill_random(4);
  const std::vector<int32_t> at = {3, -2, 7, 100000, 5};
  for (int64_t e = 0; e < 5; ++e) idx.set(e, float(at[size_t(e)]));
  y.poison();
  ck.launch({x.view(), idx.view(), y.view()});
  for (int64_t e = 0; e < 5; ++e) {
    const int64_t w = at[size_t(e)] + (e + 3 < 5 ? at[size_t(e + 3)] : 0);
    CHECK(y.get(e) == float(double(x.get(e)) * double(w)));
  }
}

TEST_CASE("read() and i32 tensors refuse what they cannot do, by name and source line", "[dsl][errors]") {
  auto traced = [](const std::function<void(Builder&, const Tensor&, const Tensor&, const Tensor&)>& body) {
    return [body] {
      kernel("bad_read", [&](Builder& b) {
        auto X = b.input("X", {4}, f32);
        auto L = b.input("L", {4, 2}, i32);
        auto Y = b.output("Y", {4}, f32);
        body(b, X, L, Y);
      });
    };
  };
  CHECK_THAT(invalidKernel(traced([](Builder& b, const Tensor& X, const Tensor&, const Tensor&) { b.read(X, {b.constant(0)}); })),
             Contains("read of argument 'X': it is f32; read() takes i32 inputs") && Contains("test_dsl_masks.cpp"));
  CHECK_THAT(invalidKernel(traced([](Builder& b, const Tensor&, const Tensor& L, const Tensor&) { b.read(L, {b.constant(0)}); })),
             Contains("read of argument 'L': it has rank 2, so read() needs 2 element indices, got 1"));
  CHECK_THAT(invalidKernel(traced([](Builder& b, const Tensor&, const Tensor& L, const Tensor&) {
               b.load(L.tile({b.constant(0), b.constant(0)}, {4, 2}));
             })),
             Contains("argument 'L' is i32: tiles are f32, f16 or bf16; read its elements one at a time with Builder::read"));
  CHECK_THAT(invalidKernel([] { kernel("bad_out", [](Builder& b) { b.output("Y", {4}, i32); }); }),
             Contains("output 'Y' is i32: outputs are f32, f16 or bf16"));
  CHECK_THAT(invalidKernel(traced([](Builder& b, const Tensor&, const Tensor&, const Tensor&) { b.zeros({4}, i32); })),
             Contains("i32"));
}

TEST_CASE("window() refuses what it cannot do, by name and source line", "[dsl][errors]") {
  auto traced = [](const std::function<void(Builder&, const Tensor&, const Tensor&)>& body) {
    return [body] {
      kernel("bad_window", [&](Builder& b) {
        auto X = b.input("X", {b.dim("H"), b.dim("T"), 32}, f32);
        auto L = b.input("L", {4}, i32);
        body(b, X, L);
      });
    };
  };
  const Index none;
  CHECK_THAT(invalidKernel(traced([](Builder& b, const Tensor& X, const Tensor&) { X.window(2, b.constant(0), b.constant(4)); })),
             Contains("window of argument 'X' along dim 2: it has rank 3, and a window is along dim 0 to 1 (not the innermost") &&
                 Contains("test_dsl_masks.cpp"));
  CHECK_THAT(invalidKernel(traced([](Builder& b, const Tensor& X, const Tensor&) { X.window(-1, b.constant(0), b.constant(4)); })),
             Contains("along dim -1"));
  CHECK_THAT(invalidKernel(traced([](Builder& b, const Tensor&, const Tensor& L) { L.window(0, b.constant(0), b.constant(4)); })),
             Contains("window of argument 'L': it is i32"));
  CHECK_THAT(invalidKernel(traced([](Builder& b, const Tensor& X, const Tensor&) {
               X.window(1, b.constant(0), b.constant(4)).window(0, b.constant(0), b.constant(1));
             })),
             Contains("window of argument 'X': it has a window already (along dim 1); one per tensor"));
  CHECK_THAT(invalidKernel(traced([none](Builder& b, const Tensor& X, const Tensor&) { X.window(1, none, b.constant(4)); })),
             Contains("Index"));
  // Dim 1 windowed, but a rank-1 tile fixes dims 0 and 1 at element indices.
  CHECK_THAT(invalidKernel(traced([](Builder& b, const Tensor& X, const Tensor&) {
               Index z = b.constant(0);
               X.window(1, z, b.constant(4)).tile({z, z, z}, {32});
             })),
             Contains("argument 'X' has a window along dim 1, which this rank-1 tile fixes at an element index"));
}
