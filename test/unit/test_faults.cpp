// Fault injection: resources failing under kiln. A full disk (here: a file-size limit,
// RLIMIT_FSIZE, with SIGXFSZ ignored, so every write past it fails with EFBIG as on a full
// filesystem) must leave compiled kernels working, the kernel cache without a partial
// entry, and a tuning database as it was.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "kiln/cache.hpp"
#include "kiln/catalogue.hpp"
#include "kiln/error.hpp"
#include "kiln/runtime.hpp"
#include "kiln/tune.hpp"
#include "../scoped_env.hpp"
#include "../temp_dir.hpp"

using namespace kiln;
using kiln::testing::TempDir;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {

// Files can grow to `bytes` and no further while it lives (this process only).
class DiskFull {
public:
  explicit DiskFull(rlim_t bytes) {
    REQUIRE(::getrlimit(RLIMIT_FSIZE, &saved_) == 0);
    oldHandler_ = ::signal(SIGXFSZ, SIG_IGN);
    rlimit lim = saved_;
    lim.rlim_cur = bytes;
    REQUIRE(::setrlimit(RLIMIT_FSIZE, &lim) == 0);
  }
  ~DiskFull() {
    ::setrlimit(RLIMIT_FSIZE, &saved_);
    ::signal(SIGXFSZ, oldHandler_);
  }

private:
  rlimit saved_{};
  sighandler_t oldHandler_ = SIG_DFL;
};

std::vector<std::string> filesUnder(const fs::path& dir, const std::string& containing) {
  std::vector<std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file() && e.path().filename().string().find(containing) != std::string::npos)
      out.push_back(e.path().string());
  return out;
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

} // namespace

TEST_CASE("on a full disk a kernel still compiles and runs, and the cache keeps no partial entry", "[faults][cache]") {
  TempDir dir, tmp;
  const std::string cacheDir = dir.path.string();
  {
    // The CPU backend makes its object in memory; the cache's write is what fails. (TMPDIR
    // points at a directory of the test's own, which must stay empty: kiln writes no
    // temporary file outside the cache.)
    kiln::testing::ScopedEnv tmpdir("TMPDIR", tmp.path.c_str());
    DiskFull full(1024); // an entry is tens of kilobytes
    Runtime rt = Runtime::create(Backend::cpu, {.cache_dir = cacheDir});
    CompiledKernel ck = rt.compile(catalogue::gemm_bias_relu(DType::f32));
    CHECK_THAT(ck.cache().note, Contains("not written to the disk cache"));
    CHECK(rt.cache_stats().write_failures == 1);
    auto r = catalogue::run_and_verify(rt, catalogue::find("gemm_bias_relu"), {33, 17, 9}, DType::f32, 5);
    CHECK(r.report.ok);
  }
  CHECK(cache::list(cacheDir).empty());
  CHECK(filesUnder(dir.path, ".tmp.").empty()); // the failed writes cleaned up after themselves
  CHECK(filesUnder(tmp.path, "kiln-").empty());
  // Space again: the next process compiles, writes, and the one after reads it.
  {
    Runtime rt = Runtime::create(Backend::cpu, {.cache_dir = cacheDir});
    CHECK(rt.compile(catalogue::gemm_bias_relu(DType::f32)).cache().outcome == CacheOutcome::miss);
    CHECK(rt.cache_stats().disk_writes == 1);
  }
  Runtime rt = Runtime::create(Backend::cpu, {.cache_dir = cacheDir});
  CHECK(rt.compile(catalogue::gemm_bias_relu(DType::f32)).cache().outcome == CacheOutcome::disk);
}

TEST_CASE("on a full disk a search that cannot be saved is an error, and the database is left as it was",
          "[faults][tune]") {
  TempDir dir;
  const std::string db = (dir.path / "tune.json").string();
  catalogue::Problem p = catalogue::find("gemm").problem({24, 24, 24}, DType::f32, 11);
  const tune::Problem problem{p.args, p.output, p.reference, p.flops};
  auto gemmFor = [](const tune::Config& c) {
    return catalogue::gemm(DType::f32, {c.get("m", 32), c.get("n", 32), c.get("k", 16), 1});
  };
  const tune::Space space = tune::Space::product({{"m", {16, 32}}, {"n", {16}}, {"k", {16}}});
  tune::Options o{.reps = 2, .database = db};
  tune::tune(Backend::cpu, {.cache_dir = "off"}, space, gemmFor, problem, o);
  const std::string before = slurp(db);
  REQUIRE(before.size() > 512);
  o.replay = false; // search again, then fail to save it
  try {
    DiskFull full(256);
    tune::tune(Backend::cpu, {.cache_dir = "off"}, space, gemmFor, problem, o);
    FAIL("the save should fail");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::Runtime);
    CHECK_THAT(e.what(), Contains("cannot write the tuning database") && Contains(db));
  }
  CHECK(slurp(db) == before); // the earlier search is intact
  CHECK(filesUnder(dir.path, ".tmp.").empty());
}

// Hidden: ctest runs it in its own process with test/faults/fail_dlopen.c preloaded, so
// that every dlopen of nvJitLink fails as on a machine without it (faults.nvjitlink_missing);
// run any other way, it runs itself in such a process.
TEST_CASE("without nvJitLink, PTX is still made, a cubin is an Unsupported error naming it, and the process carries on",
          "[.nvjitlink-missing]") {
  if (!std::getenv("KILN_TEST_FAIL_DLOPEN")) {
    // Run without the shim (e.g. by a filter that picks hidden tests): run this test again in
    // a child process that has it.
    char self[4096] = {};
    REQUIRE(::readlink("/proc/self/exe", self, sizeof self - 1) > 0);
    const std::string cmd = std::string("env KILN_TEST_FAIL_DLOPEN=nvJitLink LD_PRELOAD='") + KILN_FAIL_DLOPEN_LIB +
                            "' '" + self + "' '[nvjitlink-missing]' > /dev/null 2>&1";
    CHECK(std::system(cmd.c_str()) == 0);
    return;
  }
  Runtime rt = Runtime::create(Backend::cuda, {.compile_only = true, .arch = "sm_90a"});
  const Kernel k = catalogue::gemm_bias_relu(DType::bf16);
  CHECK_THAT(rt.emit(k, Stage::ptx), Contains(".target sm_90a"));
  auto unsupported = [](auto&& f) {
    try {
      f();
    } catch (const Error& e) {
      CHECK(e.kind() == ErrorKind::Unsupported);
      return std::string(e.what());
    }
    FAIL("expected an Unsupported error");
    return std::string();
  };
  CHECK_THAT(unsupported([&] { rt.emit(k, Stage::cubin); }),
             Contains("nvJitLink not found") && Contains("libnvJitLink.so.13") && Contains("CUDA_HOME"));
  CHECK_THAT(unsupported([&] { rt.compile(k); }),
             Contains("kernel 'gemm_bias_relu': no cubin without nvJitLink") && Contains("nvJitLink not found"));
  // Asked again, the same answer (the failed load is remembered, not retried into a crash).
  CHECK_THAT(unsupported([&] { rt.emit(k, Stage::cubin); }), Contains("nvJitLink not found"));
  // Everything that does not need nvJitLink still works in this process.
  Runtime cpu = Runtime::create(Backend::cpu, {.cache_dir = "off"});
  auto r = catalogue::run_and_verify(cpu, catalogue::find("gemm_bias_relu"), {33, 17, 9}, DType::bf16, 5);
  CHECK(r.report.ok);
}
