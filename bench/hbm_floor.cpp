// kiln-bench-hbm: the floor under a decode GEMM. A GEMM of few rows reads its weight (K x N)
// once and does little else, so no kernel can beat the time the GPU takes to read K x N x 2
// bytes: this tool times exactly that read (a hand-written kernel, 16-byte loads, eight in
// flight per thread; the fastest of several grid sizes) the way `kiln bench` times kernels
// (median of CUDA-event timings of single launches after warm-up, the L2 emptied before each
// by profile::time's 512 MiB read), and cuBLASLt's GEMM on the same shape in the same run. The last column, cuBLASLt
// over the floor, is the most any kernel reading the weight once can gain over cuBLASLt.
//
//   kiln-bench-hbm [--csv PATH] [MxNxK ...]   (default: the decode shapes of docs/cuda.md)
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "kiln/kiln.hpp"

using namespace kiln;

namespace {

constexpr const char* kReadSource = R"(
extern "C" __global__ void read_weight(const uint4* __restrict__ src, long long vectors, unsigned* sink) {
  unsigned acc = 0;
  const long long stride = (long long)gridDim.x * blockDim.x;
  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  for (; i + 7 * stride < vectors; i += 8 * stride) {
    uint4 v[8];
#pragma unroll
    for (int j = 0; j < 8; ++j) v[j] = __ldg(src + i + j * stride);
#pragma unroll
    for (int j = 0; j < 8; ++j) acc ^= v[j].x ^ v[j].y ^ v[j].z ^ v[j].w;
  }
  for (; i < vectors; i += stride) {
    const uint4 a = __ldg(src + i);
    acc ^= a.x ^ a.y ^ a.z ^ a.w;
  }
  // Keeps every load live without a store per thread: thousands of CTAs storing to the same
  // few words would serialise in L2 and time the stores, not the read.
  if (acc == 0x9e3779b9u) sink[threadIdx.x] = acc;
}
)";

double medianMs(const Runtime& rt, const std::function<void()>& run) {
  return profile::summarize(profile::time(rt, run, {.reps = 30, .warmup = 5, .flush_cache = true}))->median;
}

} // namespace

int main(int argc, char** argv) {
  std::string csvPath = "hbm-floor.csv";
  std::vector<std::vector<int64_t>> shapes;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--csv") == 0 && i + 1 < argc) {
      csvPath = argv[++i];
      continue;
    }
    long long m = 0, n = 0, k = 0;
    if (std::sscanf(argv[i], "%lldx%lldx%lld", &m, &n, &k) != 3 || m < 1 || n < 1 || k < 1 || n % 8 != 0) {
      std::fprintf(stderr, "kiln-bench-hbm: '%s' is not a shape MxNxK (N a multiple of 8)\n", argv[i]);
      return 2;
    }
    shapes.push_back({m, n, k});
  }
  if (shapes.empty())
    shapes = {{1, 4096, 4096},  {16, 4096, 4096},  {4, 2048, 4096},  {8, 4096, 14336},
              {1, 8192, 8192},  {16, 28672, 4096}, {64, 8192, 8192}, {64, 4096, 14336}};
  try {
    Runtime rt = Runtime::create(Backend::cuda);
    std::printf("%s\n", rt.describe().c_str());
    HandwrittenKernel read = compile_cuda(rt, {.name = "read_weight.cu", .code = kReadSource, .entry = "read_weight"});
    DeviceTensor sink = rt.allocate(DType::f32, {256});
    const int64_t sms = rt.fingerprint().sm_count;
    std::ofstream csv(csvPath);
    csv << "shape,dtype,weight_mb,floor_ms,floor_tbps,cublaslt_ms,cublaslt_tbps,cublaslt_over_floor\n";
    std::printf("%-16s %9s %10s %9s %12s %9s %8s\n", "shape", "weight_MB", "floor_us", "TB/s", "cuBLASLt_us", "TB/s",
                "ratio");
    for (const auto& s : shapes) {
      const int64_t M = s[0], N = s[1], K = s[2];
      const std::string shape = std::to_string(M) + "x" + std::to_string(N) + "x" + std::to_string(K);
      HostTensor a(DType::bf16, {M, K}), b(DType::bf16, {K, N});
      a.fill_random(11);
      b.fill_random(12);
      DeviceTensor da = rt.upload(a), db = rt.upload(b), dc = rt.allocate(DType::bf16, {M, N});
      const double bytes = double(K) * double(N) * 2;
      const int64_t vectors = K * N * 2 / 16;
      // The floor is the fastest grid of a few: a fixed number of CTAs per SM (each thread
      // then loops) and one CTA per 8 vectors a thread (each thread loads once).
      double floorMs = 1e30;
      for (int64_t blocks : {sms * 4, sms * 8, sms * 16, (vectors + 2047) / 2048}) {
        const unsigned grid = unsigned(std::max<int64_t>(1, blocks));
        floorMs = std::min(floorMs, medianMs(rt, [&] {
                             read.launch({grid, 1, 1}, {256, 1, 1}, 0,
                                         {KernelArg(db), KernelArg(int64_t(vectors)), KernelArg(sink)});
                           }));
      }
      const TensorView va = da.view(), vb = db.view(), vc = dc.view();
      const double cublasMs = medianMs(rt, [&] {
        reference::gpu_gemm_async(rt, va, vb, nullptr, reference::Epilogue::none, vc, nullptr, nullptr);
      });
      const double floorTbps = bytes / floorMs / 1e9, cublasTbps = bytes / cublasMs / 1e9;
      std::printf("%-16s %9.1f %10.2f %9.2f %12.2f %9.2f %8.2f\n", shape.c_str(), bytes / 1e6, floorMs * 1e3, floorTbps,
                  cublasMs * 1e3, cublasTbps, cublasMs / floorMs);
      csv << shape << ",bf16," << bytes / 1e6 << "," << floorMs << "," << floorTbps << "," << cublasMs << ","
          << cublasTbps << "," << cublasMs / floorMs << "\n";
    }
  } catch (const Error& e) {
    std::fprintf(stderr, "kiln-bench-hbm: %s\n", e.what());
    return 2;
  }
  return 0;
}
