// The CPU backend works on every x86-64 host, not only on the one a developer has: the
// dtype suite runs with the JIT's target forced to baselines without native bf16 or f16
// conversions (x86-64, x86-64-v2) and to x86-64-v3 (F16C, no AVX512-BF16), where LLVM
// calls conversion helpers that kiln must provide. A JIT that needed a helper from the
// host's toolchain fails here on every host, not only on AMD ones.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <optional>
#include <random>
#include <unistd.h>

#include "kiln/cache.hpp"
#include "kiln/error.hpp"

#include "dtype_suite.hpp"
#include "../scoped_env.hpp"

using namespace kiln;
using Catch::Matchers::Contains;

using kiln::testing::ScopedEnv;

namespace {

Runtime forced(const std::string& cpu, const std::string& cacheDir = "off") {
  return Runtime::create(Backend::cpu, {.cpu = cpu, .cache_dir = cacheDir});
}

} // namespace

TEST_CASE("the dtype suite passes with the JIT forced to plain x86-64 (SSE2, no F16C)", "[cpu][targets]") {
  Runtime rt = forced("x86-64");
  CHECK_THAT(rt.describe(), Contains("x86-64 (forced by RuntimeOptions::cpu"));
  test::runDtypeSuite(rt);
}

TEST_CASE("the dtype suite passes with the JIT forced to x86-64-v2", "[cpu][targets]") {
  test::runDtypeSuite(forced("x86-64-v2"));
}

TEST_CASE("the dtype suite passes with the JIT forced to x86-64-v3 (F16C, no AVX512-BF16)", "[cpu][targets]") {
  // Every x86-64 server of the last decade has AVX2; a host without it must get the clear
  // refusal instead, which is what this then checks.
  try {
    Runtime rt = forced("x86-64-v3");
    test::runDtypeSuite(rt);
  } catch (const Error& e) {
    WARN("this host cannot run x86-64-v3 code: " << e.what());
    CHECK(e.kind() == ErrorKind::Unsupported);
    CHECK_THAT(std::string(e.what()), Contains("avx2") && Contains("lacks"));
  }
}

TEST_CASE("KILN_CPU forces the target when the options leave it empty, and host means the host", "[cpu][targets]") {
  std::string hostDescription = Runtime::create(Backend::cpu, {.cpu = "host"}).describe();
  CHECK_THAT(hostDescription, !Contains("forced"));
  {
    ScopedEnv env("KILN_CPU", "x86-64-v2");
    Runtime rt = Runtime::create(Backend::cpu, {.cache_dir = "off"});
    CHECK_THAT(rt.describe(), Contains("x86-64-v2 (forced by KILN_CPU"));
    CHECK(rt.fingerprint().target == "x86-64-v2");
    test::checkBf16SumAccumulatesInF32(rt);
    // The option wins over the environment.
    CHECK_THAT(Runtime::create(Backend::cpu, {.cpu = "host"}).describe(), !Contains("forced"));
  }
  {
    ScopedEnv env("KILN_CPU", "host");
    CHECK(Runtime::create(Backend::cpu).describe() == hostDescription);
  }
}

TEST_CASE("an unknown or non-x86-64 CPU name is refused, naming it and where it came from", "[cpu][targets][errors]") {
  for (const char* bad : {"pentium-nope", "cortex-a53", "i386", "x86-64-v9"}) {
    INFO(bad);
    try {
      forced(bad);
      FAIL("Runtime::create accepted the CPU '" << bad << "'");
    } catch (const Error& e) {
      CHECK(e.kind() == ErrorKind::InvalidArgument);
      CHECK_THAT(std::string(e.what()), Contains(std::string("CPU '") + bad + "' (from RuntimeOptions::cpu)") &&
                                            Contains("x86-64-v2"));
    }
  }
  ScopedEnv env("KILN_CPU", "nonsense");
  CHECK_THROWS_WITH(Runtime::create(Backend::cpu), Contains("CPU 'nonsense' (from KILN_CPU)"));
}

TEST_CASE("a CPU that needs instructions this host lacks is refused before any code runs", "[cpu][targets][errors]") {
  // Diamond Rapids implies APX and AVX10.2, which no x86-64 host this suite runs on has
  // (the refusal names them; running its code would stop on an illegal instruction).
  try {
    forced("diamondrapids");
    WARN("this host runs Diamond Rapids code; nothing to refuse here");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::Unsupported);
    CHECK_THAT(std::string(e.what()), Contains("CPU 'diamondrapids'") && Contains("which this host") &&
                                          Contains("would not run here"));
  }
}

TEST_CASE("a kernel cached for one target CPU is never loaded for another", "[cpu][targets][cache]") {
  static std::mt19937_64 rng{std::random_device{}()};
  std::string dir = "kiln-target-cache-" + std::to_string(::getpid()) + "-" + std::to_string(rng());
  Kernel k = catalogue::gemm_bias_relu(DType::bf16);

  CompiledKernel v2 = forced("x86-64-v2", dir).compile(k);
  CHECK(v2.cache().outcome == CacheOutcome::miss);
  CompiledKernel host = forced("host", dir).compile(k);
  CHECK(host.cache().outcome == CacheOutcome::miss); // same kernel, another CPU: compiled anew
  CHECK(host.cache().key != v2.cache().key);
  CompiledKernel plain = forced("x86-64", dir).compile(k);
  CHECK(plain.cache().outcome == CacheOutcome::miss);
  CHECK(cache::list(dir).size() == 3);

  // Each target finds its own entry again, and the loaded code is right.
  for (const char* cpu : {"x86-64-v2", "host", "x86-64"}) {
    INFO(cpu);
    Runtime rt = forced(cpu, dir);
    CompiledKernel again = rt.compile(k);
    CHECK(again.cache().outcome == CacheOutcome::disk);
    catalogue::Problem p = catalogue::find("gemm_bias_relu").problem({65, 33, 17}, DType::bf16, 7);
    catalogue::DeviceProblem d = catalogue::upload(rt, p);
    again.launch(d.views);
    CHECK(catalogue::verify_output(rt, d, p).ok);
  }
  cache::clear(dir);
  std::string cmd = "rm -rf '" + dir + "'";
  (void)!std::system(cmd.c_str());
}
