// kiln-bench-gemm: warm GEMM latency of kiln's CUDA kernels beside cuBLASLt, same run.
// Median of CUDA-event timings of single launches, after warm-up, L2 emptied before each
// (profile::time's 512 MiB read), inputs uniform random. Prints a table; writes CSV to argv[1].
// (`kiln bench` is the full lifecycle profiler.)
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <functional>
#include <vector>

#include "kiln/kiln.hpp"

using namespace kiln;

namespace {

double medianMs(const Runtime& rt, const std::function<void()>& run) {
  return profile::summarize(profile::time(rt, run, {.reps = 30, .warmup = 5, .flush_cache = true}))->median;
}

} // namespace

int main(int argc, char** argv) {
  const char* csvPath = argc > 1 ? argv[1] : "bench.csv";
  Runtime rt = Runtime::create(Backend::cuda);
  std::printf("%s\n", rt.describe().c_str());
  std::ofstream csv(csvPath);
  csv << "shape,dtype,route,config,median_ms,tflops,ratio_to_cublaslt\n";
  struct Config { const char* name; catalogue::GemmTiles tiles; int warps; };
  const Config configs[] = {{"64x64x32/4w", {64, 64, 32, 3}, 4},
                            {"128x64x32/4w", {128, 64, 32, 3}, 4},
                            {"128x128x32/8w", {128, 128, 32, 3}, 8},
                            {"128x128x64/8w", {128, 128, 64, 3}, 8}};
  const std::vector<std::vector<int64_t>> shapes = {
      {4096, 4096, 4096}, {4097, 4096, 4096}, {1000, 1000, 1000}, {16, 4096, 4096}, {128, 12288, 4096}};
  std::printf("%-16s %-16s %10s %9s %8s\n", "shape", "route", "median_ms", "TFLOP/s", "vs_cublasLt");
  for (const auto& s : shapes) {
    int64_t M = s[0], N = s[1], K = s[2];
    std::string shape = std::to_string(M) + "x" + std::to_string(N) + "x" + std::to_string(K);
    double flops = 2.0 * M * N * K;
    catalogue::Problem p = catalogue::find("gemm_bias_relu").problem(s, DType::bf16, 7);
    catalogue::DeviceProblem d = catalogue::upload(rt, p);
    const std::vector<TensorView>& v = d.views;
    double ref = medianMs(rt, [&] {
      reference::gpu_gemm_async(rt, v[0], v[1], &v[2], reference::Epilogue::bias_relu, v[3], nullptr, nullptr);
    });
    std::printf("%-16s %-16s %10.4f %9.1f %8s\n", shape.c_str(), "cublasLt", ref, flops / ref / 1e9, "1.00");
    csv << shape << ",bf16,cublaslt,bias_relu_epilogue," << ref << "," << flops / ref / 1e9 << ",1\n";
    for (const Config& c : configs) {
      Runtime r = Runtime::create(Backend::cuda, {.num_warps = c.warps});
      CompiledKernel ck = r.compile(catalogue::gemm_bias_relu(DType::bf16, c.tiles));
      // Correctness of this exact config on this shape, on a freshly poisoned output.
      p.args[p.output].poison();
      catalogue::DeviceProblem dk = catalogue::upload(rt, p);
      ck.launch(dk.views);
      auto rep = catalogue::verify_output(rt, dk, p);
      double ms = medianMs(r, [&] { ck.launch(dk.views, nullptr); });
      std::printf("%-16s %-16s %10.4f %9.1f %8.3f %s %s\n", shape.c_str(), c.name, ms, flops / ms / 1e9, ref / ms,
                  rep.ok ? "ok" : "WRONG", ck.report().str().c_str());
      csv << shape << ",bf16,kiln," << c.name << "," << ms << "," << flops / ms / 1e9 << "," << ref / ms << "\n";
    }
  }
  return 0;
}
