// kiln bench: the same work through each route on this machine, one lifecycle row per
// route and shape, under one verification rule (docs/lifecycle.md).
//   CUDA: kiln (the DSL kernel), framework (cuBLASLt, its epilogue fused),
//         framework-eager (cuBLASLt's plain GEMM, then a separate elementwise kernel for
//         bias/activation/residual, as an eager framework runs it), cuda (the catalogue's
//         hand-written CUDA C++ compiled with NVRTC);
//   CPU:  kiln-cpu (the DSL kernel on the CPU backend), eigen (Eigen, one thread).
// Every route gets its own Runtime, so its memory high-water mark is its own, and its own
// upload of the same inputs, with a poisoned output.
#include "bench.hpp"
#include "eigen_route.hpp"
#include "progress.hpp"
#include "tune_cmd.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <optional>

#include "kiln/kiln.hpp"

namespace {

using Clock = std::chrono::steady_clock;
double msSince(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}
constexpr double kMiB = 1024.0 * 1024.0;

bool isGemm(const std::string& k) { return k.rfind("gemm", 0) == 0; }

kiln::reference::Epilogue epilogueOf(const std::string& k) {
  if (k == "gemm_bias_relu") return kiln::reference::Epilogue::bias_relu;
  if (k == "gemm_bias_gelu") return kiln::reference::Epilogue::bias_gelu;
  if (k == "gemm_bias_residual") return kiln::reference::Epilogue::bias; // + R (argument 3)
  return kiln::reference::Epilogue::none;
}


// "[ 3/15] framework 4096x4096x4096": rewritten in place on a terminal, a line each otherwise.
// Bytes every route must at least move: each argument once.
double bytesOf(const kiln::catalogue::Problem& p) {
  double b = 0;
  for (const auto& a : p.args) b += double(a.numel()) * kiln::size_of(a.dtype());
  return b;
}

// One route's runtime and what it compiled or initialised once, for every shape.
struct Route {
  std::string name;
  std::optional<kiln::Runtime> rt;
  double import_ms = 0;          // charged to the route's first row
  bool first = true;
  std::optional<kiln::CompiledKernel> kernel;      // kiln, kiln-cpu
  std::optional<kiln::HandwrittenKernel> handwritten; // cuda
  kiln::catalogue::Handwritten hw;
  std::optional<kiln::HandwrittenKernel> eager;       // framework-eager: its elementwise kernel
  kiln::catalogue::EagerEpilogue ee;
};

kiln::catalogue::Activation activationOf(kiln::reference::Epilogue e) {
  if (e == kiln::reference::Epilogue::bias_relu) return kiln::catalogue::Activation::relu;
  if (e == kiln::reference::Epilogue::bias_gelu) return kiln::catalogue::Activation::gelu;
  return kiln::catalogue::Activation::none;
}

std::vector<float> asF32(const kiln::HostTensor& t) {
  std::vector<float> v(size_t(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) v[size_t(i)] = t.get(i);
  return v;
}

// Eigen's f32 GEMM (+ epilogue) on the same input values, one thread, compiled for this
// CPU's x86-64 level like kiln-cpu's JIT: the CPU's framework route.
kiln::profile::Row eigenRow(const kiln::Runtime& rt, const kiln::catalogue::Problem& p, const std::string& kernel,
                            kiln::DType dt, const kiln::profile::TimingOptions& o) {
  const auto& A = p.args[0];
  const auto& B = p.args[1];
  int64_t M = A.dims()[0], K = A.dims()[1], N = B.dims()[1];
  auto epi = epilogueOf(kernel);
  const bool residual = epi == kiln::reference::Epilogue::bias;
  std::vector<float> a = asF32(A), b = asF32(B), bias, res;
  if (epi != kiln::reference::Epilogue::none) bias = asF32(p.args[2]);
  if (residual) res = asF32(p.args[3]);
  const int code = epi == kiln::reference::Epilogue::bias_relu   ? 1
                   : epi == kiln::reference::Epilogue::bias_gelu ? 2
                   : residual                                    ? 3
                                                                 : 0;
  EigenGemm g(a.data(), b.data(), bias.empty() ? nullptr : bias.data(), residual ? res.data() : nullptr, M, N, K, code);
  auto run = [&] { g.run(); };
  auto f0 = Clock::now();
  run();
  double firstMs = msSince(f0);
  // The same clock and cache flushing as the kiln-cpu route (rt is a CPU runtime).
  std::vector<double> ms = kiln::profile::time(rt, run, o);
  kiln::HostTensor out(dt, {M, N});
  for (int64_t i = 0; i < M * N; ++i) out.set(i, g.output()[i]);
  auto rep = kiln::verify::compare(out.view(), p.reference, kiln::verify::Tolerance::for_dtype(dt));
  kiln::profile::Row r;
  r.reference_ok = rep.ok;
  r.rel_err = rep.rel_l2;
  r.first_run_ms = firstMs;
  r.warm = kiln::profile::summarize(ms);
  r.peak_mb = double(M * K + K * N + M * N + N + int64_t(res.size())) * sizeof(float) / kMiB; // Eigen's f32 operands
  return r;
}

std::vector<std::string> defaultRoutes(kiln::Backend b, const kiln::catalogue::Entry& e) {
  if (b == kiln::Backend::cuda) {
    std::vector<std::string> r = {"kiln"};
    if (isGemm(e.name)) {
      r.push_back("framework");
      r.push_back("framework-eager");
    } else if (e.framework) {
      r.push_back("framework");
    }
    if (e.handwritten) r.push_back("cuda");
    return r;
  }
  std::vector<std::string> r = {"kiln-cpu"};
  if (isGemm(e.name)) r.push_back("eigen");
  return r;
}

void checkRoute(const std::string& r, kiln::Backend b, const kiln::catalogue::Entry& e) {
  const bool gpu = b == kiln::Backend::cuda;
  auto no = [&](const std::string& why) {
    throw kiln::Error(kiln::ErrorKind::Unsupported, "route '" + r + "' " + why);
  };
  if (r == "kiln-tuned") return; // either backend; --tuned is checked by cmdBench
  if (r == "kiln" || r == "framework" || r == "framework-eager" || r == "cuda") {
    if (!gpu) no("runs on a GPU, and this run is on the CPU backend (routes here: kiln-cpu, eigen)");
    if (r == "framework" && !isGemm(e.name) && !e.framework)
      no("exists for the GEMM (cuBLASLt) and attention (cuDNN) kernels only, not '" + e.name + "'");
    if (r == "framework-eager" && !isGemm(e.name))
      no("(cuBLASLt, then a separate epilogue) exists for the GEMM kernels only, not '" + e.name + "'");
    if (r == "cuda" && !e.handwritten) no("needs a hand-written version of '" + e.name + "', which it has not");
  } else if (r == "kiln-cpu" || r == "eigen") {
    if (gpu) no("runs on the CPU; pass --backend=cpu for it");
    if (r == "eigen" && !isGemm(e.name)) no("exists for the GEMM kernels only, not '" + e.name + "'");
  } else {
    throw kiln::Error(kiln::ErrorKind::NotFound,
                      "unknown route '" + r + "' (expected kiln, framework, framework-eager, cuda, kiln-cpu or eigen)");
  }
}

} // namespace

void writeReport(const std::string& path, const std::string& text) {
  if (path.empty()) return;
  std::ofstream out(path);
  out << text;
  out.close(); // the last flush can fail too (a full disk): "wrote" only once it has not
  if (!out) throw kiln::Error(kiln::ErrorKind::Runtime, "cannot write '" + path + "'");
  std::printf("wrote %s\n", path.c_str());
}

std::vector<std::string> readShapesFile(const std::string& path) {
  std::istringstream in(kiln::read_file(path, "shapes file"));
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);) {
    line = line.substr(0, line.find('#'));
    size_t a = line.find_first_not_of(" \t\r"), b = line.find_last_not_of(" \t\r");
    if (a != std::string::npos) out.push_back(line.substr(a, b - a + 1));
  }
  return out;
}

void judgeAndPrint(std::vector<kiln::profile::Row>& rows, double accept, const std::string& baseline) {
  kiln::profile::judge(rows, accept, baseline);
  std::printf("verdicts (threshold %.2fx over %s; cold = import + compile + first run + tuning):\n", accept,
              baseline.c_str());
  for (const auto& r : rows)
    if (!r.verdict.empty()) std::printf("  %s\n", r.verdict.c_str());
  for (const std::string& line : kiln::profile::verdict_summary(rows, baseline)) std::printf("  %s\n", line.c_str());
}

int cmdBench(const BenchOptions& o) {
  const auto& entry = kiln::catalogue::find(o.kernel);
  kiln::DType dt = *kiln::parse_dtype(o.dtype);
  std::vector<std::string> shapes = o.shapes;
  if (!o.shapes_file.empty())
    for (auto& s : readShapesFile(o.shapes_file)) shapes.push_back(s);
  if (shapes.empty())
    throw kiln::Error(kiln::ErrorKind::InvalidArgument, "kiln bench: no shapes (give --shape or --shapes-file)");
  std::vector<std::vector<int64_t>> parsed;
  for (const auto& s : shapes) parsed.push_back(kiln::catalogue::parse_shape(s, entry)); // all errors up front
  if (entry.specialisation) // one kernel serves the run's shapes: they must agree on what it is built for
    for (size_t i = 1; i < parsed.size(); ++i)
      if (entry.specialisation(parsed[i]) != entry.specialisation(parsed[0]))
        throw kiln::Error(kiln::ErrorKind::InvalidArgument,
                          "kiln bench: '" + o.kernel + "' is built for one " + entry.specialisation(parsed[0]) +
                              ", and shape '" + shapes[i] + "' needs " + entry.specialisation(parsed[i]) +
                              " (bench each in its own run)");

  // The first runtime pays for the driver (and context): every GPU route in a fresh
  // process would, so it is part of each route's import.
  auto t0 = Clock::now();
  kiln::Runtime probe = kiln::Runtime::create(kiln::parse_backend(o.backend));
  const double processImportMs = msSince(t0);
  const kiln::Backend backend = probe.backend();
  std::string device = probe.describe().substr(0, probe.describe().find(';'));
  if (device.rfind("cuda: ", 0) == 0) device = device.substr(6); // "NVIDIA H200 (sm_90a, ...)"

  std::vector<Route> routes;
  std::vector<std::string> routeNames = o.routes.empty() ? defaultRoutes(backend, entry) : o.routes;
  if (o.tuned_db.empty() && std::find(routeNames.begin(), routeNames.end(), "kiln-tuned") != routeNames.end())
    throw kiln::Error(kiln::ErrorKind::InvalidArgument, "route 'kiln-tuned' needs --tuned DB (the tuning database)");
  if (!o.tuned_db.empty()) {
    if (!entry.make_tiled)
      throw kiln::Error(kiln::ErrorKind::Unsupported, "--tuned: '" + o.kernel + "' has no tile sizes to tune");
    if (std::find(routeNames.begin(), routeNames.end(), "kiln-tuned") == routeNames.end())
      routeNames.insert(routeNames.begin() + 1, "kiln-tuned");
  }
  for (const auto& name : routeNames) {
    checkRoute(name, backend, entry);
    Route r;
    r.name = name;
    auto c0 = Clock::now();
    r.rt.emplace(kiln::Runtime::create(backend));
    r.import_ms = processImportMs + msSince(c0);
    if (name == "framework" && entry.framework) { // cuDNN's load, handle and a first plan, on a tiny attention
      auto l0 = Clock::now();
      try {
        const kiln::DeviceTensor one = r.rt->upload(kiln::HostTensor(dt, {1, 1, 8, 64}));
        const kiln::DeviceTensor out = r.rt->allocate(dt, {1, 1, 8, 64});
        kiln::reference::gpu_attention(*r.rt, one.view(), one.view(), one.view(), false, out.view());
      } catch (const kiln::Error& e) {
        // Asked for: the reason is the answer. By default (cuDNN is not in the CUDA toolkit,
        // and has no f32 kernel): the other routes still run.
        if (!o.routes.empty() ||
            (e.kind() != kiln::ErrorKind::Unsupported && e.kind() != kiln::ErrorKind::InvalidArgument))
          throw;
        std::fprintf(stderr, "kiln bench: no framework route for %s %s here: %s\n", o.kernel.c_str(), o.dtype.c_str(),
                     e.what());
        continue;
      }
      r.import_ms += msSince(l0);
    } else if (name.rfind("framework", 0) == 0) { // cuBLASLt's load, handle and workspace, on a 1x1x1 GEMM
      auto l0 = Clock::now();
      kiln::DeviceTensor one = r.rt->upload(kiln::HostTensor(dt, {1, 1}));
      kiln::DeviceTensor out = r.rt->allocate(dt, {1, 1});
      kiln::reference::gpu_gemm(*r.rt, one.view(), one.view(), nullptr, kiln::reference::Epilogue::none, out.view());
      r.import_ms += msSince(l0);
    }
    if (name == "cuda") r.hw = entry.handwritten(dt);
    if (name == "eigen") std::printf("eigen route: Eigen built for x86-64 %s, one thread\n", EigenGemm::isa().c_str());
    if (name == "framework-eager") { // a framework ships this kernel built: its compile is import
      auto l0 = Clock::now();
      r.ee = kiln::catalogue::eager_epilogue(dt);
      r.eager.emplace(kiln::compile_cuda(*r.rt, r.ee.source));
      r.import_ms += msSince(l0);
    }
    routes.push_back(std::move(r));
  }

  kiln::profile::TimingOptions timing{o.reps, o.warmup, true};
  std::vector<kiln::profile::Row> rows;
  ProgressBar progress(o.progress);
  const int steps = int(shapes.size() * routes.size());
  int step = 0;
  for (size_t si = 0; si < shapes.size(); ++si) {
    // Every row is verified before it is timed: against Eigen in f64 on the host, or, for a
    // GEMM over 2^33 multiply-adds on a GPU (minutes on the host), against cuBLASLt there.
    if (gpuReference(entry, backend, parsed[si]))
      std::fprintf(stderr, "kiln bench: %s is verified against cuBLASLt (the f64 host reference would take minutes)\n",
                   shapes[si].c_str());
    kiln::catalogue::Problem p = referenceProblem(entry, probe, parsed[si], dt, o.seed);
    // Where the host reference checks only sampled rows (large attention), every route's
    // whole output is also compared with the framework route's (cuDNN's) below.
    const bool crossCheck = backend == kiln::Backend::cuda && entry.framework && !p.checked.empty();
    std::map<std::string, std::pair<size_t, kiln::HostTensor>> verified; // route -> (its row, its output)
    for (Route& route : routes) {
      progress.show(route.name + " " + shapes[si], ++step, steps);
      const kiln::Runtime& rt = *route.rt;
      kiln::profile::Row row;
      row.shape = shapes[si];
      row.dtype = o.dtype;
      row.device = device;
      row.kernel = o.kernel;
      row.route = route.name;
      if (route.first) row.import_ms = route.import_ms;
      if (route.name == "kiln-tuned") {
        // The price of tuning, then the tuned kernel measured like the fixed one.
        kiln::tune::Options to;
        to.reps = o.reps;
        to.warmup = o.warmup;
        to.database = o.tuned_db;
        to.shape_class = shapes[si];
        kiln::tune::Result tr = kiln::tune::tune(
            backend, {}, defaultTuneSpace(rt, dt),
            [&](const kiln::tune::Config& c) { return tiledKernel(o.kernel, dt, c); },
            {p.args, p.output, p.reference, p.flops}, to);
        row.tune_ms = tr.compile_ms + tr.timing_ms;
        row.kernel = o.kernel + " [" + tr.best.str() + "]";
        row.cache = tr.replayed ? "tuned: replayed" : "tuned: searched";
        kiln::Runtime trt = kiln::Runtime::create(backend, kiln::tune::options_for({}, tr.best));
        auto c0 = Clock::now();
        kiln::CompiledKernel tk = trt.compile(tiledKernel(o.kernel, dt, tr.best));
        row.compile_ms = msSince(c0);
        p.poison_outputs();
        trt.reset_peak_memory();
        kiln::catalogue::DeviceProblem d = kiln::catalogue::upload(trt, p);
        auto f0 = Clock::now();
        tk.launch(d.views);
        row.first_run_ms = msSince(f0);
        auto rep = kiln::catalogue::verify_output(trt, d, p);
        row.reference_ok = rep.ok;
        row.rel_err = rep.rel_l2;
        row.launch = tk.launch_path(d.views);
        if (rep.ok) row.warm = kiln::profile::time_kernel(trt, tk, d.views, timing); // a wrong result is never timed
        row.peak_mb = double(trt.memory().peak_bytes) / kMiB;
      } else if (route.name == "eigen") {
        kiln::profile::Row e = eigenRow(rt, p, o.kernel, dt, timing);
        e.shape = row.shape, e.dtype = row.dtype, e.device = row.device, e.kernel = row.kernel, e.route = row.route;
        e.import_ms = row.import_ms;
        row = e;
      } else {
        // Compile once, on the first shape (cold); dims and strides are launch values, so
        // later shapes reuse the kernel (cache=memory).
        // The phases the pipeline reports, plus what the wall clock saw around them
        // (setup: the compiler's first use in this process, checks, bookkeeping).
        if (route.first && (route.name == "kiln" || route.name == "kiln-cpu")) {
          const std::string target = rt.fingerprint().target; // the tiles may depend on it
          auto c0 = Clock::now();
          kiln::Kernel k = kiln::catalogue::kernel_for(entry, dt, parsed[si], target);
          const double traceMs = msSince(c0);
          route.kernel.emplace(rt.compile(k));
          row.compile_ms = msSince(c0);
          const kiln::CacheInfo& ci = route.kernel->cache();
          if (ci.outcome == kiln::CacheOutcome::miss || ci.outcome == kiln::CacheOutcome::off) {
            row.compile_phases = kiln::profile::phases(route.kernel->times());
            row.compile_phases.insert(row.compile_phases.begin(), {"trace", traceMs});
            if (ci.write_ms > 0) row.compile_phases.emplace_back("cache_write", ci.write_ms);
            row.compile_phases.emplace_back("setup", *row.compile_ms - traceMs - route.kernel->times().total_ms() -
                                                         ci.write_ms);
          } else { // a cache hit: what this process paid
            row.compile_phases = {{"trace", traceMs}, {"cache_lookup", ci.lookup_ms}, {"cache_load", ci.load_ms}};
          }
        } else if (route.first && route.name == "cuda") {
          auto c0 = Clock::now();
          route.handwritten.emplace(kiln::compile_cuda(rt, route.hw.source));
          row.compile_ms = msSince(c0);
          const kiln::HandwrittenTimes& t = route.handwritten->times();
          row.compile_phases = {{"nvrtc", t.nvrtc_ms}, {"load", t.load_ms}, {"setup", *row.compile_ms - t.total_ms()}};
        }
        if (route.name.rfind("framework", 0) != 0) row.cache = route.first ? "miss" : "memory";
        if (route.first && route.kernel) row.cache = kiln::to_string(route.kernel->cache().outcome);
        rt.reset_peak_memory();
        p.poison_outputs(); // the last route's result was downloaded into it
        kiln::catalogue::DeviceProblem d = kiln::catalogue::upload(rt, p);
        const std::vector<kiln::TensorView>& v = d.views;
        if (route.kernel) row.launch = route.kernel->launch_path(v); // which twin, grid, split: per shape
        std::function<void()> run;
        if (route.kernel) {
          run = [&] { route.kernel->launch(v, nullptr); };
        } else if (route.handwritten) {
          run = [&] { route.hw.launch(*route.handwritten, v, nullptr); };
        } else if (entry.framework) { // framework: the library's own kernel (cuDNN's attention)
          run = [&, framework = kiln::catalogue::framework_for(entry, parsed[si])] { framework(rt, v, nullptr); };
        } else { // framework, framework-eager
          const auto epi = epilogueOf(o.kernel);
          const kiln::TensorView* bias = epi != kiln::reference::Epilogue::none ? &v[2] : nullptr;
          const kiln::TensorView* residual = epi == kiln::reference::Epilogue::bias ? &v[3] : nullptr;
          if (route.eager) {
            run = [&, bias, residual, epi] {
              kiln::reference::gpu_gemm_async(rt, v[0], v[1], nullptr, kiln::reference::Epilogue::none, v[p.output],
                                              nullptr, nullptr);
              route.ee.launch(*route.eager, v[p.output], bias, residual, activationOf(epi), nullptr);
            };
          } else {
            run = [&, bias, residual, epi] {
              kiln::reference::gpu_gemm_async(rt, v[0], v[1], bias, epi, v[p.output], residual, nullptr);
            };
          }
        }
        auto f0 = Clock::now();
        run();
        rt.synchronize();
        row.first_run_ms = msSince(f0);
        auto rep = kiln::catalogue::verify_output(rt, d, p); // the output arrived poisoned
        row.reference_ok = rep.ok;
        row.rel_err = rep.rel_l2;
        if (rep.ok) row.warm = kiln::profile::summarize(kiln::profile::time(rt, run, timing)); // as above
        row.peak_mb = double(rt.memory().peak_bytes) / kMiB;
      }
      if (row.warm) {
        row.tflops = p.flops / (row.warm->median * 1e9);
        row.gbps = bytesOf(p) / (row.warm->median * 1e6);
      }
      route.first = false;
      rows.push_back(row);
      if (crossCheck && row.reference_ok.value_or(false)) verified[route.name] = {rows.size() - 1, p.args[p.output]};
    }
    if (auto fw = verified.find("framework"); fw != verified.end()) {
      // What no route defines (padded sequences' rows past their lengths) reads as 0 in each
      // output (they are the routes' own copies).
      for (auto& [name, at] : verified)
        for (const auto& [first, last] : p.padding)
          for (int64_t e = first; e < last; ++e) at.second.set(e, 0.0f);
      const std::vector<double> cudnn = fw->second.second.to_f64(); // once for every route
      for (auto& [name, at] : verified) {
        if (name == "framework") continue;
        const kiln::verify::Report r =
            kiln::verify::compare(at.second.view(), cudnn, kiln::verify::Tolerance::for_dtype(dt));
        std::printf("%s %s: %s %s the framework route on every element: %s\n", o.kernel.c_str(), shapes[si].c_str(),
                    name.c_str(), r.ok ? "agrees with" : "DISAGREES with", r.summary().c_str());
        if (!r.ok) { // wrong where the sample did not look: never timed, as any wrong row
          kiln::profile::Row& row = rows[at.first];
          row.reference_ok = false;
          row.warm.reset();
          row.tflops.reset();
          row.gbps.reset();
        }
      }
    }
  }

  // GB/s: every argument's bytes once over the warm median (for a decode GEMM, the weight's
  // bandwidth: it is nearly all of them).
  std::printf("%-15s %-16s %-6s %-9s %10s %10s %10s %10s %9s %8s %8s %10s\n", "route", "shape", "dtype", "reference",
              "import_ms", "compile_ms", "first_ms", "warm_ms", "TFLOP/s", "GB/s", "peak_MB", "tune_ms");
  auto cellv = [](const std::optional<double>& v, int digits = 3) {
    char b[32];
    if (!v) return std::string("not-run");
    std::snprintf(b, sizeof b, "%.*f", digits, *v);
    return std::string(b);
  };
  bool allOk = true;
  for (const auto& r : rows) {
    allOk = allOk && r.reference_ok.value_or(false);
    std::printf("%-15s %-16s %-6s %-9s %10s %10s %10s %10s %9s %8s %8s %10s\n", r.route.c_str(), r.shape.c_str(),
                r.dtype.c_str(), r.reference_ok ? (*r.reference_ok ? "ok" : "WRONG") : "not-run",
                cellv(r.import_ms).c_str(), cellv(r.compile_ms).c_str(), cellv(r.first_run_ms).c_str(),
                cellv(r.warm ? std::optional<double>(r.warm->median) : std::nullopt).c_str(), cellv(r.tflops).c_str(),
                cellv(r.gbps, 0).c_str(), cellv(r.peak_mb, 1).c_str(), cellv(r.tune_ms).c_str());
  }
  if (o.accept > 0) {
    const bool gpu = std::any_of(rows.begin(), rows.end(), [](const auto& r) { return r.route == "framework"; });
    judgeAndPrint(rows, o.accept, gpu ? "framework" : "eigen");
  }
  for (const Route& r : routes)
    if (r.kernel) {
      const kiln::CacheStats s = r.rt->cache_stats();
      std::printf("%s: %lld compile(s), %lld disk hit(s) for %zu shape(s): one kernel serves every shape\n",
                  r.name.c_str(), static_cast<long long>(s.compiles), static_cast<long long>(s.disk_hits),
                  shapes.size());
    }
  writeReport(o.csv, kiln::profile::to_csv(rows));
  writeReport(o.json, kiln::profile::to_json(rows));
  writeReport(o.html, kiln::profile::to_html(rows, o.kernel + " on " + device));
  return allOk ? 0 : 1;
}
