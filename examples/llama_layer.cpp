// A Llama-style decoder layer, two ways, verified and timed side by side:
//   N1  = rmsnorm(X, w1)                 attn_norm
//   QKV = N1 @ Wqkv                      qkv        (T x (H+2G) hd)
//   Q, K rotated by position             rope       (decode: K and V into the K/V cache)
//   A   = causal attention(Q, K, V), GQA attention  (over views of QKV, or of the cache)
//   X1  = A @ Wo + X                     o_proj
//   N2  = rmsnorm(X1, w2)                mlp_norm
//   Hm  = silu(N2 @ Wg) * (N2 @ Wu)      gate_up
//   Y   = Hm @ Wd + X1                   down
// kiln's path runs kiln's kernels (the residuals fused into the GEMMs, gate and up in one
// kernel gated in registers); the framework's path (GPU) runs cuBLASLt GEMMs, cuDNN's fused
// attention and separate elementwise kernels, as an engine on a framework does. Q, K and V
// are never copied out of QKV: both take them as strided views. Each path's output is
// verified against an f64 reference of the whole layer (its first rows: attention is causal,
// so a sequence's first rows see nothing after them), the two outputs are compared in full,
// and each stage and the whole layer (model_ms) are timed: CUDA events on a GPU, caches
// flushed before each run, warm-up first, the median of --reps. With --accept, the verdict.
//
//   kiln-llama [--backend auto|cpu|cuda] [--mode prefill|decode] [--batch B] [--tokens T]
//              [--cache L] [--hidden Dm] [--heads H] [--kv-heads G] [--mlp F]
//              [--dtype bf16|f16|f32] [--reps N] [--accept X] [--csv F] [--json F] [--html F]
// Defaults: on a GPU a 7-8B model's layer (Dm=4096, H=32, G=8, F=14336, bf16), prefill of
// one sequence of T=2048 tokens, or decode of B=16 sequences after L=4096 cached positions;
// on the CPU Dm=64, H=4, G=2, F=96, f32, prefill T=24 or decode B=2 after L=16 (what CI runs;
// kiln's path only: the framework's is cuBLASLt and cuDNN).
#include "llama_layer.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;
using kiln::DType;

struct Config {
  std::string backend = "auto", dtype, mode = "prefill", csv, json, html;
  int64_t batch = 0, tokens = 0, cache = 0, hidden = 0, heads = 0, kvHeads = 0, mlp = 0; // 0: default
  int reps = 10;
  double accept = 0; ///< acceptance threshold on model_ms (and per stage); 0: no verdicts
};

void parse(int argc, char** argv, Config& c) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw kiln::Error(kiln::ErrorKind::InvalidArgument, a + " needs a value");
      return argv[++i];
    };
    auto number = [&]() {
      const std::string v = value();
      char* end = nullptr;
      const long long n = std::strtoll(v.c_str(), &end, 10);
      if (v.empty() || *end || n <= 0)
        throw kiln::Error(kiln::ErrorKind::InvalidArgument, a + " takes a positive integer, got '" + v + "'");
      return int64_t(n);
    };
    if (a == "--backend") c.backend = value();
    else if (a == "--dtype") c.dtype = value();
    else if (a == "--mode") c.mode = value();
    else if (a == "--batch") c.batch = number();
    else if (a == "--tokens") c.tokens = number();
    else if (a == "--cache") c.cache = number();
    else if (a == "--hidden") c.hidden = number();
    else if (a == "--heads") c.heads = number();
    else if (a == "--kv-heads") c.kvHeads = number();
    else if (a == "--mlp") c.mlp = number();
    else if (a == "--reps") c.reps = int(number());
    else if (a == "--csv") c.csv = value();
    else if (a == "--json") c.json = value();
    else if (a == "--html") c.html = value();
    else if (a == "--accept") {
      const std::string v = value();
      char* end = nullptr;
      c.accept = std::strtod(v.c_str(), &end);
      if (v.empty() || *end || !std::isfinite(c.accept) || c.accept <= 0)
        throw kiln::Error(kiln::ErrorKind::InvalidArgument, "--accept takes a speedup above 0 (e.g. 1.10), got '" + v + "'");
    } else
      throw kiln::Error(kiln::ErrorKind::NotFound, "unknown flag '" + a + "' (see the comment at the top of llama_layer.cpp)");
  }
  if (c.mode != "prefill" && c.mode != "decode")
    throw kiln::Error(kiln::ErrorKind::InvalidArgument, "--mode takes prefill or decode, got '" + c.mode + "'");
  if (c.mode == "decode" && c.tokens)
    throw kiln::Error(kiln::ErrorKind::InvalidArgument, "--tokens is prefill's: decode takes one token per sequence");
  if (c.mode == "prefill" && c.cache)
    throw kiln::Error(kiln::ErrorKind::InvalidArgument, "--cache is decode's: prefill starts from an empty cache");
}

llama::Shape shapeOf(const Config& c, bool gpu) {
  auto pick = [&](int64_t v, int64_t g, int64_t cpu) { return v ? v : gpu ? g : cpu; };
  const bool decode = c.mode == "decode";
  llama::Shape s;
  s.batch = pick(c.batch, decode ? 16 : 1, decode ? 2 : 1);
  s.tokens = decode ? 1 : pick(c.tokens, 2048, 24);
  s.cached = decode ? pick(c.cache, 4096, 16) : 0;
  s.hidden = pick(c.hidden, 4096, 64), s.heads = pick(c.heads, 32, 4), s.kvHeads = pick(c.kvHeads, 8, 2);
  s.mlp = pick(c.mlp, 14336, 96);
  if (s.hidden % s.heads != 0 || s.heads % s.kvHeads != 0 || s.hd() % 2 != 0)
    throw kiln::Error(kiln::ErrorKind::InvalidArgument,
                      "--hidden must be a multiple of --heads with an even head dim, and --heads a multiple of "
                      "--kv-heads; got hidden " + std::to_string(s.hidden) + ", heads " + std::to_string(s.heads) +
                          ", kv heads " + std::to_string(s.kvHeads));
  return s;
}

void write(const std::string& path, const std::string& text) {
  if (path.empty()) return;
  std::ofstream(path) << text;
  std::printf("wrote %s\n", path.c_str());
}

// The rows checked against the reference: the first sequence's first 32 tokens (prefill) or
// the first 4 sequences' new token (decode); either way the output's first rows.
std::vector<double> referenceRows(const llama::Shape& s, const llama::Host& h, int64_t& rows) {
  if (!s.decode()) {
    rows = std::min<int64_t>(s.tokens, 32);
    return llama::reference(s, h, 0, rows);
  }
  rows = std::min<int64_t>(s.batch, 4);
  std::vector<double> want;
  for (int64_t b = 0; b < rows; ++b) {
    const std::vector<double> r = llama::reference(s, h, b, 1);
    want.insert(want.end(), r.begin(), r.end());
  }
  return want;
}

} // namespace

int main(int argc, char** argv) try {
  Config c;
  parse(argc, argv, c);
  std::vector<std::unique_ptr<llama::Path>> paths;
  paths.push_back(std::make_unique<llama::Path>("kiln", kiln::parse_backend(c.backend)));
  kiln::Runtime& rt = paths[0]->rt;
  const bool gpu = rt.backend() == kiln::Backend::cuda;
  const llama::Shape s = shapeOf(c, gpu);
  const std::string dtName = c.dtype.empty() ? (gpu ? "bf16" : "f32") : c.dtype;
  const std::optional<DType> parsed = kiln::parse_dtype(dtName);
  if (!parsed || (*parsed != DType::bf16 && *parsed != DType::f16 && *parsed != DType::f32))
    throw kiln::Error(kiln::ErrorKind::InvalidArgument, "--dtype takes bf16, f16 or f32, got '" + dtName + "'");
  const DType dt = *parsed;
  std::string device = rt.describe().substr(0, rt.describe().find(" ("));
  if (device.rfind("cuda: ", 0) == 0) device = device.substr(6); // "NVIDIA H200"
  std::printf("llama layer: %s, %s, on %s\n", s.describe().c_str(), kiln::to_string(dt), rt.describe().c_str());
  if (!gpu) paths[0]->name = "kiln-cpu";
  if (gpu && dt != DType::f32) paths.push_back(std::make_unique<llama::Path>("framework", rt.backend()));
  else std::printf("framework path: not run (it is cuBLASLt and cuDNN in bf16 or f16, on a GPU)\n");

  const llama::Host host = llama::make_host(s, dt);
  int64_t checked = 0;
  const std::vector<double> want = referenceRows(s, host, checked);
  const auto tol = kiln::verify::Tolerance::for_dtype(dt);
  const kiln::profile::TimingOptions timing{c.reps, 2, true};
  const std::string layerKernel = std::string("llama_layer.") + (s.decode() ? "decode" : "prefill");
  std::vector<kiln::profile::Row> rows;
  std::vector<kiln::HostTensor> outputs;
  bool allOk = true;
  for (auto& p : paths) {
    p->rt.reset_peak_memory();
    if (p->name == "framework") llama::build_framework(*p, s, host, dt);
    else llama::build_kiln(*p, s, host, dt);
    const auto f0 = Clock::now();
    p->run();
    p->rt.synchronize();
    const double firstMs = std::chrono::duration<double, std::milli>(Clock::now() - f0).count();
    outputs.emplace_back(dt, std::vector<int64_t>{s.rows(), s.hidden});
    p->rt.download(p->y, outputs.back());
    kiln::TensorView got = outputs.back().view();
    got.dims[0] = checked;
    const kiln::verify::Report rep = kiln::verify::compare(got, want, tol);
    allOk = allOk && rep.ok;
    std::printf("%s: first %lld rows against the reference: %s\n", p->name.c_str(), (long long)checked,
                rep.summary().c_str());
    auto row = [&](const std::string& kernel) {
      kiln::profile::Row r;
      r.shape = s.key(), r.dtype = kiln::to_string(dt), r.device = device, r.route = p->name, r.kernel = kernel;
      r.reference_ok = rep.ok, r.rel_err = rep.rel_l2;
      return r;
    };
    for (const llama::Step& step : p->steps) {
      kiln::profile::Row r = row("llama." + step.stage);
      r.warm = kiln::profile::summarize(kiln::profile::time(p->rt, step.run, timing));
      rows.push_back(r);
    }
    kiln::profile::Row model = row(layerKernel);
    model.import_ms = p->import_ms;
    model.compile_ms = p->compile_ms;
    model.first_run_ms = firstMs;
    model.model_ms = kiln::profile::summarize(kiln::profile::time(p->rt, [&] { p->run(); }, timing))->median;
    model.tflops = s.flops() / (*model.model_ms * 1e9);
    model.peak_mb = double(p->rt.memory().peak_bytes) / (1024.0 * 1024.0);
    rows.push_back(model);
  }
  if (outputs.size() == 2) { // the whole output, not only the reference's rows
    const std::vector<double> fw = outputs[1].to_f64();
    const kiln::verify::Report agree = kiln::verify::compare(outputs[0].view(), fw, tol);
    std::printf("kiln against the framework, all %lld rows: %s\n", (long long)s.rows(), agree.summary().c_str());
    allOk = allOk && agree.ok;
  }

  std::printf("%-10s %-24s %-9s %10s %9s\n", "path", "stage", "reference", "ms", "TFLOP/s");
  for (const auto& r : rows) {
    const double ms = r.model_ms ? *r.model_ms : r.warm->median;
    std::printf("%-10s %-24s %-9s %10.3f", r.route.c_str(), r.kernel.c_str(), *r.reference_ok ? "ok" : "WRONG", ms);
    if (r.tflops) std::printf(" %9.1f  %.0f tokens/s  peak %.0f MB", *r.tflops, double(s.rows()) / ms * 1e3, *r.peak_mb);
    std::printf("\n");
  }
  if (paths.size() == 2) {
    const size_t n = rows.size() / 2; // each path: its stages, then the layer
    std::printf("framework / kiln (>1: kiln faster):");
    for (size_t i = 0; i < n; ++i) {
      auto ms = [&](const kiln::profile::Row& r) { return r.model_ms ? *r.model_ms : r.warm->median; };
      std::printf(" %s %.2fx", rows[i].kernel.substr(rows[i].kernel.find('.') + 1).c_str(), ms(rows[n + i]) / ms(rows[i]));
    }
    std::printf("\n");
  }
  if (c.accept > 0) {
    kiln::profile::judge(rows, c.accept, "framework");
    std::printf("verdicts (threshold %.2fx over the framework; the layer's on model_ms):\n", c.accept);
    for (const auto& r : rows)
      if (!r.verdict.empty()) std::printf("  %s\n", r.verdict.c_str());
    for (const std::string& line : kiln::profile::verdict_summary(rows, "framework")) std::printf("  %s\n", line.c_str());
  }
  write(c.csv, kiln::profile::to_csv(rows));
  write(c.json, kiln::profile::to_json(rows));
  write(c.html, kiln::profile::to_html(rows, "Llama decoder layer (" + s.describe() + ", " + kiln::to_string(dt) +
                                                 ") on " + device));
  std::printf("model_ok=%s\n", allOk ? "true" : "false");
  return allOk ? 0 : 1;
} catch (const kiln::Error& e) {
  std::fprintf(stderr, "kiln-llama: error [%s]: %s\n", kiln::to_string(e.kind()), e.what());
  return 2;
}
