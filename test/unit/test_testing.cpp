// kiln/testing.hpp used the way an engine's Catch2 test uses it: the engine's own kernel
// (written with the DSL here) against the engine's own reference, plus its lifecycle row.
#include <catch2/catch.hpp>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "kiln/dsl.hpp"
#include "kiln/error.hpp"
#include "kiln/testing.hpp"

using namespace kiln;
using Catch::Matchers::Contains;

namespace {

// The engine's kernel: Y = 2 * X + B, row-major M x N.
Kernel axpb() {
  using namespace kiln::dsl;
  return kernel("axpb", [](Builder& k) {
    auto [M, N] = k.dims("M", "N");
    auto X = k.input("X", {M, N}, f32), B = k.input("B", {M, N}, f32);
    auto Y = k.output("Y", {M, N}, f32);
    k.grid({cdiv(M, 4), cdiv(N, 32)}, [&](Index i, Index j) {
      Tile x = k.load(X.tile({i, j}, {4, 32})), b = k.load(B.tile({i, j}, {4, 32}));
      k.store(Y.tile({i, j}, {4, 32}), x + x + b);
    });
  });
}

struct Problem {
  std::vector<HostTensor> args;
  std::vector<double> ref;
};

Problem problem(int64_t M, int64_t N) {
  Problem p;
  p.args.emplace_back(DType::f32, std::vector<int64_t>{M, N});
  p.args.emplace_back(DType::f32, std::vector<int64_t>{M, N});
  p.args.emplace_back(DType::f32, std::vector<int64_t>{M, N});
  p.args[0].fill_random(1);
  p.args[1].fill_random(2);
  for (int64_t i = 0; i < M * N; ++i) p.ref.push_back(2.0 * p.args[0].get(i) + p.args[1].get(i));
  return p;
}

} // namespace

TEST_CASE("check_kernel verifies an engine's kernel and fills its lifecycle row", "[testing]") {
  Runtime rt = Runtime::create(Backend::cpu);
  Problem p = problem(37, 100);
  testing::Check c = testing::check_kernel(rt, axpb(), p.args, 2, p.ref, {.timing = {3, 1, false}, .flops = 2.0 * 37 * 100});
  INFO(c.summary());
  CHECK(c.ok());
  CHECK(c.row.kernel == "axpb");
  CHECK(c.row.shape == "37x100");
  CHECK(c.row.dtype == "f32");
  CHECK(c.row.route == "kiln");
  CHECK(c.row.reference_ok == true);
  CHECK(c.row.compile_ms > 0);
  CHECK(c.row.warm->reps == 3);
  CHECK(c.row.tflops > 0);
  CHECK(c.row.peak_mb > 0);
  CHECK_THAT(c.summary(), Contains("reference_ok=true") && Contains("compile"));
}

TEST_CASE("check_kernel reports a wrong reference as a failure and does not time it", "[testing]") {
  Runtime rt = Runtime::create(Backend::cpu);
  Problem p = problem(8, 64);
  p.ref[5] += 1.0; // one element disagrees
  testing::Check c = testing::check_kernel(rt, axpb(), p.args, 2, p.ref);
  CHECK_FALSE(c.ok());
  CHECK(c.row.reference_ok == false);
  CHECK_FALSE(c.row.warm.has_value());
  CHECK_THAT(c.summary(), Contains("reference_ok=false"));
}

TEST_CASE("check_kernel poisons the output so an unwritten element cannot pass", "[testing]") {
  using namespace kiln::dsl;
  // Writes only the first 4x32 tile: the rest of Y keeps the poison.
  Kernel partial = kernel("partial", [](Builder& k) {
    auto [M, N] = k.dims("M", "N");
    auto X = k.input("X", {M, N}, f32), B = k.input("B", {M, N}, f32);
    auto Y = k.output("Y", {M, N}, f32);
    k.grid({cdiv(M, 1024)}, [&](Index i) { // one program for M <= 1024: i == 0
      Tile x = k.load(X.tile({i, i}, {4, 32})), b = k.load(B.tile({i, i}, {4, 32}));
      k.store(Y.tile({i, i}, {4, 32}), x + x + b);
    });
  });
  Runtime rt = Runtime::create(Backend::cpu);
  Problem p = problem(8, 64);
  p.args[2].fill_random(3); // a stale "right-looking" output must not survive either
  for (int64_t i = 0; i < 8 * 64; ++i) p.args[2].set(i, float(p.ref[size_t(i)]));
  testing::Check c = testing::check_kernel(rt, partial, p.args, 2, p.ref, {.time = false});
  CHECK_FALSE(c.ok());
  CHECK(c.report.nonfinite > 0);
}

TEST_CASE("check_kernel names a bad output index or reference size", "[testing][errors]") {
  Runtime rt = Runtime::create(Backend::cpu);
  Problem p = problem(4, 32);
  CHECK_THROWS_WITH(testing::check_kernel(rt, axpb(), p.args, 7, p.ref), Contains("output index 7"));
  p.ref.pop_back();
  CHECK_THROWS_WITH(testing::check_kernel(rt, axpb(), p.args, 2, p.ref), Contains("the reference has 127 values"));
}

TEST_CASE("append_csv writes the header once across calls", "[testing]") {
  const std::string path = "kiln-test-append.csv";
  std::remove(path.c_str());
  profile::Row r;
  r.shape = "4x4", r.dtype = "f32", r.device = "cpu", r.route = "kiln", r.kernel = "axpb";
  testing::append_csv(path, {r});
  testing::append_csv(path, {r, r});
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  std::string text = s.str();
  CHECK(text.rfind("shape,dtype,device,reference_ok,compile_ms,warm_ms,model_ms,peak_mb", 0) == 0);
  CHECK(text.find("shape,dtype", 1) == std::string::npos);
  size_t lines = 0;
  for (char ch : text) lines += ch == '\n';
  CHECK(lines == 4);
  std::remove(path.c_str());
}
