// The kernel cache (kiln/cache.hpp): memory and disk hits, round trips for CPU objects and
// cubins, corrupt entries detected and replaced, the LRU limit, keys, rare shapes.
#include <catch2/catch.hpp>

#include <elf.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <map>
#include <random>
#include <regex>
#include <sstream>

#include "kiln/cache.hpp"
#include "../temp_dir.hpp"
#include "../scoped_env.hpp"
#include "kiln/log.hpp"
#include "kiln/catalogue.hpp"
#include "kiln/runtime.hpp"
#include "kiln/version.hpp"

using namespace kiln;
using kiln::testing::TempDir;
using Catch::Matchers::Contains;

namespace {


Runtime cpuWith(const std::string& dir, int64_t maxBytes = int64_t(1) << 30) {
  return Runtime::create(Backend::cpu, {.cache_dir = dir, .cache_max_bytes = maxBytes});
}
Runtime offlineWith(const std::string& dir, int warps = 4, const std::string& arch = "sm_90a") {
  return Runtime::create(Backend::cuda, {.compile_only = true, .arch = arch, .num_warps = warps, .cache_dir = dir});
}

std::string readAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}
void writeAll(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}
std::string onlyEntryPath(const std::string& dir) {
  auto entries = cache::list(dir);
  REQUIRE(entries.size() == 1);
  return dir + "/" + entries[0].key.substr(0, 2) + "/" + entries[0].key + ".kiln";
}

bool runsRight(const Runtime& rt, const CompiledKernel& ck, const std::vector<int64_t>& shape, uint64_t seed) {
  catalogue::Problem p = catalogue::find(ck.signature().name).problem(shape, DType::f32, seed);
  catalogue::DeviceProblem d = catalogue::upload(rt, p);
  ck.launch(d.views);
  return catalogue::verify_output(rt, d, p).ok;
}

} // namespace

TEST_CASE("a runtime compiles a kernel once and serves it again from memory", "[cache]") {
  Runtime rt = Runtime::create(Backend::cpu, {.cache_dir = "off"});
  CompiledKernel a = rt.compile(catalogue::gemm(DType::f32));
  CompiledKernel b = rt.compile(catalogue::gemm(DType::f32)); // traced again: same tile IR
  CHECK(a.cache().outcome == CacheOutcome::miss);
  CHECK(b.cache().outcome == CacheOutcome::memory);
  CHECK(a.cache().key == b.cache().key);
  CHECK(rt.cache_stats().compiles == 1);
  CHECK(rt.cache_stats().memory_hits == 1);
  CHECK(rt.cache_dir().empty());
  CHECK(runsRight(rt, b, {33, 17, 9}, 1));
  // Another runtime has its own memory.
  Runtime other = Runtime::create(Backend::cpu, {.cache_dir = "off"});
  CHECK(other.compile(catalogue::gemm(DType::f32)).cache().outcome == CacheOutcome::miss);
}

TEST_CASE("fifty random shapes through one kernel cost one compile", "[cache]") {
  Runtime rt = Runtime::create(Backend::cpu, {.cache_dir = "off"});
  std::mt19937 rng(2026);
  std::uniform_int_distribution<int64_t> dim(1, 300);
  for (int i = 0; i < 50; ++i) {
    CompiledKernel ck = rt.compile(catalogue::gemm_bias_relu(DType::f32)); // as an engine would, per call
    std::vector<int64_t> shape = {dim(rng), dim(rng), dim(rng)};
    INFO("shape " << shape[0] << "x" << shape[1] << "x" << shape[2]);
    catalogue::Problem p = catalogue::find("gemm_bias_relu").problem(shape, DType::f32, uint64_t(i));
    catalogue::DeviceProblem d = catalogue::upload(rt, p);
    ck.launch(d.views);
    REQUIRE(catalogue::verify_output(rt, d, p).ok);
  }
  CHECK(rt.cache_stats().compiles == 1);
  CHECK(rt.cache_stats().memory_hits == 49);
}

TEST_CASE("the disk cache round-trips a CPU kernel into a new runtime", "[cache]") {
  TempDir dir;
  CacheInfo first;
  CompileTimes original;
  {
    Runtime rt = cpuWith(dir.str());
    CompiledKernel ck = rt.compile(catalogue::gemm_bias_gelu(DType::bf16));
    first = ck.cache();
    original = ck.times();
    CHECK(first.outcome == CacheOutcome::miss);
    CHECK(rt.cache_stats().disk_writes == 1);
    CHECK(rt.cache_dir() == dir.str());
  }
  Runtime rt = cpuWith(dir.str()); // a new process would see the same
  CompiledKernel ck = rt.compile(catalogue::gemm_bias_gelu(DType::bf16));
  CHECK(ck.cache().outcome == CacheOutcome::disk);
  CHECK(ck.cache().key == first.key);
  CHECK(rt.cache_stats().compiles == 0);
  CHECK(rt.cache_stats().disk_hits == 1);
  CHECK(ck.times().codegen_ms == Approx(original.codegen_ms)); // the original compile, as recorded
  catalogue::Problem p = catalogue::find("gemm_bias_gelu").problem({70, 45, 33}, DType::bf16, 5);
  catalogue::DeviceProblem d = catalogue::upload(rt, p);
  ck.launch(d.views);
  CHECK(catalogue::verify_output(rt, d, p).ok);
  auto entries = cache::list(dir.str());
  REQUIRE(entries.size() == 1);
  CHECK(entries[0].valid);
  CHECK(entries[0].kernel == "gemm_bias_gelu");
  CHECK(entries[0].backend == "cpu");
}

TEST_CASE("the disk cache round-trips a cubin with its report and launch plan", "[cache][cuda]") {
  TempDir dir;
  std::string cubin;
  KernelReport report;
  {
    Runtime rt = offlineWith(dir.str());
    CompiledKernel ck = rt.compile(catalogue::gemm_bias_relu(DType::bf16));
    CHECK(ck.cache().outcome == CacheOutcome::miss);
    cubin = ck.binary();
    report = ck.report();
  }
  Runtime rt = offlineWith(dir.str());
  CompiledKernel ck = rt.compile(catalogue::gemm_bias_relu(DType::bf16));
  CHECK(ck.cache().outcome == CacheOutcome::disk);
  CHECK(ck.binary() == cubin);
  CHECK(ck.report().registers == report.registers);
  CHECK(ck.report().shared_bytes == report.shared_bytes);
  CHECK(ck.report().grid == report.grid);
  CHECK_THAT(report.sm90, Contains("128x128x64 tiles")); // the sm_90a twins and their launch plans
  CHECK(ck.report().sm90 == report.sm90);
  CHECK(cache::list(dir.str()).at(0).target == "sm_90a");
  // The plans came back too: the loaded kernel knows its twins' rules (16-byte rows).
  alignas(256) static char memory[1 << 16];
  auto at = [&](size_t offset, std::vector<int64_t> dims) { return TensorView{memory + offset, DType::bf16, dims, {}}; };
  CHECK_THAT(ck.launch_path({at(0, {64, 64}), at(8192, {64, 64}), at(16384, {64}), at(16640, {64, 64})}),
             Contains("sm_90a twin 'gemm_bias_relu__sm90'"));
  CHECK_THAT(ck.launch_path({at(0, {64, 36}), at(8192, {36, 64}), at(16384, {64}), at(16640, {64, 64})}),
             Contains("portable kernel") && Contains("row pitch is not a multiple of 16 bytes"));
}

TEST_CASE("the key changes with anything that changes the code, and only then", "[cache][cuda]") {
  TempDir dir;
  auto key = [&](const Kernel& k, int warps, const std::string& arch) {
    return offlineWith(dir.str(), warps, arch).compile(k).cache().key;
  };
  const std::string base = key(catalogue::gemm(DType::bf16), 4, "sm_90a");
  CHECK(key(catalogue::gemm(DType::bf16), 4, "sm_90a") == base);      // traced again
  CHECK(key(catalogue::gemm(DType::f16), 4, "sm_90a") != base);       // other IR
  CHECK(key(catalogue::gemm(DType::bf16, {128, 64, 32, 3}), 4, "sm_90a") != base); // other tiles
  CHECK(key(catalogue::gemm(DType::bf16), 8, "sm_90a") != base);      // other warps
  CHECK(key(catalogue::gemm(DType::bf16), 4, "sm_80") != base);       // other target
  auto hopper = [&](bool on, int tileN, int stages = 0, int cluster = 0, int tileM = 0, bool clusterM = false,
                    int raster = 0) {
    RuntimeOptions o{.compile_only = true, .arch = "sm_90a", .hopper_gemm = on, .hopper_tile_n = tileN,
                     .hopper_tile_m = tileM, .hopper_stages = stages, .hopper_cluster = cluster,
                     .hopper_cluster_m = clusterM, .hopper_raster = raster, .cache_dir = dir.str()};
    return Runtime::create(Backend::cuda, o).compile(catalogue::gemm(DType::bf16)).cache().key;
  };
  CHECK(hopper(true, 0) == base);
  CHECK(hopper(false, 0) != base); // no sm_90a twin
  CHECK(hopper(true, 256) != base); // a wider twin
  CHECK(hopper(true, 0, 3) != base); // a shallower ring
  CHECK(hopper(true, 0, 0, 2) != base); // clusters
  CHECK(hopper(true, 0, 0, 0, 64) != base); // the 64-row twin alone
  CHECK(hopper(true, 0, 0, 0, 128) != base); // the 128-row twins alone
  CHECK(hopper(true, 0, 0, 2, 0, true) != hopper(true, 0, 0, 2)); // stacked pairs, not side by side
  CHECK(hopper(true, 0, 0, 0, 0, false, 32) != base); // another tile order
  CHECK(cpuWith(dir.str()).compile(catalogue::gemm(DType::bf16)).cache().key != base); // other backend
  CHECK(base.size() == 64);
}

TEST_CASE("kiln::version() names the build that the runtime's fingerprint and the cache keys name", "[cache]") {
  const VersionInfo v = version();
  const Fingerprint f = Runtime::create(Backend::cpu, {.cache_dir = "off"}).fingerprint();
  CHECK(v.kiln == f.kiln); // release + build ID: another build, other cache keys
  CHECK(v.llvm == f.llvm);
  CHECK_THAT(v.kiln, Catch::Matchers::Matches("[0-9]+\\.[0-9]+\\.[0-9]+\\+[0-9a-f]{16}"));
  CHECK_THAT(v.cuda_toolkit, Catch::Matchers::Matches("[0-9]+\\.[0-9]+"));
  CHECK(v.str() == "kiln " + v.kiln + "\nLLVM/MLIR " + v.llvm + "\nCUDA toolkit " + v.cuda_toolkit);
}

namespace {
/// The payload of the entry of `key` in `dir` (after its first line, its JSON header and a newline).
std::string payloadOf(const std::string& dir, const std::string& key) {
  const std::string file = readAll(dir + "/" + key.substr(0, 2) + "/" + key + ".kiln");
  const size_t eol = file.find('\n');
  REQUIRE(eol != std::string::npos);
  std::istringstream header(file.substr(0, eol));
  std::string magic;
  size_t jsonBytes = 0;
  header >> magic >> jsonBytes;
  REQUIRE(eol + 2 + jsonBytes <= file.size());
  return file.substr(eol + 2 + jsonBytes);
}
bool isElf(const std::string& bytes) { return bytes.compare(0, 4, "\x7f" "ELF") == 0; }
/// A 64-bit ELF's ".text.<entry>" sections: each kernel's machine code.
std::map<std::string, std::string> textSections(const std::string& elf) {
  std::map<std::string, std::string> out;
  Elf64_Ehdr eh;
  REQUIRE(elf.size() >= sizeof eh);
  std::memcpy(&eh, elf.data(), sizeof eh);
  REQUIRE(eh.e_shentsize == sizeof(Elf64_Shdr));
  REQUIRE(eh.e_shoff + uint64_t(eh.e_shnum) * sizeof(Elf64_Shdr) <= elf.size());
  auto header = [&](size_t i) {
    Elf64_Shdr sh;
    std::memcpy(&sh, elf.data() + eh.e_shoff + i * sizeof sh, sizeof sh);
    REQUIRE(sh.sh_offset + sh.sh_size <= elf.size());
    return sh;
  };
  const Elf64_Shdr names = header(eh.e_shstrndx);
  for (size_t i = 0; i < eh.e_shnum; ++i) {
    const Elf64_Shdr sh = header(i);
    const std::string name = elf.c_str() + names.sh_offset + sh.sh_name;
    if (name.rfind(".text.", 0) == 0) out[name] = elf.substr(sh.sh_offset, sh.sh_size);
  }
  return out;
}
} // namespace

TEST_CASE("compiled for deploy, an sm_90a kernel with twins is machine code from the toolkit's ptxas, as the driver "
          "would make it on the GPU, and PTX for the driver without ptxas",
          "[cache][cuda]") {
  TempDir dir;
  auto deploy = [&](const std::string& arch) {
    return Runtime::create(Backend::cuda,
                           {.compile_only = true, .deploy_entries = true, .arch = arch, .cache_dir = dir.str()});
  };
  CompiledKernel made = deploy("sm_90a").compile(catalogue::gemm_bias_relu(DType::bf16));
  CHECK(made.cache().outcome == CacheOutcome::miss);
  CHECK_THAT(made.report().compiler, Contains("ptxas") && Contains("ahead of time (whole program"));
  // Every twin and the portable kernel in one cubin, the twins' register split kept: no spills.
  const std::string cubin = payloadOf(dir.str(), made.cache().key);
  CHECK(isElf(cubin));
  CHECK(cubin.find(std::string(".text.gemm_bias_relu") + '\0') != std::string::npos); // the portable kernel's code
  auto count = [](const std::string& text, const std::string& what) {
    size_t n = 0;
    for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
  };
  const std::string& twins = made.report().sm90;
  CHECK_THAT(twins, Contains("gemm_bias_relu__sm90_n256"));
  CHECK(count(twins, " spill bytes") == count(twins, "__sm90")); // ptxas's report of every twin
  const std::regex twinName("(gemm_bias_relu__sm90[a-z0-9_]*): ");
  size_t twinsInCubin = 0;
  for (auto it = std::sregex_iterator(twins.begin(), twins.end(), twinName); it != std::sregex_iterator(); ++it)
    twinsInCubin += cubin.find(".text." + (*it)[1].str() + '\0') != std::string::npos; // each twin's code
  CHECK(twinsInCubin == count(twins, "__sm90"));
  CHECK(count(twins, ", 0 spill bytes") == count(twins, " spill bytes"));
  CHECK(made.report().ptxas_notes.find("setmaxnreg") == std::string::npos);
  CHECK(made.report().spill_bytes == 0);
  CHECK(made.report().registers > 0);
  // Not the entry a plain compile-only runtime makes (nvJitLink's cubin, which drops the
  // twins' register split): another key.
  const std::string cubinKey = offlineWith(dir.str()).compile(catalogue::gemm_bias_relu(DType::bf16)).cache().key;
  CHECK(cubinKey != made.cache().key);
  // Read back by the next deploy runtime.
  CompiledKernel again = deploy("sm_90a").compile(catalogue::gemm_bias_relu(DType::bf16));
  CHECK(again.cache().outcome == CacheOutcome::disk);
  CHECK(again.cache().key == made.cache().key);
  CHECK(again.report().sm90 == made.report().sm90);
  // ptxas splits over a fixed count, not the machine's cores: the same settings give the same
  // bytes anywhere (here: a second cache), and another count (one thread) the same machine
  // code in every entry, laid out differently.
  TempDir second, single;
  auto deployTo = [](const std::string& cacheDir, int threads) {
    return Runtime::create(Backend::cuda, {.compile_only = true, .deploy_entries = true, .arch = "sm_90a",
                                           .compile_threads = threads, .cache_dir = cacheDir});
  };
  const std::string key = made.cache().key;
  (void)deployTo(second.str(), 0).compile(catalogue::gemm_bias_relu(DType::bf16));
  CHECK(payloadOf(second.str(), key) == cubin);
  (void)deployTo(single.str(), 1).compile(catalogue::gemm_bias_relu(DType::bf16));
  const std::map<std::string, std::string> code = textSections(cubin);
  CHECK(code.size() == twinsInCubin + 1);
  const std::string oneThread = payloadOf(single.str(), key);
  CHECK(oneThread != cubin); // the split is in force: another layout...
  CHECK(textSections(oneThread) == code); // ...of the same machine code
  // Where no twin is made (sm_80), deploy changes nothing: the same cubin, the same key.
  CHECK(deploy("sm_80").compile(catalogue::softmax(DType::bf16)).cache().key ==
        offlineWith(dir.str(), 4, "sm_80").compile(catalogue::softmax(DType::bf16)).cache().key);

  // Without ptxas: the PTX modules a GPU runtime keeps after its driver's JIT, under the same
  // key (a GPU runtime finds either), read back whole: every twin's module and the fallback's.
  TempDir ptxDir;
  kiln::testing::ScopedEnv off("KILN_PTXAS", "off");
  auto deployPtx = [&] {
    return Runtime::create(Backend::cuda,
                           {.compile_only = true, .deploy_entries = true, .arch = "sm_90a", .cache_dir = ptxDir.str()});
  };
  CompiledKernel ptx = deployPtx().compile(catalogue::gemm_bias_relu(DType::bf16));
  CHECK(ptx.cache().key == made.cache().key);
  CHECK_THAT(ptx.report().compiler,
             Contains("CUDA driver PTX JIT at load (whole program") && Contains("no machine code ahead of time: KILN_PTXAS=off"));
  const std::string payload = payloadOf(ptxDir.str(), ptx.cache().key);
  CHECK_FALSE(isElf(payload));
  CHECK_THAT(payload, Contains(".entry gemm_bias_relu__sm90_n256(") && Contains(".entry gemm_bias_relu("));
  CompiledKernel ptxAgain = deployPtx().compile(catalogue::gemm_bias_relu(DType::bf16));
  CHECK(ptxAgain.cache().outcome == CacheOutcome::disk);
  CHECK(ptxAgain.report().sm90 == ptx.report().sm90);
}

TEST_CASE("a deploy compile whose ptxas fails keeps the PTX entry for the GPU's driver and says why", "[cache][cuda]") {
  // A stand-in ptxas of nvJitLink's release that fails every compile.
  TempDir dir;
  const std::string release =
      Runtime::create(Backend::cuda, {.compile_only = true, .cache_dir = "off"}).fingerprint().compiler.substr(10);
  const std::string fake = dir.str() + "/ptxas";
  writeAll(fake, "#!/bin/sh\nif [ \"$1\" = --version ]; then echo 'ptxas: NVIDIA (R) Ptx optimizing assembler'; "
                 "echo 'Cuda compilation tools, release " + release + ", V" + release + ".0'; exit 0; fi\n"
                 "echo 'ptxas fatal   : a stand-in failure' >&2; exit 3\n");
  REQUIRE(::chmod(fake.c_str(), 0755) == 0);
  kiln::testing::ScopedEnv env("KILN_PTXAS", fake.c_str());
  // (On one thread: LLVM's lazily made statics, first reached by several codegen threads,
  // are a race TSan cannot see through; docs/testing.md.)
  Runtime rt = Runtime::create(Backend::cuda, {.compile_only = true, .deploy_entries = true, .arch = "sm_90a",
                                               .compile_threads = 1, .cache_dir = dir.str() + "/cache"});
  CompiledKernel ck = rt.compile(catalogue::gemm_bias_relu(DType::bf16));
  CHECK(ck.cache().outcome == CacheOutcome::miss);
  CHECK_THAT(ck.report().compiler, Contains("CUDA driver PTX JIT at load") && Contains("no machine code ahead of time") &&
                                       Contains("exit status 3") && Contains("a stand-in failure"));
  const std::string payload = payloadOf(dir.str() + "/cache", ck.cache().key);
  CHECK_FALSE(isElf(payload));
  CHECK_THAT(payload, Contains(".entry gemm_bias_relu__sm90_n256("));
}

TEST_CASE("a KILN_PTXAS that does not run as ptxas is refused when a deploy runtime is made, naming it",
          "[cache][cuda][errors]") {
  kiln::testing::ScopedEnv bogus("KILN_PTXAS", "/nonexistent/bin/ptxas");
  CHECK_THROWS_WITH(Runtime::create(Backend::cuda, {.compile_only = true, .deploy_entries = true, .arch = "sm_90a",
                                                     .cache_dir = "off"}),
                    Contains("KILN_PTXAS is '/nonexistent/bin/ptxas', which does not run as ptxas"));
  // Not read where nothing is compiled for deploy.
  CHECK_NOTHROW(Runtime::create(Backend::cuda, {.compile_only = true, .arch = "sm_90a", .cache_dir = "off"}));
}

TEST_CASE("deploy entries without compile_only are refused, naming the option", "[cache][errors]") {
  CHECK_THROWS_WITH(Runtime::create(Backend::cuda, {.deploy_entries = true, .cache_dir = "off"}),
                    Contains("RuntimeOptions::deploy_entries") && Contains("needs compile_only"));
}

namespace {
int64_t mtimeOf(const std::string& path) {
  struct stat st {};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  return int64_t(st.st_mtim.tv_sec);
}
void ageFile(const std::string& path) { // an hour ago: a refresh would show
  const struct timespec old[2] = {{std::time(nullptr) - 3600, 0}, {std::time(nullptr) - 3600, 0}};
  REQUIRE(::utimensat(AT_FDCWD, path.c_str(), old, 0) == 0);
}
} // namespace

TEST_CASE("a read-only cache serves its entries and writes, refreshes or replaces nothing", "[cache]") {
  TempDir dir;
  cpuWith(dir.str()).compile(catalogue::add(DType::f32));
  const std::string path = onlyEntryPath(dir.str());
  ageFile(path);
  const int64_t aged = mtimeOf(path);
  std::vector<std::string> warnings;
  set_log_sink([&](LogLevel l, std::string_view m) {
    if (l >= LogLevel::warn) warnings.emplace_back(m);
  });
  struct Restore {
    ~Restore() { set_log_sink({}); }
  } restore;
  auto readOnly = [&] { return Runtime::create(Backend::cpu, {.cache_dir = dir.str(), .cache_read_only = true}); };

  Runtime rt = readOnly();
  CompiledKernel hit = rt.compile(catalogue::add(DType::f32));
  CHECK(hit.cache().outcome == CacheOutcome::disk);
  CHECK(runsRight(rt, hit, {40, 300}, 5));
  CHECK(mtimeOf(path) == aged); // no LRU refresh
  CompiledKernel other = rt.compile(catalogue::softmax(DType::f32)); // not in the cache
  CHECK(other.cache().outcome == CacheOutcome::miss);
  CHECK_THAT(other.cache().note, Contains("not written to the disk cache: " + dir.str() + " is read-only"));
  CHECK(runsRight(rt, other, {9, 1000}, 6));
  CHECK(cache::list(dir.str()).size() == 1);
  CHECK(rt.cache_stats().write_failures == 0);
  CHECK(warnings.empty()); // by design, not a failure

  // A corrupt entry: compiled here, the file left as it is, said once.
  writeAll(path, "not a cache entry at all");
  CompiledKernel past = readOnly().compile(catalogue::add(DType::f32));
  CHECK(past.cache().outcome == CacheOutcome::miss);
  CHECK_THAT(past.cache().note, Contains("the read-only cache keeps it"));
  CHECK(readAll(path) == "not a cache entry at all");
  REQUIRE(warnings.size() == 1);
  CHECK_THAT(warnings[0], Contains(path) && Contains("the read-only cache keeps the entry"));
}

TEST_CASE("KILN_CACHE_READ_ONLY=1 makes the disk cache read-only", "[cache]") {
  TempDir dir;
  kiln::testing::ScopedEnv ro("KILN_CACHE_READ_ONLY", "1");
  Runtime rt = cpuWith(dir.str());
  CHECK_THAT(rt.compile(catalogue::add(DType::f32)).cache().note, Contains("is read-only"));
  CHECK(cache::list(dir.str()).empty());
}

TEST_CASE("a truncated cache entry is detected, recompiled and replaced", "[cache][errors]") {
  TempDir dir;
  cpuWith(dir.str()).compile(catalogue::add(DType::f32));
  const std::string path = onlyEntryPath(dir.str());
  std::string bytes = readAll(path);
  writeAll(path, bytes.substr(0, bytes.size() - 100));
  CHECK_FALSE(cache::list(dir.str()).at(0).valid);
  Runtime rt = cpuWith(dir.str());
  CompiledKernel ck = rt.compile(catalogue::add(DType::f32));
  CHECK(ck.cache().outcome == CacheOutcome::miss);
  CHECK_THAT(ck.cache().note, Contains("corrupt entry replaced") && Contains("truncated"));
  CHECK(rt.cache_stats().corrupt_entries == 1);
  CHECK(runsRight(rt, ck, {40, 300}, 3));
  CHECK(cache::list(dir.str()).at(0).valid); // replaced by a good one
  CHECK(cpuWith(dir.str()).compile(catalogue::add(DType::f32)).cache().outcome == CacheOutcome::disk);
}

TEST_CASE("a bit flip in a cache entry's payload or header is never loaded", "[cache][errors]") {
  TempDir dir;
  cpuWith(dir.str()).compile(catalogue::softmax(DType::f32));
  const std::string path = onlyEntryPath(dir.str());
  const std::string good = readAll(path);
  for (size_t at : {good.size() - 7, good.find("\"kernel\"") + 2}) {
    std::string bad = good;
    bad[at] = char(bad[at] ^ 0x10);
    writeAll(path, bad);
    Runtime rt = cpuWith(dir.str());
    CompiledKernel ck = rt.compile(catalogue::softmax(DType::f32));
    INFO("flipped byte " << at << ": " << ck.cache().note);
    CHECK(ck.cache().outcome == CacheOutcome::miss);
    CHECK(rt.cache_stats().corrupt_entries == 1);
    CHECK(runsRight(rt, ck, {9, 1000}, 4));
    CHECK(cache::list(dir.str()).at(0).valid); // replaced by a good one
  }
  // A garbage file where an entry should be.
  writeAll(path, "not a cache entry at all");
  Runtime rt = cpuWith(dir.str());
  CHECK_THAT(rt.compile(catalogue::softmax(DType::f32)).cache().note, Contains("bad magic"));
}

TEST_CASE("the disk cache stays under its size limit by evicting the least recently used", "[cache]") {
  TempDir dir;
  int64_t one = 0;
  {
    Runtime rt = cpuWith(dir.str());
    rt.compile(catalogue::add(DType::f32));
    one = cache::size_bytes(dir.str());
  }
  REQUIRE(one > 0);
  // Room for about two entries of this size.
  Runtime rt = cpuWith(dir.str(), one * 2 + one / 2);
  CompiledKernel add = rt.compile(catalogue::add(DType::f32)); // a disk hit: now the most recent
  CHECK(add.cache().outcome == CacheOutcome::disk);
  ::usleep(20000);
  rt.compile(catalogue::add(DType::f16));
  ::usleep(20000);
  rt.compile(catalogue::add(DType::bf16));
  CHECK(rt.cache_stats().evictions >= 1);
  CHECK(cache::size_bytes(dir.str()) <= one * 2 + one / 2);
  // The oldest (f32) went; the newest stays.
  Runtime again = cpuWith(dir.str(), int64_t(1) << 30);
  CHECK(again.compile(catalogue::add(DType::bf16)).cache().outcome == CacheOutcome::disk);
  CHECK(again.compile(catalogue::add(DType::f32)).cache().outcome == CacheOutcome::miss);
}

TEST_CASE("an unwritable cache directory costs the cache, not the kernel", "[cache][errors]") {
  Runtime rt = cpuWith("/proc/kiln-cannot-write-here");
  CompiledKernel ck = rt.compile(catalogue::add(DType::f32));
  CHECK(ck.cache().outcome == CacheOutcome::miss);
  CHECK_THAT(ck.cache().note, Contains("not written to the disk cache"));
  CHECK(rt.cache_stats().write_failures == 1);
  CHECK(runsRight(rt, ck, {5, 7}, 1));
}

TEST_CASE("caching can be turned off", "[cache]") {
  Runtime rt = Runtime::create(Backend::cpu, {.cache_dir = "off", .memory_cache = false});
  CHECK(rt.compile(catalogue::add(DType::f32)).cache().outcome == CacheOutcome::off);
  CHECK(rt.compile(catalogue::add(DType::f32)).cache().outcome == CacheOutcome::off);
  CHECK(rt.cache_stats().compiles == 2);
}

TEST_CASE("clear removes every entry", "[cache]") {
  TempDir dir;
  Runtime rt = cpuWith(dir.str());
  rt.compile(catalogue::add(DType::f32));
  rt.compile(catalogue::softmax(DType::f32));
  CHECK(cache::list(dir.str()).size() == 2);
  CHECK(cache::clear(dir.str()) == 2);
  CHECK(cache::list(dir.str()).empty());
  CHECK(cache::size_bytes(dir.str()) == 0);
}

TEST_CASE("the cache deletes only files it can prove are its own", "[cache][errors]") {
  TempDir dir;
  Runtime rt = cpuWith(dir.str());
  rt.compile(catalogue::add(DType::f32));
  const std::string entry = onlyEntryPath(dir.str());
  const std::string shard = entry.substr(0, entry.rfind('/'));
  const std::string key = cache::list(dir.str())[0].key;
  // A user's files beside the entries: a name kiln would never give, and one it would give
  // but with contents kiln never writes.
  const std::string notes = shard + "/notes.kiln", lookalike = shard + "/" + key.substr(0, 63) + (key.back() == 'f' ? "0" : "f") + ".kiln";
  writeAll(notes, "my notes");
  writeAll(lookalike, "not a cache entry");
  CHECK(cache::clear(dir.str()) == 1);
  CHECK(readAll(notes) == "my notes");
  CHECK(readAll(lookalike) == "not a cache entry");
  // Eviction under a tiny limit spares them too.
  Runtime tiny = cpuWith(dir.str(), 1);
  tiny.compile(catalogue::add(DType::f16));
  tiny.compile(catalogue::add(DType::bf16));
  CHECK(readAll(notes) == "my notes");
  CHECK(readAll(lookalike) == "not a cache entry");
}

TEST_CASE("a directory kiln did not tag is never cleared", "[cache][errors]") {
  TempDir dir;
  Runtime rt = cpuWith(dir.str());
  rt.compile(catalogue::add(DType::f32));
  const std::string entry = onlyEntryPath(dir.str());
  REQUIRE(::unlink((dir.str() + "/CACHEDIR.TAG").c_str()) == 0); // as if someone pointed clear elsewhere
  CHECK(cache::clear(dir.str()) == 0);
  CHECK(readAll(entry).rfind("KILNCACHE1 ", 0) == 0);
}

TEST_CASE("an entry copied under another key is listed as wrong, not ok", "[cache][errors]") {
  TempDir dir;
  Runtime rt = cpuWith(dir.str());
  rt.compile(catalogue::add(DType::f32));
  const std::string entry = onlyEntryPath(dir.str());
  const std::string other = std::string(64, 'a');
  ::mkdir((dir.str() + "/aa").c_str(), 0755);
  writeAll(dir.str() + "/aa/" + other + ".kiln", readAll(entry));
  for (const cache::Entry& e : cache::list(dir.str())) {
    INFO(e.key);
    CHECK(e.valid == (e.key != other));
    if (e.key == other) CHECK(e.problem == "entry is for another key");
  }
}
