// kiln warm MANIFEST: a deploy step. Compiles catalogue kernels x dtypes x CUDA archs into
// a disk cache without a GPU, as the runtime on a GPU of each arch would compile them
// (RuntimeOptions::deploy_entries), so an engine shipped with that cache directory compiles
// nothing at start-up. The manifest, a line per kernel ('#' starts a comment):
//   <kernel> <dtype>[,<dtype>...] <arch>[,<arch>...] [<shape>]
//   gemm_bias_relu bf16,f16 sm_90a,sm_80
//   attention      bf16     sm_90a        1x32x8x2048x128   # kernels specialised on a shape
// Every line is checked before anything compiles: a typo costs no time.
#include "warm.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>
#include <vector>

#include "kiln/kiln.hpp"

namespace {

struct Item {
  int line = 0;
  const kiln::catalogue::Entry* entry = nullptr;
  kiln::DType dtype = kiln::DType::bf16;
  std::string arch;
  std::vector<int64_t> shape; // empty: the entry's own kernel
  // Filled by the compile:
  std::string outcome, key, error;
  std::string ptxWhy; // held as PTX for the GPU's driver to compile at load: why ("" when machine code)
  double ms = 0;
};

std::vector<std::string> splitOn(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string part;
  std::istringstream in(s);
  while (std::getline(in, part, sep)) out.push_back(part);
  return out;
}

std::vector<Item> readManifest(const std::string& path) {
  const std::string text = kiln::read_file(path, "manifest");
  std::vector<Item> items;
  std::istringstream lines(text);
  std::string raw;
  for (int n = 1; std::getline(lines, raw); ++n) {
    const std::string line = raw.substr(0, raw.find('#'));
    std::istringstream words(line);
    std::vector<std::string> w;
    for (std::string x; words >> x;) w.push_back(x);
    if (w.empty()) continue;
    auto fail = [&](const std::string& why) {
      throw kiln::Error(kiln::ErrorKind::InvalidArgument, path + ":" + std::to_string(n) + ": " + why);
    };
    if (w.size() < 3 || w.size() > 4)
      fail("expected '<kernel> <dtype>[,<dtype>...] <arch>[,<arch>...] [<shape>]', got " + std::to_string(w.size()) +
           " words");
    Item base;
    base.line = n;
    try {
      base.entry = &kiln::catalogue::find(w[0]);
      if (w.size() == 4) base.shape = kiln::catalogue::parse_shape(w[3], *base.entry);
      for (const std::string& d : splitOn(w[1], ',')) {
        const std::optional<kiln::DType> parsed = kiln::parse_dtype(d);
        if (!parsed || *parsed == kiln::DType::i32) fail("unknown dtype '" + d + "' (f32, f16 or bf16)");
        const kiln::DType dt = *parsed;
        for (const std::string& a : splitOn(w[2], ',')) {
          if (a.rfind("sm_", 0) != 0) fail("arch '" + a + "' is not a CUDA arch (sm_80, sm_90a, ...)");
          Item it = base;
          it.dtype = dt;
          it.arch = a;
          items.push_back(it);
        }
      }
    } catch (const kiln::Error& e) {
      if (std::string(e.what()).rfind(path + ":", 0) == 0) throw;
      fail(e.what());
    }
  }
  if (items.empty())
    throw kiln::Error(kiln::ErrorKind::InvalidArgument, path + ": no kernels (a line per kernel: '<kernel> <dtypes> <archs> [<shape>]')");
  return items;
}

} // namespace

int cmdWarm(const std::string& manifest, const std::string& dir, int threads) {
  std::vector<Item> items = readManifest(manifest);
  // One compile-only runtime per arch, each made (and its arch checked) before any compile.
  std::map<std::string, kiln::Runtime> runtimes;
  for (const Item& it : items)
    if (!runtimes.count(it.arch))
      runtimes.emplace(it.arch, kiln::Runtime::create(kiln::Backend::cuda, {.compile_only = true, .deploy_entries = true,
                                                                           .arch = it.arch, .cache_dir = dir}));
  const std::string where = runtimes.begin()->second.cache_dir();
  if (where.empty())
    throw kiln::Error(kiln::ErrorKind::InvalidArgument,
                      "the disk cache is off (KILN_CACHE_DIR=off): give kiln warm a directory with --dir");
  std::printf("warming %s: %zu kernel(s) from %s\n", where.c_str(), items.size(), manifest.c_str());
  std::fflush(stdout);

  std::atomic<size_t> next{0};
  std::mutex printMu;
  auto worker = [&] {
    for (size_t i = next++; i < items.size(); i = next++) {
      Item& it = items[i];
      const kiln::Runtime& rt = runtimes.at(it.arch);
      auto t0 = std::chrono::steady_clock::now();
      try {
        kiln::Kernel k = it.shape.empty() ? it.entry->make(it.dtype)
                                          : kiln::catalogue::kernel_for(*it.entry, it.dtype, it.shape, it.arch);
        kiln::CompiledKernel ck = rt.compile(k);
        const kiln::CacheInfo& c = ck.cache();
        it.key = c.key;
        // The report says how the entry's code is held: machine code (nvJitLink's, or the
        // toolkit's ptxas's for a kernel with sm_90a twins), or PTX the GPU's driver compiles.
        const std::string& compiler = ck.report().compiler;
        if (compiler.find("JIT at load") != std::string::npos) {
          const auto why = compiler.find("no machine code ahead of time: ");
          it.ptxWhy = why == std::string::npos ? "kept as PTX" : compiler.substr(why + 31);
        }
        it.outcome = c.outcome == kiln::CacheOutcome::disk ? "already cached"
                     : c.note.empty()                      ? "compiled"
                                                           : "compiled, " + c.note;
      } catch (const kiln::Error& e) {
        it.error = e.what();
      }
      it.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      std::lock_guard<std::mutex> lock(printMu);
      std::printf("%-28s %-5s %-7s %9.1f ms  %s%s\n", it.entry->name.c_str(), kiln::to_string(it.dtype), it.arch.c_str(),
                  it.ms, it.error.empty() ? ("key " + it.key.substr(0, 12) + "  ").c_str() : "",
                  it.error.empty() ? it.outcome.c_str() : ("FAILED: " + it.error).c_str());
      std::fflush(stdout);
    }
  };
  const int n = std::max(1, std::min<int>(threads > 0 ? threads : int(std::thread::hardware_concurrency()), int(items.size())));
  std::vector<std::thread> pool;
  for (int t = 0; t < n; ++t) pool.emplace_back(worker);
  for (std::thread& t : pool) t.join();

  size_t failed = 0, ptx = 0;
  std::string ptxWhy;
  for (const Item& it : items) {
    failed += !it.error.empty();
    if (it.error.empty() && !it.ptxWhy.empty()) ++ptx, ptxWhy = it.ptxWhy;
  }
  std::printf("%zu of %zu in the cache at %s%s\n", items.size() - failed, items.size(), where.c_str(),
              failed ? "; the others failed (above)" : "");
  // What a GPU machine then pays to load them: machine code loads in milliseconds, PTX is
  // compiled by its driver at the first load (about a second for a GEMM with its twins).
  std::printf("machine code: %zu of %zu%s\n", items.size() - failed - ptx, items.size() - failed,
              ptx ? ("; the others PTX, compiled by the GPU's driver at load (" + ptxWhy + ")").c_str() : "");
  return failed ? 2 : 0;
}
