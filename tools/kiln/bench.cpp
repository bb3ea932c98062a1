// kiln bench: the same work through each route on this machine, one lifecycle row per
// route and shape, under one verification rule (issue 4, first part: the kiln route on
// either backend, cuBLASLt as the framework route on CUDA, Eigen on the CPU).
#include "bench.hpp"

#include <Eigen/Dense>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <optional>

#include "kiln/kiln.hpp"

namespace {

using Clock = std::chrono::steady_clock;
double msSince(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

bool isGemm(const std::string& k) { return k.rfind("gemm", 0) == 0; }

kiln::reference::Epilogue epilogueOf(const std::string& k) {
  if (k == "gemm_bias_relu") return kiln::reference::Epilogue::bias_relu;
  if (k == "gemm_bias_gelu") return kiln::reference::Epilogue::bias_gelu;
  return kiln::reference::Epilogue::none;
}

void write(const std::string& path, const std::string& text) {
  if (path.empty()) return;
  std::ofstream out(path);
  out << text;
  if (!out) throw kiln::Error(kiln::ErrorKind::Runtime, "cannot write '" + path + "'");
  std::printf("wrote %s\n", path.c_str());
}

// Eigen's f32 GEMM (+ epilogue) on the same input values, one thread: the CPU's framework route.
kiln::profile::Row eigenRow(const kiln::Runtime& rt, const kiln::catalogue::Problem& p, const std::string& kernel,
                            kiln::DType dt, const kiln::profile::TimingOptions& o) {
  using Mat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  const auto& A = p.args[0];
  const auto& B = p.args[1];
  int64_t M = A.dims()[0], K = A.dims()[1], N = B.dims()[1];
  Mat a(M, K), b(K, N), c(M, N);
  for (int64_t i = 0; i < M * K; ++i) a.data()[i] = A.get(i);
  for (int64_t i = 0; i < K * N; ++i) b.data()[i] = B.get(i);
  Eigen::RowVectorXf bias = Eigen::RowVectorXf::Zero(N);
  auto epi = epilogueOf(kernel);
  if (epi != kiln::reference::Epilogue::none)
    for (int64_t j = 0; j < N; ++j) bias[j] = p.args[2].get(j);
  auto run = [&] {
    c.noalias() = a * b;
    if (epi == kiln::reference::Epilogue::bias_relu) c = (c.rowwise() + bias).cwiseMax(0.0f);
    if (epi == kiln::reference::Epilogue::bias_gelu)
      c = (c.rowwise() + bias).unaryExpr([](float x) { return float(kiln::reference::gelu(x)); });
  };
  // The same clock and cache flushing as the kiln-cpu route (rt is the CPU runtime here).
  std::vector<double> ms = kiln::profile::time(rt, run, o);
  kiln::HostTensor out(dt, {M, N});
  for (int64_t i = 0; i < M * N; ++i) out.set(i, c.data()[i]);
  auto rep = kiln::verify::compare(out.view(), p.reference, kiln::verify::Tolerance::for_dtype(dt));
  kiln::profile::Row r;
  r.route = "eigen";
  r.reference_ok = rep.ok;
  r.rel_err = rep.rel_l2;
  r.warm = kiln::profile::summarize(ms);
  r.tflops = p.flops / (r.warm->median * 1e9);
  return r;
}

} // namespace

int cmdBench(const BenchOptions& o) {
  const auto& entry = kiln::catalogue::find(o.kernel);
  kiln::DType dt = *kiln::parse_dtype(o.dtype);
  auto t0 = Clock::now();
  kiln::Runtime rt = kiln::Runtime::create(kiln::parse_backend(o.backend));
  double importMs = msSince(t0); // driver load, context, first MLIR use are in compile
  std::string device = rt.describe().substr(0, rt.describe().find(';'));
  if (device.rfind("cuda: ", 0) == 0) device = device.substr(6); // "NVIDIA H200 (sm_90a, ...)"
  kiln::profile::TimingOptions timing{o.reps, o.warmup, true};
  std::vector<kiln::profile::Row> rows;
  std::optional<kiln::CompiledKernel> ck;
  for (const std::string& shapeText : o.shapes) {
    auto shape = kiln::catalogue::parse_shape(shapeText, entry);
    kiln::catalogue::Problem p = entry.problem(shape, dt, o.seed);
    auto stamp = [&](kiln::profile::Row& r) {
      r.shape = shapeText;
      r.dtype = o.dtype;
      r.device = device;
      r.kernel = o.kernel;
    };
    // kiln: compiled once, on the first shape (cold); later shapes reuse the kernel,
    // since dims and strides are launch values.
    std::optional<double> compileMs;
    if (!ck) {
      auto c0 = Clock::now();
      ck.emplace(rt.compile(entry.make(dt)));
      compileMs = msSince(c0);
    }
    kiln::catalogue::DeviceProblem d = kiln::catalogue::upload(rt, p);
    const std::vector<kiln::TensorView>& v = d.views;
    auto f0 = Clock::now();
    ck->launch(v);
    double firstMs = msSince(f0);
    auto rep = kiln::catalogue::verify_output(rt, d, p);
    kiln::profile::Row k;
    stamp(k);
    k.route = rt.backend() == kiln::Backend::cuda ? "kiln" : "kiln-cpu";
    k.reference_ok = rep.ok;
    k.rel_err = rep.rel_l2;
    if (compileMs) k.import_ms = importMs; // both are paid once, by the first shape
    k.compile_ms = compileMs;
    k.cache = compileMs ? "miss" : "memory"; // no disk cache yet (issue 5)
    k.first_run_ms = firstMs;
    k.warm = kiln::profile::time_kernel(rt, *ck, v, timing);
    k.tflops = p.flops / (k.warm->median * 1e9);
    rows.push_back(k);
    // The framework route for the same work.
    if (isGemm(o.kernel)) {
      if (rt.backend() == kiln::Backend::cuda) {
        kiln::HostTensor poisoned = p.args[p.output]; // holds kiln's result by now
        poisoned.poison();
        kiln::DeviceTensor fo = rt.upload(poisoned);
        std::vector<kiln::TensorView> fv = v;
        fv[p.output] = fo.view();
        const kiln::TensorView* bias = entry.shape_rank == 3 && p.args.size() == 4 ? &fv[2] : nullptr;
        auto run = [&] { kiln::reference::gpu_gemm(rt, fv[0], fv[1], bias, epilogueOf(o.kernel), fv[p.output]); };
        auto g0 = Clock::now();
        run();
        double fFirst = msSince(g0);
        kiln::HostTensor fout = p.args[p.output];
        rt.download(fo, fout);
        auto frep = kiln::verify::compare(fout.view(), p.reference, kiln::verify::Tolerance::for_dtype(dt));
        std::vector<double> ms = kiln::profile::time(rt, run, timing);
        kiln::profile::Row f;
        stamp(f);
        f.route = "framework";
        f.reference_ok = frep.ok;
        f.rel_err = frep.rel_l2;
        f.first_run_ms = fFirst;
        f.warm = kiln::profile::summarize(ms);
        f.tflops = p.flops / (f.warm->median * 1e9);
        rows.push_back(f);
      } else {
        kiln::profile::Row e = eigenRow(rt, p, o.kernel, dt, timing);
        stamp(e);
        rows.push_back(e);
      }
    }
  }
  std::printf("%-10s %-16s %-6s %-12s %10s %10s %10s %9s\n", "route", "shape", "dtype", "reference", "compile_ms",
              "first_ms", "warm_ms", "GFLOP/s");
  auto cellv = [](const std::optional<double>& v) {
    char b[32];
    if (!v) return std::string("not-run");
    std::snprintf(b, sizeof b, "%.3f", *v);
    return std::string(b);
  };
  bool allOk = true;
  for (const auto& r : rows) {
    allOk = allOk && r.reference_ok.value_or(false);
    std::printf("%-10s %-16s %-6s %-12s %10s %10s %10s %9.1f\n", r.route.c_str(), r.shape.c_str(), r.dtype.c_str(),
                r.reference_ok ? (*r.reference_ok ? "ok" : "WRONG") : "not-run", cellv(r.compile_ms).c_str(),
                cellv(r.first_run_ms).c_str(), cellv(r.warm ? std::optional<double>(r.warm->median) : std::nullopt).c_str(),
                r.tflops.value_or(0) * 1e3);
  }
  write(o.csv, kiln::profile::to_csv(rows));
  write(o.json, kiln::profile::to_json(rows));
  write(o.html, kiln::profile::to_html(rows, o.kernel + " on " + device));
  return allOk ? 0 : 1;
}
