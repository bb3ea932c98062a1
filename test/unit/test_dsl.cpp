// The DSL traces readable C++ into tile IR, and refuses malformed programs with an error
// that names the kernel, the rule and the user's source line.
#include <catch2/catch.hpp>

#include <functional>
#include <optional>
#include <thread>

#include "kiln/catalogue.hpp"
#include "kiln/dsl.hpp"
#include "kiln/error.hpp"
#include "kiln/runtime.hpp"

using namespace kiln;
using namespace kiln::dsl;
using Catch::Matchers::Contains;

namespace {

// Runs `f`, expects a kiln::Error of `kind`, returns its message.
template <typename F>
std::string errorOf(F&& f, ErrorKind kind = ErrorKind::InvalidKernel) {
  try {
    f();
  } catch (const Error& e) {
    CHECK(e.kind() == kind);
    return e.what();
  }
  FAIL("expected a kiln::Error");
  return {};
}

// A minimal valid kernel body around `inner`, which gets i, X, Y.
Kernel withXY(const std::string& name,
              const std::function<void(Builder&, Index, Tensor&, Tensor&)>& inner) {
  return kernel(name, [&](Builder& k) {
    auto [M, N] = k.dims("M", "N");
    auto X = k.input("X", {M, N}, f32);
    auto Y = k.output("Y", {M, N}, f32);
    k.grid({cdiv(M, 4)}, [&](Index i) { inner(k, i, X, Y); });
  });
}

} // namespace

TEST_CASE("a traced GEMM has symbolic dims and a signature naming its arguments", "[dsl]") {
  Kernel k = catalogue::gemm_bias_relu(DType::bf16);
  CHECK(k.name() == "gemm_bias_relu");
  CHECK(k.signature().str() ==
        "gemm_bias_relu(in A: bf16[M, K], in B: bf16[K, N], in bias: bf16[N], out C: bf16[M, N])");
  std::string ir = k.tile_ir();
  CHECK_THAT(ir, Contains("tile.kernel @gemm_bias_relu(in %A: !tile.tensor<[M, K], bf16>"));
  CHECK_THAT(ir, Contains("out %C: !tile.tensor<[M, N], bf16>"));
  CHECK_THAT(ir, Contains("tile.dot"));
  CHECK_THAT(ir, Contains("tile.relu"));
  CHECK_THAT(ir, Contains("tile.broadcast"));
  CHECK_THAT(ir, Contains("stages 3"));
}

TEST_CASE("tile sizes are plain C++ values baked into the traced IR", "[dsl]") {
  std::string ir = catalogue::gemm(DType::f32, {.m = 32, .n = 16, .k = 8, .stages = 2}).tile_ir();
  CHECK_THAT(ir, Contains("<32x8xf32>"));
  CHECK_THAT(ir, Contains("<8x16xf32>"));
  CHECK_THAT(ir, Contains("<32x16xf32>"));
  CHECK_THAT(ir, Contains("stages 2"));
}

TEST_CASE("a kernel round-trips through its tile IR text", "[dsl]") {
  Kernel k = catalogue::softmax(DType::f16);
  Kernel back = Kernel::from_tile_ir(k.tile_ir());
  CHECK(back.signature().str() == k.signature().str());
  CHECK(back.tile_ir() == k.tile_ir());
}

TEST_CASE("unparsable tile IR is an InvalidKernel error with its location", "[dsl][errors]") {
  auto msg = errorOf([] { Kernel::from_tile_ir("tile.kernel @k(in %X : !tile.tensor<[M], i8>) {}"); });
  CHECK_THAT(msg, Contains("does not parse"));
  CHECK_THAT(msg, Contains("element type must be f32, f16, bf16 or i32, got 'i8'"));
  CHECK_THAT(errorOf([] { Kernel::from_tile_ir(""); }), Contains("exactly one tile.kernel"));
}

TEST_CASE("a dot with mismatched K names the kernel, the rule and the source line", "[dsl][errors]") {
  int line = __LINE__ + 3;
  auto msg = errorOf([] {
    withXY("bad_dot", [](Builder& k, Index, Tensor&, Tensor&) {
      (void)dot(k.zeros({4, 8}), k.zeros({16, 4}), k.zeros({4, 4}));
    });
  });
  CHECK_THAT(msg, Contains("kernel 'bad_dot'"));
  CHECK_THAT(msg, Contains("K of a (4x8xf32) does not match K of b (16x4xf32)"));
  CHECK_THAT(msg, Contains("test_dsl.cpp:" + std::to_string(line)));
}

TEST_CASE("a dot into a non-f32 accumulator is rejected by the tile verifier", "[dsl][errors]") {
  auto msg = errorOf([] {
    withXY("bf16_acc", [](Builder& k, Index, Tensor&, Tensor&) {
      (void)dot(k.zeros({4, 8}, bf16), k.zeros({8, 4}, bf16), k.zeros({4, 4}, bf16));
    });
  });
  CHECK_THAT(msg, Contains("'tile.dot' op accumulator must be f32"));
  CHECK_THAT(msg, Contains("test_dsl.cpp"));
}

TEST_CASE("storing a tile of another dtype asks for a cast", "[dsl][errors]") {
  auto msg = errorOf([] {
    withXY("bad_store", [](Builder& k, Index i, Tensor&, Tensor& Y) {
      k.store(Y.tile({i, i}, {4, 4}), k.zeros({4, 4}, bf16));
    });
  });
  CHECK_THAT(msg, Contains("store of a 4x4xbf16 tile into a f32 view: cast() it first"));
}

TEST_CASE("storing a tile of another shape is rejected", "[dsl][errors]") {
  auto msg = errorOf([] {
    withXY("bad_shape", [](Builder& k, Index i, Tensor&, Tensor& Y) {
      k.store(Y.tile({i, i}, {4, 4}), k.zeros({4, 8}));
    });
  });
  CHECK_THAT(msg, Contains("tile shape 4x8 does not match view shape 4x4"));
}

TEST_CASE("elementwise ops on mismatched tiles point to rows()/cols()", "[dsl][errors]") {
  auto msg = errorOf([] {
    withXY("bad_add", [](Builder& k, Index, Tensor&, Tensor&) { (void)(k.zeros({4, 8}) + k.zeros({8})); });
  });
  CHECK_THAT(msg, Contains("add of 4x8xf32 and 8xf32"));
  CHECK_THAT(msg, Contains("rows()/cols()"));
}

TEST_CASE("a broadcast vector of the wrong length is rejected", "[dsl][errors]") {
  auto msg = errorOf([] {
    withXY("bad_rows", [](Builder& k, Index, Tensor&, Tensor&) { (void)(k.zeros({4, 8}) + rows(k.zeros({4}))); });
  });
  CHECK_THAT(msg, Contains("rows(4xf32) needs length 8"));
}

TEST_CASE("tile() with the wrong number of indices names the argument", "[dsl][errors]") {
  auto msg = errorOf([] {
    withXY("bad_view", [](Builder&, Index i, Tensor& X, Tensor&) { (void)X.tile({i}, {4}); });
  });
  CHECK_THAT(msg, Contains("argument 'X' has rank 2"));
}

TEST_CASE("grids of more than three dims and nested grids are rejected", "[dsl][errors]") {
  CHECK_THAT(errorOf([] {
    kernel("g4", [](Builder& k) {
      auto [M] = k.dims("M");
      k.output("Y", {M}, f32);
      k.grid({M, M, M, M}, [](Index, Index, Index) {});
    });
  }), Contains("grid must have 1, 2 or 3 dims, got 4"));
  CHECK_THAT(errorOf([] {
    kernel("nested", [](Builder& k) {
      auto [M] = k.dims("M");
      k.output("Y", {M}, f32);
      k.grid({M}, [&](Index) { k.grid({M}, [](Index) {}); });
    });
  }), Contains("grid must be at the top level"));
}

TEST_CASE("a loop body must return tiles shaped like the ones it carries", "[dsl][errors]") {
  auto msg = errorOf([] {
    withXY("bad_loop", [](Builder& k, Index i, Tensor&, Tensor&) {
      (void)k.loop(i, 2, k.zeros({4, 4}), [&](Index, const Tile&) { return k.zeros({4, 8}); });
    });
  });
  CHECK_THAT(msg, Contains("starts as 4x4xf32 but the body returns 4x8xf32"));
  CHECK_THAT(errorOf([] {
    withXY("bad_stages", [](Builder& k, Index i, Tensor&, Tensor&) {
      (void)k.loop(i, 0, k.zeros({4}), [](Index, const Tile& t) { return t; });
    });
  }), Contains("loop stages must be >= 1"));
}

TEST_CASE("argument names must be unique and a kernel must write an output", "[dsl][errors]") {
  CHECK_THAT(errorOf([] {
    kernel("dup", [](Builder& k) {
      auto [M] = k.dims("M");
      k.input("X", {M}, f32);
      k.output("X", {M}, f32);
    });
  }), Contains("argument name 'X' is used twice"));
  CHECK_THAT(errorOf([] {
    kernel("no_out", [](Builder& k) {
      auto [M] = k.dims("M");
      k.input("X", {M}, f32);
    });
  }), Contains("has no 'out' argument"));
  CHECK_THAT(errorOf([] { kernel("", [](Builder&) {}); }), Contains("needs a name"));
}

TEST_CASE("a dim symbol no argument uses is reported at verification", "[dsl][errors]") {
  auto msg = errorOf([] {
    kernel("orphan", [](Builder& k) {
      auto [M, Q] = k.dims("M", "Q");
      auto Y = k.output("Y", {M}, f32);
      k.grid({Q}, [&](Index i) { k.store(Y.tile({i}, {4}), k.zeros({4})); });
    });
  });
  CHECK_THAT(msg, Contains("symbol 'Q' is not a dim of any argument of @orphan"));
}

TEST_CASE("reductions reject out-of-range dims and vectors", "[dsl][errors]") {
  CHECK_THAT(errorOf([] {
    withXY("bad_reduce", [](Builder& k, Index, Tensor&, Tensor&) { (void)reduce_sum(k.zeros({4, 4}), 2); });
  }), Contains("along dim 2: out of range"));
  CHECK_THAT(errorOf([] {
    withXY("bad_reduce1", [](Builder& k, Index, Tensor&, Tensor&) { (void)row_max(k.zeros({4})); });
  }), Contains("needs rank >= 2"));
}

TEST_CASE("unsupported tile shapes and dtypes are rejected where they are made", "[dsl][errors]") {
  CHECK_THAT(errorOf([] {
    withXY("bad_full", [](Builder& k, Index, Tensor&, Tensor&) { (void)k.zeros({2, 2, 2, 2}); });
  }), Contains("tile rank must be 1, 2 or 3"));
  CHECK_THAT(errorOf([] {
    withXY("bad_cdiv", [](Builder&, Index i, Tensor&, Tensor&) { (void)cdiv(i, 0); });
  }), Contains("the tile size must be positive"));
  CHECK_THAT(errorOf([] {
    withXY("empty_tile", [](Builder&, Index, Tensor&, Tensor&) { (void)exp(Tile()); });
  }), Contains("empty Tile"));
}

TEST_CASE("index arithmetic lets one program handle several tiles", "[dsl][cpu]") {
  // Each program copies tiles 2i and 2i+1 of X (scaled by 3) into Y.
  Kernel k = kernel("two_tiles", [](Builder& b) {
    auto [M] = b.dims("M");
    auto X = b.input("X", {M}, f32);
    auto Y = b.output("Y", {M}, f32);
    b.grid({cdiv(M, 8)}, [&](Index i) {
      for (Index t : {i * 2, i * 2 + 1, (i + i) - i + i + b.constant(1) - b.constant(1) * b.constant(1)})
        b.store(Y.tile({t}, {4}), b.load(X.tile({t}, {4})) * 3.0);
    });
  });
  CHECK_THAT(k.tile_ir(), Contains("arith.muli"));
  auto ck = Runtime::create(Backend::cpu).compile(k);
  for (int64_t m : {1, 4, 9, 30}) {
    HostTensor x(DType::f32, {m}), y(DType::f32, {m});
    x.fill_random(m);
    y.poison();
    ck.launch({x.view(), y.view()});
    for (int64_t e = 0; e < m; ++e) REQUIRE(y.get(e) == 3.0f * x.get(e));
  }
}

TEST_CASE("an error inside a grid body names the failing call, not the grid", "[dsl][errors]") {
  int line = __LINE__ + 3;
  auto msg = errorOf([] {
    withXY("bad_max", [](Builder& k, Index, Tensor&, Tensor&) {
      (void)max(k.zeros({4}), k.zeros({8}));
    });
  });
  CHECK_THAT(msg, Contains("max of 4xf32 and 8xf32"));
  CHECK_THAT(msg, Contains("test_dsl.cpp:" + std::to_string(line) + ")"));
}

TEST_CASE("storing into an input argument is rejected with its name", "[dsl][errors]") {
  auto msg = errorOf([] {
    withXY("store_in", [](Builder& k, Index i, Tensor& X, Tensor&) { k.store(X.tile({i, i}, {4, 4}), k.zeros({4, 4})); });
  });
  CHECK_THAT(msg, Contains("writes to argument 'X', which is an 'in' argument"));
}

TEST_CASE("a store outside the grid of a kernel with a grid is rejected", "[dsl][errors]") {
  // On a GPU the code outside the grid runs in every program: such a store would race.
  auto msg = errorOf([] {
    kernel("store_outside", [](Builder& k) {
      auto [M] = k.dims("M");
      auto Y = k.output("Y", {M}, f32);
      k.store(Y.tile({k.constant(0)}, {4}), k.zeros({4}));
      k.grid({cdiv(M, 4)}, [&](Index i) { k.store(Y.tile({i}, {4}), k.full({4}, 1.0)); });
    });
  });
  CHECK_THAT(msg, Contains("is outside the tile.grid of a kernel that has one"));
}

TEST_CASE("a tile past kiln's size limit is an InvalidKernel error when traced, not a crash or a long compile",
          "[dsl][errors]") {
  for (const catalogue::GemmTiles& t : {catalogue::GemmTiles{4096, 4096, 32}, catalogue::GemmTiles{int64_t(1) << 40, 64, 32},
                                        catalogue::GemmTiles{INT64_MAX, 64, 32}, catalogue::GemmTiles{65536, 65536, 65536}}) {
    INFO(t.m << "x" << t.n << "x" << t.k);
    try {
      catalogue::gemm(DType::f32, t);
      FAIL("traced");
    } catch (const Error& e) {
      CHECK(e.kind() == ErrorKind::InvalidKernel);
      CHECK_THAT(e.what(), Contains("exceeds kiln's limit of 1048576 (2^20) elements per tile") && Contains("gemm"));
    }
  }
  // At the limit is fine: a 1024 x 1024 accumulator traces (whether a backend compiles it
  // well is the tuner's business).
  CHECK_NOTHROW(catalogue::gemm(DType::f32, {1024, 1024, 16}));
}

TEST_CASE("handles kept from a finished trace, or carried into another kernel's, are refused by name", "[dsl][errors]") {
  // Everything a trace hands out, kept past its kernel() call.
  Tile keptTile;
  Index keptIndex;
  View keptView;
  Tensor keptTensor;
  std::optional<Builder> keptBuilder;
  Kernel first = kernel("first", [&](Builder& k) {
    auto [M, N] = k.dims("M", "N");
    auto X = k.input("X", {M, N}, f32);
    auto Y = k.output("Y", {M, N}, f32);
    k.grid({cdiv(M, 4)}, [&](Index i) {
      View x = X.tile({i, i * 0}, {4, 8});
      Tile t = k.load(x);
      k.store(Y.tile({i, i * 0}, {4, 8}), t + t);
      keptTile = t, keptIndex = i, keptView = x;
    });
    keptTensor = X;
    keptBuilder = k;
  });
  CHECK(first.name() == "first");

  // Used after the trace: no live trace on this thread.
  CHECK_THAT(errorOf([&] { (void)exp(keptTile); }),
             Contains("Tile 4x8xf32 is used outside the trace that made it") && Contains("keep them inside its body"));
  CHECK_THAT(errorOf([&] { (void)(keptIndex + 1); }), Contains("Index is used outside the trace that made it"));
  CHECK_THAT(errorOf([&] { (void)keptBuilder->zeros({4, 8}); }), Contains("Builder is used outside the trace"));

  // Used inside another kernel's trace: that kernel is named, with the user's line.
  auto inSecond = [&](const std::function<void(Builder&, Index, Tensor&, Tensor&)>& use) {
    return errorOf([&] { withXY("second", use); });
  };
  CHECK_THAT(inSecond([&](Builder&, Index, Tensor&, Tensor& Y) { (void)Y; (void)relu(keptTile); }),
             Contains("kernel 'second': Tile 4x8xf32 was made while tracing another kernel") &&
                 Contains("test_dsl.cpp"));
  CHECK_THAT(inSecond([&](Builder& k, Index i, Tensor&, Tensor&) { (void)k.load(keptTensor.tile({i, i}, {4, 8})); }),
             Contains("Tensor (argument #0) was made while tracing another kernel"));
  CHECK_THAT(inSecond([&](Builder& k, Index, Tensor&, Tensor&) { (void)k.load(keptView); }),
             Contains("View 4x8xf32 was made while tracing another kernel"));
  CHECK_THAT(inSecond([&](Builder&, Index i, Tensor&, Tensor&) { (void)(i + keptIndex); }),
             Contains("Index was made while tracing another kernel"));
  // A tile of this trace combined with a stale one: the stale operand is caught too.
  CHECK_THAT(inSecond([&](Builder& k, Index i, Tensor& X, Tensor&) {
               Tile mine = k.load(X.tile({i, i * 0}, {4, 8}));
               (void)(mine + keptTile);
             }),
             Contains("Tile 4x8xf32 was made while tracing another kernel"));
  CHECK_THAT(inSecond([&](Builder&, Index, Tensor&, Tensor&) { (void)keptBuilder->constant(1); }),
             Contains("kernel 'second': Builder was made while tracing another kernel"));

  // A trace that threw leaves nothing usable behind either.
  Tile fromThrown;
  CHECK_THAT(errorOf([&] {
               withXY("thrown", [&](Builder& k, Index, Tensor&, Tensor&) {
                 fromThrown = k.zeros({4, 8});
                 (void)cdiv(k.dim("M"), 0);
               });
             }),
             Contains("the tile size must be positive"));
  CHECK_THAT(errorOf([&] { (void)exp(fromThrown); }), Contains("used outside the trace that made it"));

  // A trace on one thread, its tile used from another thread's trace.
  std::string fromThread;
  std::thread other([&] { fromThread = inSecond([&](Builder&, Index, Tensor&, Tensor&) { (void)exp(keptTile); }); });
  other.join();
  CHECK_THAT(fromThread, Contains("was made while tracing another kernel"));

  // The kernel traced first is untouched by all of this: it still computes Y = 2X.
  Runtime rt = Runtime::create(Backend::cpu);
  HostTensor x(DType::f32, {5, 8}), y(DType::f32, {5, 8});
  for (int i = 0; i < 40; ++i) x.set(i, float(i));
  rt.compile(first).launch({x.view(), y.view()});
  CHECK(y.get(39) == 78.0f);
}

TEST_CASE("allow_in_place takes an output then an input of one type, and never an input a dot reads", "[dsl][errors]") {
  auto twoArgs = [](const std::function<void(Builder&, Tensor&, Tensor&, Tensor&)>& declare) {
    return kernel("ip", [&](Builder& k) {
      auto [M, N] = k.dims("M", "N");
      auto X = k.input("X", {M, N}, DType::f32);
      auto H = k.input("H", {M, N}, DType::f16);
      auto Y = k.output("Y", {M, N}, DType::f32);
      declare(k, X, H, Y);
      k.grid({cdiv(M, 4), cdiv(N, 4)}, [&](Index i, Index j) {
        k.store(Y.tile({i, j}, {4, 4}), k.load(X.tile({i, j}, {4, 4})) + cast(k.load(H.tile({i, j}, {4, 4})), f32));
      });
    });
  };
  CHECK_THAT(errorOf([&] { twoArgs([](Builder& k, Tensor& X, Tensor&, Tensor& Y) { k.allow_in_place(X, Y); }); }),
             Contains("allow_in_place(output, input) takes an output, then an input; got 'X' (in) and 'Y' (out)") &&
                 Contains("test_dsl.cpp"));
  CHECK_THAT(errorOf([&] { twoArgs([](Builder& k, Tensor&, Tensor& H, Tensor& Y) { k.allow_in_place(Y, H); }); }),
             Contains("'Y' can never be the same memory as 'H': their dims or dtypes differ"));
  Kernel ok = twoArgs([](Builder& k, Tensor& X, Tensor&, Tensor& Y) { k.allow_in_place(Y, X); });
  CHECK(ok.signature().args[2].in_place_over == std::vector<std::string>{"X"});
  CHECK(ok.signature().args[0].in_place_over.empty());
  CHECK_THAT(ok.tile_ir(), Contains("in_place = array<i64: 2, 0>"));
  CHECK(Kernel::from_tile_ir(ok.tile_ir()).signature().args[2].in_place_over == std::vector<std::string>{"X"});
  // A GEMM's C over A: every program reads rows of A that others are writing.
  CHECK_THAT(errorOf([] {
               kernel("mm", [](Builder& k) {
                 auto [M] = k.dims("M");
                 auto A = k.input("A", {M, M}, DType::f32), B = k.input("B", {M, M}, DType::f32);
                 auto C = k.output("C", {M, M}, DType::f32);
                 k.allow_in_place(C, A);
                 k.grid({cdiv(M, 16), cdiv(M, 16)}, [&](Index i, Index j) {
                   Tile acc = k.loop(cdiv(M, 16), 1, k.zeros({16, 16}), [&](Index kk, const Tile& c) {
                     return dot(k.load(A.tile({i, kk}, {16, 16})), k.load(B.tile({kk, j}, {16, 16})), c);
                   });
                   k.store(C.tile({i, j}, {16, 16}), acc);
                 });
               });
             }),
             Contains("kernel 'mm': output 'C' cannot be written in place over 'A': a tile.dot reads 'A'") &&
                 Contains("test_dsl.cpp"));
  // Read by a dot through a loop's carried value: still refused.
  CHECK_THAT(errorOf([] {
               kernel("carried", [](Builder& k) {
                 auto [M] = k.dims("M");
                 auto X = k.input("X", {M, 16}, DType::f32), B = k.input("B", {16, 16}, DType::f32);
                 auto Y = k.output("Y", {M, 16}, DType::f32);
                 k.allow_in_place(Y, X);
                 k.grid({cdiv(M, 16)}, [&](Index i) {
                   Tile x = k.loop(k.constant(1), 1, k.zeros({16, 16}), [&](Index, const Tile& c) {
                     return c + k.load(X.tile({i, k.constant(0)}, {16, 16}));
                   });
                   k.store(Y.tile({i, k.constant(0)}, {16, 16}), dot(x, k.load(B.tile({k.constant(0), k.constant(0)}, {16, 16})), k.zeros({16, 16})));
                 });
               });
             }),
             Contains("output 'Y' cannot be written in place over 'X': a tile.dot reads 'X'"));
  // Declaring one pair twice is one declaration.
  Kernel twice = twoArgs([](Builder& k, Tensor& X, Tensor&, Tensor& Y) {
    k.allow_in_place(Y, X);
    k.allow_in_place(Y, X);
  });
  CHECK(twice.signature().args[2].in_place_over == std::vector<std::string>{"X"});
  // Hand-written tile IR gets the same check.
  std::string ir = ok.tile_ir();
  CHECK_THAT(errorOf([&] { Kernel::from_tile_ir(ir.replace(ir.find("array<i64: 2, 0>"), 16, "array<i64: 2, 0, 2, 0>")); }),
             Contains("in_place lists 'Y' over 'X' twice"));
}
