// The CPU backend runs every catalogue kernel correctly on ragged shapes in every dtype,
// with one compiled kernel per (kernel, dtype) serving all shapes.
#include <catch2/catch.hpp>

#include <atomic>
#include <cmath>
#include <thread>

#include "kiln/catalogue.hpp"
#include "kiln/dsl.hpp"
#include "kiln/error.hpp"
#include "kiln/reference.hpp"
#include "kiln/runtime.hpp"

#include "dtype_suite.hpp"

using namespace kiln;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;

namespace {

const Runtime& cpu() {
  static Runtime rt = Runtime::create(Backend::cpu);
  return rt;
}

} // namespace

TEST_CASE("gemm is correct on ragged shapes in f32, bf16 and f16", "[cpu]") {
  for (DType d : {DType::f32, DType::bf16, DType::f16}) test::checkEntryOnShapes(cpu(), catalogue::find("gemm"), d);
}
TEST_CASE("gemm_bias_relu is correct on ragged shapes in f32, bf16 and f16", "[cpu]") {
  for (DType d : {DType::f32, DType::bf16, DType::f16}) test::checkEntryOnShapes(cpu(), catalogue::find("gemm_bias_relu"), d);
}
TEST_CASE("gemm_bias_gelu is correct on ragged shapes in f32, bf16 and f16", "[cpu]") {
  for (DType d : {DType::f32, DType::bf16, DType::f16}) test::checkEntryOnShapes(cpu(), catalogue::find("gemm_bias_gelu"), d);
}
TEST_CASE("gemm_bias_residual is correct on ragged shapes in f32, bf16 and f16", "[cpu]") {
  for (DType d : {DType::f32, DType::bf16, DType::f16}) test::checkEntryOnShapes(cpu(), catalogue::find("gemm_bias_residual"), d);
}
TEST_CASE("softmax is correct on ragged shapes in f32, bf16 and f16", "[cpu]") {
  for (DType d : {DType::f32, DType::bf16, DType::f16}) test::checkEntryOnShapes(cpu(), catalogue::find("softmax"), d);
}
TEST_CASE("add is correct on ragged shapes in f32, bf16 and f16", "[cpu]") {
  for (DType d : {DType::f32, DType::bf16, DType::f16}) test::checkEntryOnShapes(cpu(), catalogue::find("add"), d);
}
TEST_CASE("rmsnorm is correct on ragged shapes in f32, bf16 and f16", "[cpu]") {
  for (DType d : {DType::f32, DType::bf16, DType::f16}) test::checkEntryOnShapes(cpu(), catalogue::find("rmsnorm"), d);
}
TEST_CASE("rope rotates each head's halves by its token's position on ragged shapes in f32, bf16 and f16",
          "[cpu]") {
  for (DType d : {DType::f32, DType::bf16, DType::f16}) test::checkEntryOnShapes(cpu(), catalogue::find("rope"), d);
}
TEST_CASE("swiglu gates one product by the other on ragged shapes in f32, bf16 and f16", "[cpu]") {
  for (DType d : {DType::f32, DType::bf16, DType::f16}) test::checkEntryOnShapes(cpu(), catalogue::find("swiglu"), d);
}

TEST_CASE("attention, plain and causal, is correct on ragged shapes and head groups in f32, bf16 and f16", "[cpu]") {
  for (const char* name : {"attention", "attention_causal"})
    for (DType d : {DType::f32, DType::bf16, DType::f16}) test::checkEntryOnShapes(cpu(), catalogue::find(name), d);
}

TEST_CASE("attention over a K/V cache is correct for one and several new queries in f32, bf16 and f16", "[cpu]") {
  for (DType d : {DType::f32, DType::bf16, DType::f16})
    test::checkEntryOnShapes(cpu(), catalogue::find("attention_decode"), d);
}

TEST_CASE("attention's log-sum-exp output is correct beside O, plain, causal and over a K/V cache", "[cpu]") {
  for (const char* name : {"attention_lse", "attention_causal_lse", "attention_decode_lse"})
    for (DType d : {DType::f32, DType::bf16}) test::checkEntryOnShapes(cpu(), catalogue::find(name), d);
}

TEST_CASE("a problem's further output is verified too, and a wrong one is named in the report", "[cpu][verify]") {
  const catalogue::Entry& e = catalogue::find("attention_causal_lse");
  const std::vector<int64_t> shape = {1, 4, 2, 77, 32};
  CompiledKernel ck = cpu().compile(catalogue::kernel_for(e, DType::bf16, shape));
  catalogue::Problem p = e.problem(shape, DType::bf16, 3);
  REQUIRE(p.more_outputs.size() == 1);
  CHECK(p.more_outputs[0].name == "LSE");
  CHECK(ck.signature().args.at(p.more_outputs[0].arg).name == "LSE");
  catalogue::DeviceProblem d = catalogue::upload(cpu(), p);
  ck.launch(d.views);
  CHECK(catalogue::verify_output(cpu(), d, p).ok);
  // O right, LSE never written: the report is LSE's.
  HostTensor unwritten(DType::f32, {1, 4, 77});
  unwritten.poison();
  d.tensors[p.more_outputs[0].arg] = cpu().upload(unwritten);
  verify::Report r = catalogue::verify_output(cpu(), d, p);
  CHECK_FALSE(r.ok);
  CHECK(r.output == "LSE");
  CHECK_THAT(r.summary(), StartsWith("LSE: reference_ok=false"));
  // run_and_verify (kiln run) reports each output.
  catalogue::RunResult run = catalogue::run_and_verify(cpu(), e, shape, DType::bf16, 4);
  REQUIRE(run.outputs.size() == 2);
  CHECK(run.outputs[0].output.empty());
  CHECK(run.outputs[1].output == "LSE");
  CHECK((run.report.ok && run.outputs[0].ok && run.outputs[1].ok));
  // poison_outputs() poisons every output, the further ones included.
  p.poison_outputs();
  CHECK(std::isnan(p.args[3].get(0)));
  CHECK(std::isnan(p.args[4].get(0)));
}

TEST_CASE("small and odd tile configurations give the same answers", "[cpu]") {
  for (catalogue::GemmTiles t : {catalogue::GemmTiles{16, 8, 4, 1}, catalogue::GemmTiles{1, 1, 1, 2},
                                 catalogue::GemmTiles{3, 5, 7, 4}}) {
    CompiledKernel ck = cpu().compile(catalogue::gemm_bias_gelu(DType::f32, t));
    catalogue::Problem p = catalogue::find("gemm_bias_gelu").problem({37, 29, 19}, DType::f32, 9);
    auto v = p.views();
    ck.launch(v);
    auto rep = verify::compare(v[p.output], p.reference, verify::Tolerance::for_dtype(DType::f32));
    INFO("tiles " << t.m << "x" << t.n << "x" << t.k << ": " << rep.summary());
    CHECK(rep.ok);
  }
}

TEST_CASE("strided inputs are read through their strides", "[cpu]") {
  // B is given as the transpose view of a row-major N x K buffer.
  const int64_t M = 33, N = 17, K = 45;
  HostTensor a(DType::f32, {M, K}), bt(DType::f32, {N, K}), c(DType::f32, {M, N});
  a.fill_random(3);
  bt.fill_random(4);
  c.poison();
  TensorView b{bt.data(), DType::f32, {K, N}, {1, K}};
  CompiledKernel ck = cpu().compile(catalogue::gemm(DType::f32));
  ck.launch({a.view(), b, c.view()});
  std::vector<double> ref = reference::gemm(a.view(), b, nullptr, reference::Epilogue::none);
  auto rep = verify::compare(c.view(), ref, verify::Tolerance::for_dtype(DType::f32));
  INFO(rep.summary());
  CHECK(rep.ok);
}

TEST_CASE("a strided output is written only at its strided positions", "[cpu]") {
  // Y is every other column of a wider buffer; the gaps must stay untouched.
  const int64_t M = 9, N = 300;
  HostTensor x(DType::f32, {M, N}), y(DType::f32, {M, N}), wide(DType::f32, {M, 2 * N});
  x.fill_random(5);
  y.fill_random(6);
  for (int64_t i = 0; i < wide.numel(); ++i) wide.set(i, 12345.0f);
  TensorView out{wide.data(), DType::f32, {M, N}, {2 * N, 2}};
  cpu().compile(catalogue::add(DType::f32)).launch({x.view(), y.view(), out});
  auto rep = verify::compare(out, reference::add(x.view(), y.view()), verify::Tolerance::for_dtype(DType::f32));
  INFO(rep.summary());
  CHECK(rep.ok);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) REQUIRE(wide.get(i * 2 * N + 2 * j + 1) == 12345.0f);
}

TEST_CASE("loop-carried tiles keep value semantics when the body swaps them", "[cpu]") {
  // carry (a, b) -> (b + 1, a) for `steps` iterations; the result depends on exact order.
  using namespace kiln::dsl;
  Kernel k = kernel("swap", [](Builder& b) {
    auto [S] = b.dims("S");
    auto Y = b.output("Y", {S, 2}, f32);
    b.grid({b.constant(1)}, [&](Index i) {
      auto r = b.loop(cdiv(S, 1), 1, {b.full({4}, 10.0), b.full({4}, 20.0)},
                      [&](Index, const std::vector<Tile>& c) {
        return std::vector<Tile>{c[1] + b.full({4}, 1.0), c[0]};
      });
      b.store(Y.tile({i, i}, {4, 2}), broadcast(r[0], {4, 2}, {0}));
    });
  });
  CompiledKernel ck = cpu().compile(k);
  for (int64_t steps : {1, 2, 3, 4}) {
    HostTensor y(DType::f32, {steps, 2});
    y.poison();
    ck.launch({y.view()});
    // a_n: 10 -> 21 -> 11 -> 22 -> 12 ...
    float expect = steps % 2 ? 20.0f + 1 + float(steps / 2) : 10.0f + float(steps / 2);
    for (int64_t r = 0; r < std::min<int64_t>(steps, 4); ++r) CHECK(y.get(r * 2) == expect);
  }
}

TEST_CASE("one compiled kernel serves many shapes without recompiling", "[cpu]") {
  CompiledKernel ck = cpu().compile(catalogue::rmsnorm(DType::bf16));
  double compiled_ms = ck.times().total_ms();
  for (int64_t m : {1, 2, 300}) {
    for (int64_t n : {1, 255, 513}) {
      catalogue::Problem p = catalogue::find("rmsnorm").problem({m, n}, DType::bf16, m * 1000 + n);
      auto v = p.views();
      ck.launch(v);
      CHECK(verify::compare(v[p.output], p.reference, verify::Tolerance::for_dtype(DType::bf16)).ok);
    }
  }
  CHECK(ck.times().total_ms() == compiled_ms);
}

TEST_CASE("every stage of the CPU pipeline can be printed", "[cpu]") {
  const Runtime& rt = cpu();
  Kernel k = catalogue::gemm_bias_relu(DType::bf16);
  CHECK_THAT(rt.emit(k, Stage::tile), Contains("tile.relu"));
  std::string mlir = rt.emit(k, Stage::mlir);
  CHECK_THAT(mlir, Contains("func.func @gemm_bias_relu"));
  CHECK_THAT(mlir, Contains("scf.for"));
  CHECK_THAT(mlir, Contains("strided<[?, ?], offset: ?>"));
  CHECK_THAT(mlir, !Contains("tile."));
  CHECK_THAT(rt.emit(k, Stage::llvm), Contains("define void @gemm_bias_relu"));
}

TEST_CASE("compile phases are timed separately", "[cpu]") {
  CompiledKernel ck = cpu().compile(catalogue::add(DType::f32));
  CHECK(ck.times().tile_passes_ms > 0);
  CHECK(ck.times().lowering_ms > 0);
  CHECK(ck.times().codegen_ms > 0);
  CHECK(ck.backend() == Backend::cpu);
}

TEST_CASE("the automatic backend picks CUDA with a GPU, else the CPU and says why", "[cpu][runtime]") {
  Runtime rt = Runtime::create(Backend::automatic);
  if (rt.backend() == Backend::cuda) {
    CHECK_THAT(rt.describe(), Contains("cuda: "));
    return;
  }
  CHECK(rt.backend() == Backend::cpu);
  CHECK_THAT(rt.describe(), Contains("cpu ("));
  CHECK_THAT(rt.describe(), Contains("; cuda: "));
  try {
    Runtime::create(Backend::cuda);
    FAIL("the cuda backend should be unavailable where auto chose the CPU");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::Unsupported);
    CHECK_THAT(std::string(e.what()), Contains("CUDA driver"));
  }
}

TEST_CASE("reductions of bf16 tiles accumulate in f32", "[cpu]") { test::checkBf16SumAccumulatesInF32(cpu()); }

TEST_CASE("f32 converts to bf16 and f16 and back with round-to-nearest-even, NaN kept", "[cpu]") {
  test::checkConversions(cpu(), DType::bf16);
  test::checkConversions(cpu(), DType::f16);
}

TEST_CASE("one Kernel compiles from several threads at once", "[cpu]") {
  Kernel k = catalogue::gemm_bias_gelu(DType::bf16);
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      CompiledKernel ck = cpu().compile(k);
      catalogue::Problem p = catalogue::find("gemm_bias_gelu").problem({65, 33, 17}, DType::bf16, t);
      auto v = p.views();
      ck.launch(v);
      if (verify::compare(v[p.output], p.reference, verify::Tolerance::for_dtype(DType::bf16)).ok) ++ok;
    });
  for (auto& t : threads) t.join();
  CHECK(ok == 4);
}
