// A small C++ inference path with kiln inside: a transformer MLP block over several layers,
//   H_l     = gelu(X_l @ W1_l + b1_l)          (T x F)   kiln: gemm_bias_gelu
//   X_{l+1} = H_l @ W2_l + b2_l + X_l          (T x D)   kiln: gemm_bias_residual
// run through kiln's kernels and through the framework path (cuBLASLt with its fused
// epilogues on the GPU — bias+GELU, bias with the residual as C; Eigen on the CPU) and, on
// the GPU, the eager framework path (cuBLASLt GEMM + bias, then a separate elementwise
// kernel for the GELU and another for the residual add, as an eager framework runs it),
// verified layer by layer, and timed as a whole (model_ms) beside each operator's warm
// time, so an operator gain and the model gain can be read side by side.
//
//   kiln-mlp [--backend auto|cpu|cuda] [--tokens T] [--model D] [--hidden F] [--layers L]
//            [--dtype bf16|f16|f32] [--reps N] [--csv FILE] [--json FILE] [--html FILE]
//            [--tuned DB]   adds the kiln-tuned path: each GEMM's tiles from the autotuner
//                           (searched and saved in DB, or replayed), its search cost as tune_ms
//            [--accept X]   a verdict per path against the framework path at threshold X (a
//                           speedup): on the whole block's model_ms, and per operator
// Defaults: on a GPU T=2048, D=2048, F=8192, L=4, bf16; on the CPU T=64, D=128, F=512, L=2, f32.
#include <kiln/kiln.hpp>

#include <Eigen/Dense>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <optional>
#include <string>

namespace {

using Clock = std::chrono::steady_clock;
double msSince(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

struct Config {
  std::string backend = "auto";
  int64_t tokens = 0, model = 0, hidden = 0, layers = 0; // 0: the backend's default
  std::string dtype;
  int reps = 20;
  std::string csv, json, html;
  std::string tuned; ///< tuning database: adds the kiln-tuned path
  double accept = 0; ///< acceptance threshold on model_ms (and per operator): verdicts; 0: none
};

// The model's parameters and input, on the host (the engine's copy).
struct Model {
  std::vector<kiln::HostTensor> w1, b1, w2, b2;
  kiln::HostTensor x0;
};

Model makeModel(const Config& c, kiln::DType dt) {
  Model m;
  // Uniform weights scaled by 1/sqrt(fan_in), as initialisers do, keep activations O(1)
  // through the layers.
  const float s1 = 1.0f / std::sqrt(float(c.model)), s2 = 1.0f / std::sqrt(float(c.hidden));
  for (int64_t l = 0; l < c.layers; ++l) {
    m.w1.emplace_back(dt, std::vector<int64_t>{c.model, c.hidden});
    m.w1.back().fill_random(100 + 4 * l, -s1, s1);
    m.b1.emplace_back(dt, std::vector<int64_t>{c.hidden});
    m.b1.back().fill_random(101 + 4 * l, -0.1f, 0.1f);
    m.w2.emplace_back(dt, std::vector<int64_t>{c.hidden, c.model});
    m.w2.back().fill_random(102 + 4 * l, -s2, s2);
    m.b2.emplace_back(dt, std::vector<int64_t>{c.model});
    m.b2.back().fill_random(103 + 4 * l, -0.1f, 0.1f);
  }
  m.x0 = kiln::HostTensor(dt, {c.tokens, c.model});
  m.x0.fill_random(7);
  return m;
}

// One way through the block: its own runtime, its own copy of the weights, and one
// activation buffer per layer (X_0..X_L, H_1..H_L) so every layer can be verified after a run.
struct Path {
  std::string name;
  double import_ms = 0; // before rt: rt's initialiser sets it
  kiln::Runtime rt;
  std::optional<double> compile_ms;
  std::optional<double> tune_ms;
  std::vector<kiln::DeviceTensor> w1, b1, w2, b2, x, h;
  std::function<void(int64_t layer, void* stream)> up, down; // enqueue one operator of one layer on `stream`

  Path(std::string n, kiln::Backend backend) : name(std::move(n)), rt(create(backend, import_ms)) {}
  static kiln::Runtime create(kiln::Backend b, double& ms) {
    auto t0 = Clock::now();
    kiln::Runtime rt = kiln::Runtime::create(b);
    ms = msSince(t0);
    return rt;
  }
  void load(const Model& m, const Config& c, kiln::DType dt) {
    for (int64_t l = 0; l < c.layers; ++l) {
      w1.push_back(rt.upload(m.w1[l]));
      b1.push_back(rt.upload(m.b1[l]));
      w2.push_back(rt.upload(m.w2[l]));
      b2.push_back(rt.upload(m.b2[l]));
      h.push_back(rt.allocate(dt, {c.tokens, c.hidden}));
    }
    x.push_back(rt.upload(m.x0));
    for (int64_t l = 0; l < c.layers; ++l) x.push_back(rt.allocate(dt, {c.tokens, c.model}));
  }
  void forward(int64_t layers, void* stream = nullptr) {
    for (int64_t l = 0; l < layers; ++l) {
      up(l, stream);
      down(l, stream);
    }
  }
};

void kilnOps(Path& p, kiln::DType dt) {
  // The H200's best measured tiles for these GEMMs (docs/benchmarks/); the CPU takes the defaults.
  kiln::catalogue::GemmTiles t;
  if (p.rt.backend() == kiln::Backend::cuda) t = {128, 64, 32, 3};
  auto t0 = Clock::now();
  auto up = std::make_shared<kiln::CompiledKernel>(p.rt.compile(kiln::catalogue::gemm_bias_gelu(dt, t)));
  auto down = std::make_shared<kiln::CompiledKernel>(p.rt.compile(kiln::catalogue::gemm_bias_residual(dt, t)));
  p.compile_ms = msSince(t0);
  p.up = [&p, up](int64_t l, void* s) { up->launch({p.x[l].view(), p.w1[l].view(), p.b1[l].view(), p.h[l].view()}, s); };
  p.down = [&p, down](int64_t l, void* s) {
    down->launch({p.h[l].view(), p.w2[l].view(), p.b2[l].view(), p.x[l].view(), p.x[l + 1].view()}, s);
  };
}

// The tuned path: each of the two GEMMs gets the autotuner's choice for its shape (the
// tile space of docs/tuning.md), searched on this machine or replayed from the database.
void tunedOps(Path& p, const Config& c, kiln::DType dt) {
  namespace kt = kiln::tune;
  const int64_t es = kiln::size_of(dt);
  const bool gpu = p.rt.backend() == kiln::Backend::cuda;
  kt::Space space = gpu ? kt::Space::product({{"m", {64, 128}}, {"n", {64, 128}}, {"k", {32, 64}}, {"stages", {2, 3, 4}},
                                              {"warps", {4, 8}}},
                                             [&](const kt::Config& x, std::string* why) {
                                               const int64_t smem = x.get("stages", 1) *
                                                   (x.get("m", 0) * x.get("k", 0) + x.get("k", 0) * x.get("n", 0)) * es;
                                               *why = "over 227 KiB of shared memory or 128 accumulators per thread";
                                               return smem <= 227 * 1024 &&
                                                      x.get("m", 0) * x.get("n", 0) / (32 * x.get("warps", 4)) <= 128;
                                             })
                        : kt::Space::product({{"m", {16, 32, 64}}, {"n", {32, 64}}, {"k", {16, 32}}, {"stages", {3}}});
  double tuneMs = 0, compileMs = 0;
  auto pick = [&](const std::string& name, std::vector<int64_t> shape) {
    const kiln::catalogue::Entry& e = kiln::catalogue::find(name);
    kiln::catalogue::Problem prob = e.problem(shape, dt, 77);
    kt::Options o;
    o.reps = c.reps;
    o.database = c.tuned;
    o.shape_class = std::to_string(shape[0]) + "x" + std::to_string(shape[1]) + "x" + std::to_string(shape[2]);
    auto make = [&](const kt::Config& x) {
      return e.make_tiled(dt, {x.get("m", 64), x.get("n", 64), x.get("k", 32), x.get("stages", 3)});
    };
    kt::Result r = kt::tune(p.rt.backend(), {}, space, make, {prob.args, prob.output, prob.reference, prob.flops}, o);
    tuneMs += r.compile_ms + r.timing_ms;
    std::printf("  %s %s: %s (%s)\n", name.c_str(), o.shape_class.c_str(), r.best.str().c_str(),
                r.replayed ? "replayed" : "searched");
    auto t0 = Clock::now();
    auto k = std::make_shared<kiln::CompiledKernel>(
        kiln::Runtime::create(p.rt.backend(), kt::options_for({}, r.best)).compile(make(r.best)));
    compileMs += msSince(t0);
    return k; // launches on p.rt's memory: one device, one context
  };
  auto up = pick("gemm_bias_gelu", {c.tokens, c.hidden, c.model});
  auto down = pick("gemm_bias_residual", {c.tokens, c.model, c.hidden});
  p.tune_ms = tuneMs;
  p.compile_ms = compileMs;
  p.up = [&p, up](int64_t l, void* s) { up->launch({p.x[l].view(), p.w1[l].view(), p.b1[l].view(), p.h[l].view()}, s); };
  p.down = [&p, down](int64_t l, void* s) {
    down->launch({p.h[l].view(), p.w2[l].view(), p.b2[l].view(), p.x[l].view(), p.x[l + 1].view()}, s);
  };
}

void cublasOps(Path& p) {
  using kiln::reference::Epilogue;
  p.up = [&p](int64_t l, void* s) {
    auto b = p.b1[l].view();
    kiln::reference::gpu_gemm_async(p.rt, p.x[l].view(), p.w1[l].view(), &b, Epilogue::bias_gelu, p.h[l].view(),
                                    nullptr, s);
  };
  p.down = [&p](int64_t l, void* s) {
    auto b = p.b2[l].view(), r = p.x[l].view();
    kiln::reference::gpu_gemm_async(p.rt, p.h[l].view(), p.w2[l].view(), &b, Epilogue::bias, p.x[l + 1].view(), &r, s);
  };
}

// The eager framework: cuBLASLt's GEMM with its bias epilogue (what addmm fuses), then a
// separate elementwise kernel for what it does not (GELU; the residual add), compiled
// once with NVRTC: a framework ships it built, so its compile counts as import.
void eagerOps(Path& p, kiln::DType dt) {
  using kiln::reference::Epilogue;
  auto t0 = Clock::now();
  auto ee = std::make_shared<kiln::catalogue::EagerEpilogue>(kiln::catalogue::eager_epilogue(dt));
  auto k = std::make_shared<kiln::HandwrittenKernel>(kiln::compile_cuda(p.rt, ee->source));
  p.import_ms += msSince(t0);
  p.up = [&p, ee, k](int64_t l, void* s) {
    auto b = p.b1[l].view(), h = p.h[l].view();
    kiln::reference::gpu_gemm_async(p.rt, p.x[l].view(), p.w1[l].view(), &b, Epilogue::bias, h, nullptr, s);
    ee->launch(*k, h, nullptr, nullptr, kiln::catalogue::Activation::gelu, s);
  };
  p.down = [&p, ee, k](int64_t l, void* s) {
    auto b = p.b2[l].view(), r = p.x[l].view(), y = p.x[l + 1].view();
    kiln::reference::gpu_gemm_async(p.rt, p.h[l].view(), p.w2[l].view(), &b, Epilogue::bias, y, nullptr, s);
    ee->launch(*k, y, nullptr, &r, kiln::catalogue::Activation::none, s);
  };
}

// Eigen (one thread) on the CPU runtime's memory, which is host memory: f32 only.
void eigenOps(Path& p, const Config& c) {
  using Mat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using Map = Eigen::Map<Mat>;
  using Row = Eigen::Map<Eigen::RowVectorXf>;
  auto f = [](const kiln::DeviceTensor& t) { return static_cast<float*>(t.view().data); };
  const int64_t T = c.tokens, D = c.model, F = c.hidden;
  p.up = [&p, f, T, D, F](int64_t l, void*) {
    Map h(f(p.h[l]), T, F);
    h.noalias() = Map(f(p.x[l]), T, D) * Map(f(p.w1[l]), D, F);
    h = (h.rowwise() + Row(f(p.b1[l]), F)).unaryExpr([](float v) { return float(kiln::reference::gelu(v)); });
  };
  p.down = [&p, f, T, D, F](int64_t l, void*) {
    Map y(f(p.x[l + 1]), T, D);
    y.noalias() = Map(f(p.h[l]), T, F) * Map(f(p.w2[l]), F, D);
    y = (y + Map(f(p.x[l]), T, D)).rowwise() + Row(f(p.b2[l]), D);
  };
}

// The first `rows` rows of a row-major matrix, as a view (a prefix of its memory).
kiln::TensorView topRows(const kiln::HostTensor& t, int64_t rows) {
  kiln::TensorView v = const_cast<kiln::HostTensor&>(t).view();
  v.dims[0] = std::min(rows, v.dims[0]);
  return v;
}

// Every layer of the last forward pass against the f64 reference on the first `rows`
// tokens, each operator fed the inputs it actually got. Returns the worst report.
kiln::verify::Report verifyLayers(Path& p, Model& m, const Config& c, kiln::DType dt, int64_t rows) {
  using kiln::reference::Epilogue;
  const auto tol = kiln::verify::Tolerance::for_dtype(dt);
  kiln::verify::Report worst;
  worst.ok = true;
  auto keep = [&](const kiln::verify::Report& r, const std::string& what) {
    if (!r.ok) std::printf("  %s: %s: %s\n", p.name.c_str(), what.c_str(), r.summary().c_str());
    if (!r.ok || (worst.ok && r.rel_l2 >= worst.rel_l2)) worst = r;
  };
  kiln::HostTensor x(dt, {c.tokens, c.model}), xn(dt, {c.tokens, c.model}), h(dt, {c.tokens, c.hidden});
  p.rt.download(p.x[0], x);
  for (int64_t l = 0; l < c.layers; ++l) {
    p.rt.download(p.h[l], h);
    p.rt.download(p.x[l + 1], xn);
    kiln::TensorView b1 = m.b1[l].view(), b2 = m.b2[l].view(), xr = topRows(x, rows);
    auto refH = kiln::reference::gemm(xr, m.w1[l].view(), &b1, Epilogue::bias_gelu);
    keep(kiln::verify::compare(topRows(h, rows), refH, tol), "layer " + std::to_string(l) + " up");
    auto refX = kiln::reference::gemm(topRows(h, rows), m.w2[l].view(), &b2, Epilogue::bias, &xr);
    keep(kiln::verify::compare(topRows(xn, rows), refX, tol), "layer " + std::to_string(l) + " down");
    std::swap(x, xn);
  }
  return worst;
}

int parse(int argc, char** argv, Config& c) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw kiln::Error(kiln::ErrorKind::InvalidArgument, a + " needs a value");
      return argv[++i];
    };
    auto number = [&]() {
      std::string v = value();
      char* end = nullptr;
      long long n = std::strtoll(v.c_str(), &end, 10);
      if (*end || n <= 0) throw kiln::Error(kiln::ErrorKind::InvalidArgument, a + " takes a positive integer, got '" + v + "'");
      return int64_t(n);
    };
    if (a == "--backend") c.backend = value();
    else if (a == "--tokens") c.tokens = number();
    else if (a == "--model") c.model = number();
    else if (a == "--hidden") c.hidden = number();
    else if (a == "--layers") c.layers = number();
    else if (a == "--dtype") c.dtype = value();
    else if (a == "--reps") c.reps = int(number());
    else if (a == "--csv") c.csv = value();
    else if (a == "--json") c.json = value();
    else if (a == "--html") c.html = value();
    else if (a == "--tuned") c.tuned = value();
    else if (a == "--accept") {
      const std::string v = value();
      char* end = nullptr;
      c.accept = std::strtod(v.c_str(), &end);
      if (v.empty() || *end || !std::isfinite(c.accept) || c.accept <= 0)
        throw kiln::Error(kiln::ErrorKind::InvalidArgument,
                          "--accept takes a speedup above 0 (e.g. 1.10), got '" + v + "'");
    }
    else throw kiln::Error(kiln::ErrorKind::NotFound, "unknown flag '" + a + "' (see the comment at the top of mlp_block.cpp)");
  }
  return 0;
}

void write(const std::string& path, const std::string& text) {
  if (path.empty()) return;
  std::ofstream(path) << text;
  std::printf("wrote %s\n", path.c_str());
}

} // namespace

int main(int argc, char** argv) try {
  Config c;
  parse(argc, argv, c);
  const kiln::Backend backend = kiln::parse_backend(c.backend);
  Path kilnPath("kiln", backend);
  const bool gpu = kilnPath.rt.backend() == kiln::Backend::cuda;
  if (!gpu) kilnPath.name = "kiln-cpu";
  auto pick = [](int64_t v, int64_t g, int64_t cpu, bool onGpu) { return v ? v : onGpu ? g : cpu; };
  c.tokens = pick(c.tokens, 2048, 64, gpu);
  c.model = pick(c.model, 2048, 128, gpu);
  c.hidden = pick(c.hidden, 8192, 512, gpu);
  c.layers = pick(c.layers, 4, 2, gpu);
  if (c.dtype.empty()) c.dtype = gpu ? "bf16" : "f32";
  const auto dtOpt = kiln::parse_dtype(c.dtype);
  if (!dtOpt) throw kiln::Error(kiln::ErrorKind::NotFound, "unknown dtype '" + c.dtype + "'");
  const kiln::DType dt = *dtOpt;
  if (!gpu && dt != kiln::DType::f32)
    throw kiln::Error(kiln::ErrorKind::Unsupported, "on the CPU the framework path is Eigen in f32: use --dtype f32");

  // The example's Eigen is built for generic x86-64 (SSE2), like the rest of this program;
  // `kiln bench`'s eigen route loads Eigen built for the host's ISA (docs/lifecycle.md).
  Path framework(gpu ? "framework" : "eigen-sse2", kilnPath.rt.backend());
  std::optional<Path> eager, tuned;
  if (gpu) eager.emplace("framework-eager", kilnPath.rt.backend());
  std::printf("MLP block: %lld tokens, model %lld, hidden %lld, %lld layers, %s, on %s\n", (long long)c.tokens,
              (long long)c.model, (long long)c.hidden, (long long)c.layers, c.dtype.c_str(), kilnPath.rt.describe().c_str());
  Model m = makeModel(c, dt);
  kilnOps(kilnPath, dt);
  if (gpu) cublasOps(framework);
  else eigenOps(framework, c);
  if (eager) eagerOps(*eager, dt);
  if (!c.tuned.empty()) {
    tuned.emplace(gpu ? "kiln-tuned" : "kiln-cpu-tuned", kilnPath.rt.backend());
    std::printf("tuning the two GEMMs (database %s):\n", c.tuned.c_str());
    tunedOps(*tuned, c, dt);
  }
  std::vector<Path*> paths = {&kilnPath, &framework};
  if (eager) paths.push_back(&*eager);
  if (tuned) paths.push_back(&*tuned);

  const double upFlops = 2.0 * c.tokens * c.model * c.hidden, downFlops = upFlops;
  const double modelFlops = c.layers * (upFlops + downFlops);
  const std::string modelShape = std::to_string(c.tokens) + "x" + std::to_string(c.model) + "x" +
                                 std::to_string(c.hidden) + "xL" + std::to_string(c.layers);
  std::string device = kilnPath.rt.describe().substr(0, kilnPath.rt.describe().find(" ("));
  if (device.rfind("cuda: ", 0) == 0) device = device.substr(6); // "NVIDIA H200"
  kiln::profile::TimingOptions timing{c.reps, 3, true};
  std::vector<kiln::profile::Row> rows;
  bool allOk = true;
  for (Path* p : paths) {
    p->rt.reset_peak_memory();
    p->load(m, c, dt);
    auto f0 = Clock::now();
    p->forward(c.layers);
    p->rt.synchronize();
    const double firstMs = msSince(f0);
    const kiln::verify::Report rep = verifyLayers(*p, m, c, dt, std::min<int64_t>(c.tokens, 32));
    allOk = allOk && rep.ok;
    auto row = [&](const std::string& kernel, const std::string& shape) {
      kiln::profile::Row r;
      r.shape = shape, r.dtype = c.dtype, r.device = device, r.route = p->name, r.kernel = kernel;
      r.reference_ok = rep.ok, r.rel_err = rep.rel_l2;
      return r;
    };
    // Operators alone (layer 0), then the whole block.
    const std::string tdf = std::to_string(c.tokens) + "x" + std::to_string(c.hidden) + "x" + std::to_string(c.model);
    const std::string tfd = std::to_string(c.tokens) + "x" + std::to_string(c.model) + "x" + std::to_string(c.hidden);
    kiln::profile::Row up = row("mlp.up gemm_bias_gelu", tdf);
    up.warm = kiln::profile::summarize(kiln::profile::time(p->rt, [&] { p->up(0, nullptr); }, timing));
    up.tflops = upFlops / (up.warm->median * 1e9);
    kiln::profile::Row down = row("mlp.down gemm_bias_residual", tfd);
    down.warm = kiln::profile::summarize(kiln::profile::time(p->rt, [&] { p->down(0, nullptr); }, timing));
    down.tflops = downFlops / (down.warm->median * 1e9);
    kiln::profile::Row model = row("mlp_block", modelShape);
    model.import_ms = p->import_ms;
    model.compile_ms = p->compile_ms;
    model.tune_ms = p->tune_ms;
    model.first_run_ms = firstMs;
    // On a stream of the profiler's, each layer's launches one after another; then (CUDA)
    // the same captured once in a CUDA graph and replayed: one launch for the whole block.
    auto stat = kiln::profile::summarize(
        kiln::profile::time_stream(p->rt, [&](void* s) { p->forward(c.layers, s); }, timing));
    model.model_ms = stat->median;
    model.tflops = modelFlops / (stat->median * 1e9);
    model.peak_mb = double(p->rt.memory().peak_bytes) / (1024.0 * 1024.0);
    rows.insert(rows.end(), {up, down, model});
    if (p->rt.backend() == kiln::Backend::cuda) {
      kiln::profile::Row graphed = row("mlp_block in a CUDA graph", modelShape);
      auto g = kiln::profile::summarize(
          kiln::profile::time_stream(p->rt, [&](void* s) { p->forward(c.layers, s); }, timing, /*graph=*/true));
      graphed.model_ms = g->median;
      graphed.tflops = modelFlops / (g->median * 1e9);
      graphed.peak_mb = model.peak_mb;
      rows.push_back(graphed);
    }
  }

  std::printf("%-15s %-28s %-20s %-9s %10s %9s\n", "path", "what", "shape", "reference", "ms", "TFLOP/s");
  for (const auto& r : rows)
    std::printf("%-15s %-28s %-20s %-9s %10.3f %9.2f\n", r.route.c_str(), r.kernel.c_str(), r.shape.c_str(),
                *r.reference_ok ? "ok" : "WRONG", r.model_ms ? *r.model_ms : r.warm->median, *r.tflops);
  // A path's row of one "what", in ms (model_ms where it has one); 0 when it has none.
  auto ms = [&](const std::string& route, const std::string& what) {
    for (const auto& r : rows)
      if (r.route == route && r.kernel == what) return r.model_ms ? *r.model_ms : r.warm->median;
    return 0.0;
  };
  for (size_t q = 1; q < paths.size(); ++q) {
    auto ratio = [&](const char* what) { return ms(paths[q]->name, what) / ms(kilnPath.name, what); };
    std::printf("speedup of %s over %s (>1: kiln faster): up %.2fx, down %.2fx, model %.2fx", kilnPath.name.c_str(),
                paths[q]->name.c_str(), ratio("mlp.up gemm_bias_gelu"), ratio("mlp.down gemm_bias_residual"),
                ratio("mlp_block"));
    if (ms(kilnPath.name, "mlp_block in a CUDA graph") > 0)
      std::printf(", model in a CUDA graph %.2fx", ratio("mlp_block in a CUDA graph"));
    std::printf("\n");
  }
  if (c.accept > 0) {
    // The decision on the whole block (model_ms), the operators' beside it.
    kiln::profile::judge(rows, c.accept, framework.name);
    std::printf("verdicts (threshold %.2fx over %s; the mlp_block rows on model_ms):\n", c.accept, framework.name.c_str());
    for (const auto& r : rows)
      if (!r.verdict.empty()) std::printf("  %s\n", r.verdict.c_str());
    for (const std::string& line : kiln::profile::verdict_summary(rows, framework.name)) std::printf("  %s\n", line.c_str());
  }
  write(c.csv, kiln::profile::to_csv(rows));
  write(c.json, kiln::profile::to_json(rows));
  write(c.html, kiln::profile::to_html(rows, "Transformer MLP block (" + modelShape + ", " + c.dtype + ") on " + device));
  std::printf("model_ok=%s\n", allOk ? "true" : "false");
  return allOk ? 0 : 1;
} catch (const kiln::Error& e) {
  std::fprintf(stderr, "kiln-mlp: error [%s]: %s\n", kiln::to_string(e.kind()), e.what());
  return 2;
}
