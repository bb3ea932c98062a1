// A differential test of the DSL and the CPU backend: random elementwise-and-row-reduction
// programs (test/random_programs.hpp), each run as a kiln kernel and evaluated directly in
// f64 with the DSL's tile semantics, on ragged shapes. A fixed seed: the same programs on
// every machine (and, with the same standard library, the same input values); a failure
// prints the program. (fuzz_dsl_program does the same with
// libFuzzer choosing the programs.)
#include <catch2/catch.hpp>

#include <random>

#include "../random_programs.hpp"

using namespace kiln;
using namespace kiln::testing::random_programs;

TEST_CASE("random DSL programs agree with a direct evaluation of the same expression", "[dsl][cpu][random]") {
  std::mt19937_64 rng(20261201);
  const std::function<uint64_t()> next = [&] { return rng(); };
  Runtime rt = Runtime::create(Backend::cpu, {.cache_dir = "off"});
  const int64_t tileRows[] = {1, 4, 8, 16}, tileCols[] = {8, 16, 32, 64};
  for (int program = 0; program < 40; ++program) {
    std::shared_ptr<Node> tree = randomTree(next, 4);
    const int64_t tm = tileRows[rng() % 4], tn = tileCols[rng() % 4];
    const int64_t M = 1 + int64_t(rng() % 40), N = 1 + int64_t(rng() % 90);
    INFO("program " << program << ": " << show(*tree) << " on " << M << "x" << N << ", tiles " << tm << "x" << tn);
    HostTensor x(DType::f32, {M, N}), y(DType::f32, {M, N});
    std::uniform_real_distribution<float> u(-2.0f, 2.0f);
    for (int64_t i = 0; i < M * N; ++i) x.set(i, u(rng)), y.set(i, u(rng));
    double worst = 0;
    const int bad = compareWithEval(rt, *tree, tm, tn, x, y, "random_" + std::to_string(program), worst);
    INFO("worst relative error " << worst);
    CHECK(bad == 0);
  }
}

TEST_CASE("random DSL programs lower to PTX for sm_80 and sm_90a", "[dsl][cuda][random]") {
  // The CUDA lowering of the same kind of programs (no GPU here: PTX only; the CPU test
  // above checks their values).
  std::mt19937_64 rng(20261202);
  const std::function<uint64_t()> next = [&] { return rng(); };
  const int64_t tileRows[] = {1, 4, 8, 16}, tileCols[] = {8, 16, 32, 64};
  for (const char* arch : {"sm_80", "sm_90a"}) {
    Runtime rt = Runtime::create(Backend::cuda, {.compile_only = true, .arch = arch, .cache_dir = "off"});
    for (int program = 0; program < 8; ++program) {
      std::shared_ptr<Node> tree = randomTree(next, 4);
      const int64_t tm = tileRows[rng() % 4], tn = tileCols[rng() % 4];
      INFO(arch << " program " << program << ": " << show(*tree) << ", tiles " << tm << "x" << tn);
      const std::string ptx = rt.emit(randomKernel(*tree, tm, tn, "random_" + std::to_string(program)), Stage::ptx);
      CHECK(ptx.find(".entry random_" + std::to_string(program)) != std::string::npos);
    }
  }
}
