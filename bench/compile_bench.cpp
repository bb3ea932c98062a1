// kiln-bench-compile: what a fresh process pays to get a catalogue kernel (bf16; default
// gemm_bias_relu) ready to run, with the disk cache empty or warm. One process = one CSV row:
//   import (Runtime::create), trace, the compile call (wall) and its phases, the cache's
//   outcome and costs, then in the same process a memory hit (the same kernel again) and
//   a second cold compile of another kernel (gemm_bias_gelu: the libraries are loaded by now).
// Run it twice on one empty directory: the first row is cold, the second a disk hit.
//   kiln-bench-compile --dir DIR [--csv FILE] [--backend cuda|cpu] [--driver-cache off|on]
//                      [--compile-threads N]   (RuntimeOptions::compile_threads; 0: one per core)
//                      [--kernel NAME --shape S] (a catalogue kernel, and the shape it is run and
//                                                 verified on; default gemm_bias_relu 257x129x65)
// The CUDA driver keeps JIT-compiled PTX in a disk cache of its own (~/.nv/ComputeCache):
// a module kiln hands to the driver's JIT (one with an sm_90a twin) compiles again in ~1 ms
// in any later process on that machine. So by default this process turns that cache off
// (CUDA_CACHE_DISABLE=1, before the driver loads): cold means a first compile on a fresh
// machine, and a disk hit what a kiln cache shipped to another machine costs there.
#include <kiln/kiln.hpp>

#include "csv_append.hpp"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

namespace {
using Clock = std::chrono::steady_clock;
double msSince(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }
} // namespace

int main(int argc, char** argv) try {
  std::string dir, csv, backend = "auto", driverCache = "off", kernelName = "gemm_bias_relu", shapeText;
  int threads = 0;
  bool threadsOk = true;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--dir")) dir = argv[i + 1];
    else if (!std::strcmp(argv[i], "--csv")) csv = argv[i + 1];
    else if (!std::strcmp(argv[i], "--backend")) backend = argv[i + 1];
    else if (!std::strcmp(argv[i], "--driver-cache")) driverCache = argv[i + 1];
    else if (!std::strcmp(argv[i], "--kernel")) kernelName = argv[i + 1];
    else if (!std::strcmp(argv[i], "--shape")) shapeText = argv[i + 1];
    else if (!std::strcmp(argv[i], "--compile-threads")) {
      char* end = nullptr;
      const long n = std::strtol(argv[i + 1], &end, 10);
      threadsOk = *argv[i + 1] && !*end && n >= 0 && n <= 1024;
      threads = int(n);
    }
  }
  if (dir.empty() || (driverCache != "off" && driverCache != "on") || !threadsOk) {
    std::fprintf(stderr, "usage: kiln-bench-compile --dir DIR [--csv FILE] [--backend cuda|cpu] [--driver-cache off|on] "
                         "[--compile-threads N] [--kernel NAME --shape S]\n");
    return 2;
  }
  const kiln::catalogue::Entry& entry = kiln::catalogue::find(kernelName);
  if (shapeText.empty() && kernelName != "gemm_bias_relu") {
    std::fprintf(stderr, "kiln-bench-compile: --kernel %s needs --shape (%s)\n", kernelName.c_str(), entry.shape_help.c_str());
    return 2;
  }
  const std::vector<int64_t> shape = shapeText.empty() ? std::vector<int64_t>{257, 129, 65}
                                                       : kiln::catalogue::parse_shape(shapeText, entry);
  // Read when the driver loads, which is in Runtime::create.
  if (driverCache == "off") setenv("CUDA_CACHE_DISABLE", "1", 1);
  auto t0 = Clock::now();
  kiln::Runtime rt =
      kiln::Runtime::create(kiln::parse_backend(backend), {.compile_threads = threads, .cache_dir = dir});
  const double importMs = msSince(t0);
  const std::string target = rt.fingerprint().target; // which kernel serves the shape, not timed
  t0 = Clock::now();
  kiln::Kernel k = kiln::catalogue::kernel_for(entry, kiln::DType::bf16, shape, target);
  const double traceMs = msSince(t0);
  t0 = Clock::now();
  kiln::CompiledKernel ck = rt.compile(k);
  const double compileMs = msSince(t0);
  const kiln::CacheInfo c = ck.cache();
  const kiln::CompileTimes& t = ck.times();
  // A correct kernel, not only a fast answer: run it once and verify.
  kiln::catalogue::Problem p = entry.problem(shape, kiln::DType::bf16, 3);
  kiln::catalogue::DeviceProblem d = kiln::catalogue::upload(rt, p);
  ck.launch(d.views);
  const bool ok = kiln::catalogue::verify_output(rt, d, p).ok;

  t0 = Clock::now();
  kiln::CompiledKernel again = rt.compile(kiln::catalogue::kernel_for(entry, kiln::DType::bf16, shape, target));
  const double memoryMs = msSince(t0); // includes tracing the kernel again
  t0 = Clock::now();
  kiln::CompiledKernel other = rt.compile(kiln::catalogue::gemm_bias_gelu(kiln::DType::bf16));
  const double secondMs = msSince(t0);

  const char* header =
      "outcome,import_ms,trace_ms,compile_call_ms,tile_passes_ms,lowering_ms,codegen_ms,assemble_ms,load_ms,"
      "cache_lookup_ms,cache_load_ms,cache_write_ms,memory_hit_ms,memory_outcome,second_kernel_ms,second_outcome,"
      "reference_ok,device,driver_jit_cache,compile_threads,kernel\n";
  char row[1024];
  const bool hit = c.outcome == kiln::CacheOutcome::disk;
  std::snprintf(row, sizeof row, "%s,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%s,%.3f,%s,%s,\"%s\",%s,%d,%s\n",
                kiln::to_string(c.outcome), importMs, traceMs, compileMs, hit ? 0 : t.tile_passes_ms,
                hit ? 0 : t.lowering_ms, hit ? 0 : t.codegen_ms, hit ? 0 : t.assemble_ms, hit ? 0 : t.load_ms,
                c.lookup_ms, c.load_ms, c.write_ms, memoryMs, kiln::to_string(again.cache().outcome), secondMs,
                kiln::to_string(other.cache().outcome), ok ? "true" : "false",
                rt.describe().substr(0, rt.describe().find(" (")).c_str(), driverCache.c_str(), threads,
                kernelName.c_str());
  std::printf("%s%s", header, row);
  appendCsvRow(csv, header, row);
  return ok ? 0 : 1;
} catch (const kiln::Error& e) {
  std::fprintf(stderr, "kiln-bench-compile: %s\n", e.what());
  return 2;
}
