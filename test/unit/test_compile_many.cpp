// Compiling many kernels at once (Runtime::compile_all) and in the background
// (Runtime::compile_async): what an engine does with a model's kernels at start-up.
#include <catch2/catch.hpp>

#include <chrono>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include "kiln/catalogue.hpp"
#include "kiln/dsl.hpp"
#include "kiln/runtime.hpp"
#include "../temp_dir.hpp"

using namespace kiln;
using Catch::Matchers::Contains;

namespace {

Runtime cpu() { return Runtime::create(Backend::cpu, {.cache_dir = "off"}); }

bool runsRight(const Runtime& rt, const CompiledKernel& ck, const std::vector<int64_t>& shape) {
  catalogue::Problem p = catalogue::find(ck.signature().name).problem(shape, DType::f32, 11);
  catalogue::DeviceProblem d = catalogue::upload(rt, p);
  ck.launch(d.views);
  return catalogue::verify_output(rt, d, p).ok;
}

/// A kernel that traces but that the CUDA backend refuses: two grids.
Kernel broken() {
  using namespace kiln::dsl;
  return kernel("broken_two_grids", [](Builder& b) {
    auto [M] = b.dims("M");
    auto Y = b.output("Y", {M}, f32);
    for (int g = 0; g < 2; ++g) b.grid({cdiv(M, 4)}, [&](Index i) { b.store(Y.tile({i}, {4}), b.zeros({4})); });
  });
}
/// Compiles for sm_90a without a GPU (where broken() fails).
Runtime offline() { return Runtime::create(Backend::cuda, {.compile_only = true, .arch = "sm_90a", .cache_dir = "off"}); }

} // namespace

TEST_CASE("compile_all compiles every kernel on several threads and gives them back in order", "[runtime]") {
  Runtime rt = cpu();
  std::vector<Kernel> ks = {catalogue::softmax(DType::f32), catalogue::add(DType::f32), catalogue::gemm(DType::f32)};
  std::vector<CompiledKernel> out = rt.compile_all(ks, 3);
  REQUIRE(out.size() == 3);
  CHECK(out[0].signature().name == "softmax");
  CHECK(out[1].signature().name == "add");
  CHECK(out[2].signature().name == "gemm");
  CHECK(runsRight(rt, out[0], {9, 700}));
  CHECK(runsRight(rt, out[1], {33, 65}));
  CHECK(runsRight(rt, out[2], {40, 30, 20}));
  CHECK(rt.cache_stats().compiles == 3);
  CHECK(rt.compile_all({}).empty());
}

TEST_CASE("compile_all waits for every kernel, then throws the first failure, and keeps the others' work",
          "[runtime][errors][cuda]") {
  Runtime rt = offline();
  std::vector<Kernel> ks = {catalogue::add(DType::f32), broken(), catalogue::softmax(DType::f32)};
  CHECK_THROWS_WITH(rt.compile_all(ks, 2), Contains("broken_two_grids") && Contains("one grid per kernel"));
  // The kernels that compiled are in the memory cache: no compile again.
  CHECK(rt.compile(catalogue::add(DType::f32)).cache().outcome == CacheOutcome::memory);
  CHECK(rt.compile(catalogue::softmax(DType::f32)).cache().outcome == CacheOutcome::memory);
}

TEST_CASE("compile_async compiles in the background and get() gives the kernel once", "[runtime]") {
  Runtime rt = cpu();
  PendingKernel pending = rt.compile_async(catalogue::softmax(DType::f32));
  CompiledKernel ck = pending.get();
  CHECK(pending.ready() == false); // taken: nothing left to wait for
  CHECK(runsRight(rt, ck, {5, 300}));
  CHECK_THROWS_WITH(pending.get(), Contains("already taken"));

  PendingKernel soon = rt.compile_async(catalogue::add(DType::f32));
  for (int i = 0; i < 600 && !soon.ready(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  CHECK(soon.ready());
  CHECK(runsRight(rt, soon.get(), {3, 3}));
}

TEST_CASE("compile_async gives a failed compile's error from get(), and a pending handle may be dropped",
          "[runtime][errors][cuda]") {
  Runtime rt = offline();
  PendingKernel bad = rt.compile_async(broken());
  CHECK_THROWS_WITH(bad.get(), Contains("broken_two_grids"));
  { PendingKernel dropped = rt.compile_async(catalogue::gemm(DType::f32)); } // waits, then drops the result
  CHECK(rt.compile(catalogue::gemm(DType::f32)).cache().outcome == CacheOutcome::memory);
}

TEST_CASE("compile_threads changes none of a compile's code, and a negative count is refused", "[runtime][cuda]") {
  CHECK_THROWS_WITH(Runtime::create(Backend::cpu, {.compile_threads = -1, .cache_dir = "off"}),
                    Contains("RuntimeOptions::compile_threads") && Contains("got -1"));
  // A deploy entry: the twins' PTX modules (LLVM makes one per thread) and the fallback's,
  // compiled by the toolkit's ptxas, whose split compile lays the cubin out by its thread
  // count: kiln fixes that at 8 (compile_threads 0, 8 or more), so one per core on any
  // machine gives the same bytes under the same key. Fewer threads: the same key and machine
  // code, laid out by their count (the deploy test in test_cache.cpp compares the code).
  auto entry = [](int threads) {
    testing::TempDir dir;
    Runtime rt = Runtime::create(Backend::cuda, {.compile_only = true, .deploy_entries = true, .arch = "sm_90a",
                                                 .compile_threads = threads, .cache_dir = dir.str()});
    const std::string key = rt.compile(catalogue::gemm_bias_relu(DType::bf16)).cache().key;
    std::ifstream in(dir.str() + "/" + key.substr(0, 2) + "/" + key + ".kiln", std::ios::binary);
    std::ostringstream bytes;
    bytes << in.rdbuf();
    std::smatch m;
    const std::string text = bytes.str();
    REQUIRE(std::regex_search(text, m, std::regex("\"payload_sha256\":\"([0-9a-f]{64})\"")));
    return std::pair{key, m[1].str()};
  };
  // One thread first: the process's first compile then sets LLVM's lazily made statics up
  // on one thread (TSan cannot see them published; docs/testing.md).
  const auto one = entry(1);
  const auto every = entry(0);
  CHECK(entry(8) == every);
  CHECK(entry(12) == every);
  CHECK(one.first == every.first);
}
