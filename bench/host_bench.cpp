// kiln-bench-host: what kiln costs the host, per call, apart from any kernel's own time:
//   create_ms        Runtime::create (median of fresh runtimes after the first, which also
//                    loads the libraries: first_create_ms)
//   memory_hit_us    Runtime::compile of a Kernel the runtime already compiled (memory hit)
//   retrace_hit_us   the same, the kernel traced again first (an engine that rebuilds it)
//   launch_us        CompiledKernel::launch of `add` on 8 x 8, enqueued on a stream (CUDA:
//                    the host's cost alone, the GPU runs behind; CPU: the run itself)
//   cublaslt_us      (CUDA) the same for a cuBLASLt matmul call, 8 x 8 x 8 bf16, through
//                    reference::gpu_gemm_async: what the framework path pays per call
//   raw_launch_us    (CUDA) cuLaunchKernel of an empty kernel on the same stream, straight
//                    through the driver: the floor any launch pays, kiln's included
// Medians over many calls (a row per backend asked for). Host clock: these are host costs.
//   kiln-bench-host [--backend cpu|cuda|auto] [--calls N] [--csv FILE]
#include <kiln/kiln.hpp>

#include <cuda.h> // types only: the driver is opened with dlopen, as kiln does
#include <dlfcn.h>

#include "csv_append.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

namespace {
using Clock = std::chrono::steady_clock;
double usSince(Clock::time_point t0) { return std::chrono::duration<double, std::micro>(Clock::now() - t0).count(); }

/// The host cost of cuLaunchKernel itself: an empty kernel, launched on the default stream of
/// the context kiln made current. "not-run" when the driver cannot be reached.
template <class Median>
std::string rawLaunchUs(Median median) {
  void* lib = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) return "not-run";
  auto load = reinterpret_cast<decltype(&cuModuleLoadData)>(::dlsym(lib, "cuModuleLoadData"));
  auto get = reinterpret_cast<decltype(&cuModuleGetFunction)>(::dlsym(lib, "cuModuleGetFunction"));
  auto launch = reinterpret_cast<decltype(&cuLaunchKernel)>(::dlsym(lib, "cuLaunchKernel"));
  auto sync = reinterpret_cast<decltype(&cuCtxSynchronize)>(::dlsym(lib, "cuCtxSynchronize"));
  static const char* ptx = ".version 7.0\n.target sm_80\n.address_size 64\n.visible .entry kiln_empty() { ret; }\n";
  CUmodule m = nullptr;
  CUfunction f = nullptr;
  if (!load || !get || !launch || !sync || load(&m, ptx) != CUDA_SUCCESS || get(&f, m, "kiln_empty") != CUDA_SUCCESS)
    return "not-run";
  auto once = [&] { launch(f, 1, 1, 1, 32, 1, 1, 0, nullptr, nullptr, nullptr); };
  const std::string us = std::to_string(median(once));
  sync();
  return us; // (the module stays loaded: the process ends next)
}

/// The median of `calls` timings of f(), after `calls / 10` untimed ones, in µs.
template <class F>
double medianUs(int calls, F&& f) {
  for (int i = 0; i < calls / 10; ++i) f();
  std::vector<double> t(static_cast<size_t>(calls));
  for (double& x : t) {
    auto t0 = Clock::now();
    f();
    x = usSince(t0);
  }
  std::nth_element(t.begin(), t.begin() + calls / 2, t.end());
  return t[size_t(calls / 2)];
}
} // namespace

int main(int argc, char** argv) try {
  std::string backend = "auto", csv;
  int calls = 2000;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--backend")) backend = argv[i + 1];
    else if (!std::strcmp(argv[i], "--calls")) calls = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--csv")) csv = argv[i + 1];
    else {
      std::fprintf(stderr, "usage: kiln-bench-host [--backend cpu|cuda|auto] [--calls N] [--csv FILE]\n");
      return 2;
    }
  }
  if (calls < 10) {
    std::fprintf(stderr, "kiln-bench-host: --calls must be at least 10\n");
    return 2;
  }
  const kiln::Backend b = kiln::parse_backend(backend);
  const kiln::RuntimeOptions options{.cache_dir = "off"};
  auto t0 = Clock::now();
  kiln::Runtime rt = kiln::Runtime::create(b, options);
  const double firstCreateMs = usSince(t0) / 1000;
  const double createMs = medianUs(std::max(10, calls / 100), [&] { kiln::Runtime::create(b, options); }) / 1000;

  const kiln::Kernel k = kiln::catalogue::add(kiln::DType::f32);
  kiln::CompiledKernel ck = rt.compile(k); // the one compile
  const double hitUs = medianUs(calls, [&] { rt.compile(k); });
  const double retraceUs = medianUs(std::max(10, calls / 10), [&] { rt.compile(kiln::catalogue::add(kiln::DType::f32)); });
  bool allHits = rt.compile(k).cache().outcome == kiln::CacheOutcome::memory;

  kiln::catalogue::Problem p = kiln::catalogue::find("add").problem({8, 8}, kiln::DType::f32, 5);
  kiln::catalogue::DeviceProblem d = kiln::catalogue::upload(rt, p);
  void* stream = nullptr; // the default stream
  const double launchUs = medianUs(calls, [&] { ck.launch(d.views, stream); });
  rt.synchronize();
  const bool ok = kiln::catalogue::verify_output(rt, d, p).ok;
  std::string cublasUs = "not-run", rawUs = "not-run";
  if (rt.backend() == kiln::Backend::cuda) {
    kiln::DeviceTensor a = rt.allocate(kiln::DType::bf16, {8, 8}), bm = rt.allocate(kiln::DType::bf16, {8, 8}),
                       c = rt.allocate(kiln::DType::bf16, {8, 8});
    auto call = [&] {
      kiln::reference::gpu_gemm_async(rt, a.view(), bm.view(), nullptr, kiln::reference::Epilogue::none, c.view(), nullptr,
                                      stream);
    };
    call(); // its handle and workspace, made once
    cublasUs = std::to_string(medianUs(calls, call));
    rt.synchronize();
    rawUs = rawLaunchUs([&](auto&& f) { return medianUs(calls, f); });
  }

  const char* header =
      "backend,first_create_ms,create_ms,memory_hit_us,retrace_hit_us,launch_us,cublaslt_us,raw_launch_us,calls,memory_hits,"
      "reference_ok\n";
  char row[512];
  std::snprintf(row, sizeof row, "%s,%.3f,%.3f,%.2f,%.2f,%.2f,%s,%s,%d,%s,%s\n", kiln::to_string(rt.backend()),
                firstCreateMs, createMs, hitUs, retraceUs, launchUs, cublasUs.c_str(), rawUs.c_str(), calls,
                allHits ? "true" : "false", ok ? "true" : "false");
  std::printf("%s%s", header, row);
  appendCsvRow(csv, header, row);
  return ok && allHits ? 0 : 1;
} catch (const kiln::Error& e) {
  std::fprintf(stderr, "kiln-bench-host: %s\n", e.what());
  return 2;
}
