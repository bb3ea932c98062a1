// kiln-bench-host: what kiln costs the host, per call, apart from any kernel's own time:
//   create_ms        Runtime::create (median of fresh runtimes after the first, which also
//                    loads the libraries: first_create_ms)
//   memory_hit_us    Runtime::compile of a Kernel the runtime already compiled (memory hit)
//   retrace_hit_us   the same, the kernel traced again first (an engine that rebuilds it)
//   launch_us        CompiledKernel::launch of `add` on 8 x 8, enqueued on a stream (CUDA:
//                    the host's cost alone, the GPU runs behind, the stream drained untimed
//                    every 64 launches so none waits on a full queue; CPU: the run itself)
//   cublaslt_us      (CUDA) the same for a cuBLASLt matmul call, 8 x 8 x 8 bf16, through
//                    reference::gpu_gemm_async: what the framework path pays per call
//   raw_launch_us    (CUDA) cuLaunchKernel of an empty kernel on the same stream, straight
//                    through the driver: the floor any launch pays, kiln's included
//   gemm_launch_us   (CUDA) CompiledKernel::launch of `gemm` bf16 512 x 512 x 512 (on sm_90a
//                    its twin: tensor maps encoded, cuLaunchKernelEx), as launch_us
//   ctx_set_us, pointer_query_us, tensor_map_us
//                    (CUDA) the driver calls a launch makes, each alone: cuCtxSetCurrent,
//                    cuPointerGetAttributes (3 attributes, one tensor), cuTensorMapEncodeTiled
//                    (a 2-D bf16 map, 128B swizzle): where a launch's time over the floor goes
//   driver_init_ms, create_after_driver_ms
//                    (CUDA) in a fresh process of its own: an engine's CUDA start-up (cuInit,
//                    the primary context retained and made current), then Runtime::create
//                    in that process: what kiln adds where the engine's CUDA is up already
// Medians over many calls (a row per backend asked for). Host clock: these are host costs.
//   kiln-bench-host [--backend cpu|cuda|auto] [--calls N] [--csv FILE]
#include <kiln/kiln.hpp>

#include <cuda.h> // types only: the driver is opened with dlopen, as kiln does
#include <dlfcn.h>
#include <unistd.h>

#include "csv_append.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <utility>
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
  const std::string us = std::to_string(median(once, [&] { sync(); }));
  sync();
  return us; // (the module stays loaded: the process ends next)
}

/// The host cost of the driver calls kiln's launch makes besides the launch itself, each
/// alone, on `ptr` (device memory of at least 512 x 512 bf16) in the current context:
/// {ctx_set_us, pointer_query_us, tensor_map_us}, "not-run" where a call is missing.
template <class Median>
std::array<std::string, 3> driverCallUs(void* ptr, Median median) {
  std::array<std::string, 3> out = {"not-run", "not-run", "not-run"};
  void* lib = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) return out;
  auto getCtx = reinterpret_cast<decltype(&cuCtxGetCurrent)>(::dlsym(lib, "cuCtxGetCurrent"));
  auto setCtx = reinterpret_cast<decltype(&cuCtxSetCurrent)>(::dlsym(lib, "cuCtxSetCurrent"));
  auto attrs = reinterpret_cast<decltype(&cuPointerGetAttributes)>(::dlsym(lib, "cuPointerGetAttributes"));
  auto encode = reinterpret_cast<decltype(&cuTensorMapEncodeTiled)>(::dlsym(lib, "cuTensorMapEncodeTiled"));
  CUcontext ctx = nullptr;
  if (getCtx && setCtx && getCtx(&ctx) == CUDA_SUCCESS && ctx)
    out[0] = std::to_string(median([&] { setCtx(ctx); }));
  if (attrs) {
    int ordinal = -1;
    CUdeviceptr start = 0;
    size_t size = 0;
    CUpointer_attribute which[] = {CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
                                   CU_POINTER_ATTRIBUTE_RANGE_SIZE};
    void* data[] = {&ordinal, &start, &size};
    out[1] = std::to_string(median([&] { attrs(3, which, data, reinterpret_cast<CUdeviceptr>(ptr)); }));
  }
  if (encode) {
    CUtensorMap map;
    cuuint64_t dims[2] = {512, 512}, pitch[1] = {512 * 2};
    cuuint32_t box[2] = {64, 128}, unit[2] = {1, 1};
    auto once = [&] {
      return encode(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, ptr, dims, pitch, box, unit, CU_TENSOR_MAP_INTERLEAVE_NONE,
                    CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    };
    if (once() == CUDA_SUCCESS) out[2] = std::to_string(median(once));
  }
  return out;
}

/// The child process of driver_init_ms: starts CUDA as an engine would, then kiln; prints
/// "<driver ms> <create ms>" (or "not-run not-run"). Returns the exit status.
int driverFirstChild() {
  auto t0 = Clock::now();
  void* lib = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  auto init = lib ? reinterpret_cast<decltype(&cuInit)>(::dlsym(lib, "cuInit")) : nullptr;
  auto get = lib ? reinterpret_cast<decltype(&cuDeviceGet)>(::dlsym(lib, "cuDeviceGet")) : nullptr;
  auto retain = lib ? reinterpret_cast<decltype(&cuDevicePrimaryCtxRetain)>(::dlsym(lib, "cuDevicePrimaryCtxRetain")) : nullptr;
  auto set = lib ? reinterpret_cast<decltype(&cuCtxSetCurrent)>(::dlsym(lib, "cuCtxSetCurrent")) : nullptr;
  CUdevice dev = 0;
  CUcontext ctx = nullptr;
  if (!init || !get || !retain || !set || init(0) != CUDA_SUCCESS || get(&dev, 0) != CUDA_SUCCESS ||
      retain(&ctx, dev) != CUDA_SUCCESS || set(ctx) != CUDA_SUCCESS) {
    std::printf("not-run not-run\n");
    return 0;
  }
  const double driverMs = usSince(t0) / 1000;
  t0 = Clock::now();
  kiln::Runtime rt = kiln::Runtime::create(kiln::Backend::cuda, kiln::RuntimeOptions{.cache_dir = "off"});
  std::printf("%.3f %.3f\n", driverMs, usSince(t0) / 1000);
  return 0;
}

/// driver_init_ms and create_after_driver_ms, from a child process (this program again).
/// popen runs the command through sh, for which /proc/self/exe is sh: the path is read first.
std::pair<std::string, std::string> driverFirst() {
  std::pair<std::string, std::string> out = {"not-run", "not-run"};
  char self[4096] = {0};
  const ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0 || std::strchr(self, '\'')) return out;
  const std::string command = std::string("'") + self + "' --driver-first-child 1";
  FILE* child = ::popen(command.c_str(), "r");
  if (!child) return out;
  char a[64] = {0}, b[64] = {0};
  if (std::fscanf(child, "%63s %63s", a, b) == 2) out = {a, b};
  ::pclose(child);
  return out;
}

/// The median of `calls` timings of f(), after `calls / 10` untimed ones, in µs. Launches
/// pass `drain` (the stream synchronised, untimed) for every kDrainEvery calls: launches
/// faster than the GPU runs their kernels would otherwise fill the driver's queue, and a
/// launch into a full queue waits for the GPU — its time would be the kernel's, not the host's.
constexpr int kDrainEvery = 64;
template <class F, class Drain = void (*)()>
double medianUs(int calls, F&& f, Drain drain = [] {}) {
  for (int i = 0; i < calls / 10; ++i) f();
  drain();
  std::vector<double> t(static_cast<size_t>(calls));
  for (size_t i = 0; i < t.size(); ++i) {
    if (i % kDrainEvery == kDrainEvery - 1) drain();
    auto t0 = Clock::now();
    f();
    t[i] = usSince(t0);
  }
  drain();
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
    else if (!std::strcmp(argv[i], "--driver-first-child")) return driverFirstChild();
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
  auto drain = [&] { rt.synchronize(); };
  const double launchUs = medianUs(calls, [&] { ck.launch(d.views, stream); }, drain);
  rt.synchronize();
  const bool ok = kiln::catalogue::verify_output(rt, d, p).ok;
  std::string cublasUs = "not-run", rawUs = "not-run", gemmUs = "not-run";
  std::array<std::string, 3> driverUs = {"not-run", "not-run", "not-run"};
  std::pair<std::string, std::string> driverFirstMs = {"not-run", "not-run"};
  bool gemmOk = true;
  if (rt.backend() == kiln::Backend::cuda) {
    driverFirstMs = driverFirst();
    // A GEMM's launch: on sm_90a its twin (tensor maps encoded per launch), else the
    // portable kernel. Said on stderr, with the path it took.
    const kiln::catalogue::Entry& gemm = kiln::catalogue::find("gemm");
    kiln::catalogue::Problem gp = gemm.problem({512, 512, 512}, kiln::DType::bf16, 7);
    kiln::CompiledKernel gk = rt.compile(kiln::catalogue::kernel_for(gemm, kiln::DType::bf16, {512, 512, 512}));
    kiln::catalogue::DeviceProblem gd = kiln::catalogue::upload(rt, gp);
    gemmUs = std::to_string(medianUs(calls, [&] { gk.launch(gd.views, stream); }, drain));
    rt.synchronize();
    gemmOk = kiln::catalogue::verify_output(rt, gd, gp).ok;
    std::fprintf(stderr, "gemm 512^3 bf16: %s, %s\n", gk.launch_path(gd.views).c_str(), gemmOk ? "verified" : "WRONG");
    driverUs = driverCallUs(gd.views[0].data, [&](auto&& f) { return medianUs(calls, f); });
    kiln::DeviceTensor a = rt.allocate(kiln::DType::bf16, {8, 8}), bm = rt.allocate(kiln::DType::bf16, {8, 8}),
                       c = rt.allocate(kiln::DType::bf16, {8, 8});
    auto call = [&] {
      kiln::reference::gpu_gemm_async(rt, a.view(), bm.view(), nullptr, kiln::reference::Epilogue::none, c.view(), nullptr,
                                      stream);
    };
    call(); // its handle and workspace, made once
    cublasUs = std::to_string(medianUs(calls, call, drain));
    rt.synchronize();
    rawUs = rawLaunchUs([&](auto&& f, auto&& d) { return medianUs(calls, f, d); });
  }

  const char* header =
      "backend,first_create_ms,create_ms,memory_hit_us,retrace_hit_us,launch_us,cublaslt_us,raw_launch_us,calls,memory_hits,"
      "reference_ok,gemm_launch_us,ctx_set_us,pointer_query_us,tensor_map_us,driver_init_ms,create_after_driver_ms\n";
  char row[512];
  std::snprintf(row, sizeof row, "%s,%.3f,%.3f,%.2f,%.2f,%.2f,%s,%s,%d,%s,%s,%s,%s,%s,%s,%s,%s\n", kiln::to_string(rt.backend()),
                firstCreateMs, createMs, hitUs, retraceUs, launchUs, cublasUs.c_str(), rawUs.c_str(), calls,
                allHits ? "true" : "false", ok && gemmOk ? "true" : "false", gemmUs.c_str(), driverUs[0].c_str(),
                driverUs[1].c_str(), driverUs[2].c_str(), driverFirstMs.first.c_str(), driverFirstMs.second.c_str());
  std::printf("%s%s", header, row);
  appendCsvRow(csv, header, row);
  return ok && gemmOk && allHits ? 0 : 1;
} catch (const kiln::Error& e) {
  std::fprintf(stderr, "kiln-bench-host: %s\n", e.what());
  return 2;
}
