// The catalogue: names, shapes and the run-and-verify path the CLI and demo use.
#include <catch2/catch.hpp>

#include "kiln/catalogue.hpp"
#include "kiln/error.hpp"

using namespace kiln;
using Catch::Matchers::Contains;

TEST_CASE("the catalogue has the foundation kernels and the MLP's residual GEMM", "[catalogue]") {
  std::vector<std::string> names;
  for (const auto& e : catalogue::all()) names.push_back(e.name);
  CHECK(names == std::vector<std::string>{"gemm", "gemm_bias_relu", "gemm_bias_gelu", "gemm_bias_residual",
                                          "softmax", "add", "rmsnorm"});
}

TEST_CASE("an unknown kernel name lists the catalogue", "[catalogue][errors]") {
  try {
    catalogue::find("gemm_relu");
    FAIL("expected NotFound");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::NotFound);
    CHECK_THAT(std::string(e.what()), Contains("unknown kernel 'gemm_relu'"));
    CHECK_THAT(std::string(e.what()), Contains("rmsnorm"));
  }
}

TEST_CASE("shapes parse as MxNxK and bad ones say what is expected", "[catalogue][errors]") {
  const auto& g = catalogue::find("gemm");
  CHECK(catalogue::parse_shape("257x129x65", g) == std::vector<int64_t>{257, 129, 65});
  for (const char* bad : {"", "257x129", "1x2x3x4", "0x1x1", "ax1x1", "1x-2x3", "1xx2", "99999999999999x1x1"}) {
    INFO(bad);
    CHECK_THROWS_AS(catalogue::parse_shape(bad, g), Error);
  }
  CHECK(catalogue::parse_shape("7x1000", catalogue::find("softmax")) == std::vector<int64_t>{7, 1000});
}

TEST_CASE("run_and_verify traces, compiles, runs and verifies", "[catalogue]") {
  auto rt = Runtime::create(Backend::cpu);
  auto r = catalogue::run_and_verify(rt, catalogue::find("gemm_bias_relu"), {257, 129, 65}, DType::f32, 11);
  CHECK(r.report.ok);
  CHECK(r.shape == "257x129x65");
  CHECK(r.report.numel == 257 * 129);
  CHECK(r.trace_ms > 0);
  CHECK(r.compile.total_ms() > 0);
  CHECK(r.flops == 2.0 * 257 * 129 * 65);
}

TEST_CASE("a problem uploaded to a runtime verifies only once the kernel has written it", "[catalogue]") {
  auto rt = Runtime::create(Backend::cpu);
  catalogue::Problem p = catalogue::find("add").problem({5, 300}, DType::bf16, 3);
  catalogue::DeviceProblem d = catalogue::upload(rt, p);
  REQUIRE(d.views.size() == 3);
  auto before = catalogue::verify_output(rt, d, p); // the output is still poisoned
  CHECK_FALSE(before.ok);
  CHECK(before.nonfinite == 5 * 300);
  rt.compile(catalogue::add(DType::bf16)).launch(d.views);
  auto after = catalogue::verify_output(rt, d, p);
  INFO(after.summary());
  CHECK(after.ok);
}

TEST_CASE("GEMM entries can take their reference from cuBLASLt, which needs a GPU runtime", "[catalogue]") {
  for (const catalogue::Entry& e : catalogue::all()) {
    INFO(e.name);
    CHECK(bool(e.gpu_problem) == bool(e.make_tiled)); // the GEMMs, and only they
  }
  Runtime cpu = Runtime::create(Backend::cpu);
  try {
    catalogue::find("gemm_bias_relu").gpu_problem(cpu, {8, 8, 8}, DType::bf16, 1);
    FAIL("a CPU runtime gave a cuBLASLt reference");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::Unsupported);
  }
}
