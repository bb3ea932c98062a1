// The decision for a kernel of your own: a fused kernel written in the DSL inside the engine
// (residual add + RMSNorm, not in kiln's catalogue) against the path the engine runs today
// for the same work — here its two separate kernels, add then RMSNorm — given to kiln as a
// callable. kiln verifies both against one reference, times both the same way, and says
// which to ship at the engine's threshold, with the calls it takes to repay the compile.
//
//   example-decide [--accept 1.10] [--csv FILE]
// On a GPU: 4096 x 4096 bf16; on the CPU: 64 x 1024 f32.
#include <kiln/kiln.hpp>
#include <kiln/testing.hpp>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

using namespace kiln;
using namespace kiln::dsl;

constexpr double kEps = 1e-6;
constexpr int64_t kRows = 4, kCols = 256; // one CTA (program) per 4 rows, 256 columns a step

// Y = (X + R) / sqrt(mean((X + R)^2) + eps) * W, per row: the sum never leaves registers.
Kernel addRmsnorm(DType dt) {
  return kernel("add_rmsnorm", [=](Builder& k) {
    auto [M, N] = k.dims("M", "N");
    auto X = k.input("X", {M, N}, dt), R = k.input("R", {M, N}, dt), W = k.input("W", {N}, dt);
    auto Y = k.output("Y", {M, N}, dt);
    k.grid({cdiv(M, kRows)}, [&](Index i) {
      Index steps = cdiv(N, kCols);
      auto sum = [&](Index j) {
        return cast(k.load(X.tile({i, j}, {kRows, kCols})), f32) + cast(k.load(R.tile({i, j}, {kRows, kCols})), f32);
      };
      Tile ss = k.loop(steps, 1, k.zeros({kRows}), [&](Index j, const Tile& acc) {
        Tile h = sum(j);
        return acc + row_sum(h * h);
      });
      Tile inv = rsqrt(ss / k.splat(N, {kRows}) + k.full({kRows}, kEps));
      k.loop(steps, 1, std::vector<Tile>{}, [&](Index j, const std::vector<Tile>&) {
        Tile w = cast(k.load(W.tile({j}, {kCols})), f32);
        k.store(Y.tile({i, j}, {kRows, kCols}), cast(sum(j) * cols(inv) * rows(w), dt));
        return std::vector<Tile>{};
      });
    });
  });
}

std::vector<double> expected(const HostTensor& x, const HostTensor& r, const HostTensor& w, int64_t M, int64_t N) {
  std::vector<double> y(size_t(M * N));
  for (int64_t i = 0; i < M; ++i) {
    double ss = 0;
    for (int64_t j = 0; j < N; ++j) {
      const double h = double(x.get(i * N + j)) + r.get(i * N + j);
      ss += h * h;
    }
    const double inv = 1.0 / std::sqrt(ss / double(N) + kEps);
    for (int64_t j = 0; j < N; ++j) y[size_t(i * N + j)] = (double(x.get(i * N + j)) + r.get(i * N + j)) * inv * w.get(j);
  }
  return y;
}

} // namespace

int main(int argc, char** argv) try {
  double accept = 1.10;
  std::string csv;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--accept") && i + 1 < argc) accept = std::atof(argv[++i]);
    else if (!std::strcmp(argv[i], "--csv") && i + 1 < argc) csv = argv[++i];
    else throw Error(ErrorKind::InvalidArgument, std::string("unknown argument '") + argv[i] + "'");
  }
  Runtime rt = Runtime::create(); // CUDA when there is a GPU, else the CPU
  const bool gpu = rt.backend() == Backend::cuda;
  const int64_t M = gpu ? 4096 : 64, N = gpu ? 4096 : 1024;
  const DType dt = gpu ? DType::bf16 : DType::f32;
  std::printf("add + RMSNorm, %lld x %lld %s, on %s\n", (long long)M, (long long)N, to_string(dt), rt.describe().c_str());

  // The engine's data.
  std::vector<HostTensor> args = {HostTensor(dt, {M, N}), HostTensor(dt, {M, N}), HostTensor(dt, {N}),
                                  HostTensor(dt, {M, N})};
  args[0].fill_random(1), args[1].fill_random(2), args[2].fill_random(3);
  const std::vector<double> ref = expected(args[0], args[1], args[2], M, N);

  // kiln: the fused kernel, compiled, verified and timed (testing::check_kernel).
  testing::CheckOptions opts;
  opts.timing = {20, 3, true};
  testing::Check fused = testing::check_kernel(rt, addRmsnorm(dt), args, 3, ref, opts);
  std::printf("%s\n", fused.summary().c_str());

  // The engine's path today: its add kernel, then its RMSNorm kernel (already built: their
  // compile is not charged), on its own device buffers.
  CompiledKernel add = rt.compile(catalogue::add(dt)), norm = rt.compile(catalogue::rmsnorm(dt, kEps));
  DeviceTensor x = rt.upload(args[0]), r = rt.upload(args[1]), w = rt.upload(args[2]);
  DeviceTensor h = rt.allocate(dt, {M, N}), y = rt.allocate(dt, {M, N});
  testing::Baseline ours{"two-kernels",
                         [&] {
                           add.launch({x.view(), r.view(), h.view()});
                           norm.launch({h.view(), w.view(), y.view()});
                         },
                         [&] {
                           HostTensor out(dt, {M, N});
                           rt.download(y, out);
                           return out.to_f64();
                         }};
  std::vector<profile::Row> rows = testing::decide(rt, fused, ours, ref, accept, opts);
  for (const profile::Row& row : rows)
    std::printf("%-12s reference_ok=%s warm=%s ms\n", row.route.c_str(), *row.reference_ok ? "true" : "false",
                row.warm ? std::to_string(row.warm->median).c_str() : "not-run");
  std::printf("verdict: %s\n", rows[0].verdict.c_str());
  if (!csv.empty()) testing::append_csv(csv, rows);
  return *rows[0].reference_ok && *rows[1].reference_ok ? 0 : 1;
} catch (const kiln::Error& e) {
  std::fprintf(stderr, "example-decide: %s\n", e.what());
  return 2;
}
