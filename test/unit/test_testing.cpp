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

namespace {
/// The engine's own path for axpb today: a plain loop over its host copies (what it would
/// keep if kiln's kernel does not clear its threshold), its result `skew` off when asked.
struct LoopPath {
  const Problem& p;
  std::vector<double> y;
  double skew = 0;
  testing::Baseline baseline(const std::string& route = "loop") {
    return {route,
            [this] {
              y.resize(p.ref.size());
              for (size_t i = 0; i < y.size(); ++i) y[i] = 2.0 * p.args[0].get(int64_t(i)) + p.args[1].get(int64_t(i)) + skew;
            },
            [this] { return y; }};
  }
};
} // namespace

TEST_CASE("an engine decides between its own kernel and its own path, both verified and timed alike", "[testing]") {
  Runtime rt = Runtime::create(Backend::cpu);
  Problem p = problem(64, 256);
  testing::CheckOptions opts{.timing = {5, 1, false}};
  testing::Check c = testing::check_kernel(rt, axpb(), p.args, 2, p.ref, opts);
  REQUIRE(c.ok());
  LoopPath loop{p};
  std::vector<profile::Row> rows = testing::decide(rt, c, loop.baseline(), p.ref, 1.10, opts);
  REQUIRE(rows.size() == 2);
  const profile::Row &mine = rows[0], &theirs = rows[1];
  CHECK(mine.route == "kiln");
  CHECK(theirs.route == "loop");
  // The same problem, so judge() pairs them: kernel, shape and dtype are kiln's.
  CHECK(theirs.kernel == "axpb");
  CHECK(theirs.shape == "64x256");
  CHECK(theirs.reference_ok == true);
  CHECK(theirs.first_run_ms.has_value()); // its cold cost
  REQUIRE(theirs.warm);
  CHECK(theirs.warm->reps == 5);
  REQUIRE(mine.speedup);
  CHECK(*mine.speedup == Approx(theirs.warm->median / mine.warm->median));
  CHECK(mine.clears == (*mine.speedup >= 1.10));
  CHECK_THAT(mine.verdict, Contains(*mine.clears ? "adopt kiln for axpb 64x256 f32" : "keep loop for axpb 64x256 f32"));
  CHECK(theirs.verdict.empty()); // the baseline is what kiln is judged against
}

TEST_CASE("a baseline that computes the wrong result is never timed, and no verdict is given against it", "[testing]") {
  Runtime rt = Runtime::create(Backend::cpu);
  Problem p = problem(16, 64);
  testing::CheckOptions opts{.timing = {3, 1, false}};
  testing::Check c = testing::check_kernel(rt, axpb(), p.args, 2, p.ref, opts);
  LoopPath loop{p};
  loop.skew = 0.5;
  std::vector<profile::Row> rows = testing::decide(rt, c, loop.baseline(), p.ref, 1.10, opts);
  CHECK(rows[1].reference_ok == false);
  CHECK_FALSE(rows[1].warm);
  CHECK_FALSE(rows[0].speedup);
  CHECK(rows[0].verdict == "no verified, timed loop row for axpb 16x64 f32 to compare with");
}

TEST_CASE("decide refuses a baseline it cannot run, read or tell apart from kiln", "[testing][errors]") {
  Runtime rt = Runtime::create(Backend::cpu);
  Problem p = problem(8, 32);
  testing::CheckOptions opts{.timing = {2, 1, false}};
  testing::Check c = testing::check_kernel(rt, axpb(), p.args, 2, p.ref, opts);
  LoopPath loop{p};
  auto refused = [&](testing::Baseline b, const std::string& why) {
    try {
      testing::decide(rt, c, b, p.ref, 1.10, opts);
      FAIL("accepted a bad baseline");
    } catch (const Error& e) {
      CHECK(e.kind() == ErrorKind::InvalidArgument);
      CHECK_THAT(std::string(e.what()), Contains(why));
    }
  };
  testing::Baseline noResult = loop.baseline();
  noResult.result = nullptr;
  refused(noResult, "needs both run and result");
  refused(loop.baseline("kiln"), "as kiln's route");
  testing::Baseline short_ = loop.baseline();
  short_.result = [] { return std::vector<double>(3); };
  refused(short_, "the baseline's result has 3 values, the reference 256");
  CHECK_THROWS_AS(testing::decide(rt, c, loop.baseline(), p.ref, 0.0, opts), Error); // no threshold
}
