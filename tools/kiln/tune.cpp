// kiln tune: the autotuner on a catalogue GEMM (docs/tuning.md). The default space is
// tiles m, n in {64, 128}, k in {32, 64}, stages in {2, 3, 4}, warps in {4, 8} on CUDA
// (48 configs before constraints), smaller tiles on the CPU; `--space FILE` takes a JSON
// list of configs instead.
#include "progress.hpp"
#include "tune_cmd.hpp"

#include <cstdio>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "kiln/kiln.hpp"

namespace {

using kiln::tune::Config;

// Shared memory a config's pipelined k-loop stages (A and B tiles per stage), and the f32
// accumulators each thread holds: the two limits a config can break.
kiln::tune::Space defaultSpace(kiln::Backend b, kiln::DType dt, int64_t smemLimit, bool hopper) {
  const int64_t es = kiln::size_of(dt);
  if (b != kiln::Backend::cuda)
    return kiln::tune::Space::product({{"m", {16, 32, 64}}, {"n", {16, 32, 64}}, {"k", {16, 32}}, {"stages", {3}}});
  // On sm_90a, bf16/f16 GEMMs also have the TMA + wgmma twin: its widths are candidates,
  // and the portable configs are timed with the twin off (else each would time the twin).
  const bool twin = hopper && dt != kiln::DType::f32;
  std::map<std::string, std::vector<int64_t>> portable = {
      {"m", {64, 128}}, {"n", {64, 128}}, {"k", {32, 64}}, {"stages", {2, 3, 4}}, {"warps", {4, 8}}};
  if (twin) portable["hopper_gemm"] = {0};
  kiln::tune::Space s = kiln::tune::Space::product(
      portable,
      [=](const Config& c, std::string* why) {
        const int64_t m = c.get("m", 0), n = c.get("n", 0), k = c.get("k", 0), s = c.get("stages", 1);
        const int64_t smem = s * (m * k + k * n) * es;
        if (smem > smemLimit) {
          *why = "needs " + std::to_string(smem) + " B of shared memory, over " + std::to_string(smemLimit);
          return false;
        }
        const int64_t acc = m * n / (32 * c.get("warps", 4));
        if (acc > 128) {
          *why = std::to_string(acc) + " f32 accumulators per thread: would spill";
          return false;
        }
        return true;
      });
  // The twin: each width with the deepest ring that fits (its default), and one stage less
  // (a shallower ring leaves L2 more room on some shapes); the 64-row tile on every shape;
  // the default tiles in the tile orders at either end (row by row, and groups of 32 tile
  // rows) and in 2-CTA clusters, side by side (sharing A) and stacked (sharing B, also with
  // the 64-row tile alone); the 128 x 128 tile in fours sharing A on every shape (by default
  // only where it takes one round). First of all, kiln's untuned default (no parameter: every tile,
  // chosen per launch).
  if (twin) {
    // Pairs along M sharing B: every tile, the 64-row tile alone (1000^3's best on the H200),
    // and 64 x 192 (cuBLASLt's choice at 128 x 12288 x 4096: 128 CTAs on 132 SMs).
    s.configs.insert(s.configs.begin(), Config{{{"hopper_tile_m", 64},
                                                {"hopper_tile_n", 192},
                                                {"hopper_cluster", 2},
                                                {"hopper_cluster_m", 1}}});
    s.configs.insert(s.configs.begin(), Config{{{"hopper_tile_m", 64}, {"hopper_cluster", 2}, {"hopper_cluster_m", 1}}});
    s.configs.insert(s.configs.begin(), Config{{{"hopper_cluster", 2}, {"hopper_cluster_m", 1}}});
    // The 64-row and tall 256 x 128 tiles alone on every shape, without clusters (by default
    // each runs alone or in stacked pairs only where the shape favours it; stacked on every
    // shape above).
    s.configs.insert(s.configs.begin(), Config{{{"hopper_tile_m", 64}, {"hopper_cluster", 1}}});
    s.configs.insert(s.configs.begin(), Config{{{"hopper_tile_m", 256}, {"hopper_cluster", 1}}});
    // Split-K (a launch-time choice: no compile): never, and in 2, 4 and 8 chunks.
    for (auto [key, value] : {std::pair<const char*, int64_t>{"hopper_split_k", 8}, {"hopper_split_k", 4},
                              {"hopper_split_k", 2}, {"hopper_split_k", 1}, {"hopper_cluster", 4},
                              {"hopper_cluster", 2}, {"hopper_raster", 32}, {"hopper_raster", 1}})
      s.configs.insert(s.configs.begin(), Config{{{key, value}}});
    for (auto [n, stages] : {std::pair<int64_t, int64_t>{256, 3}, {128, 4}, {256, 0}, {128, 0}}) {
      Config c{{{"hopper_tile_n", n}}};
      if (stages) c.params["hopper_stages"] = stages;
      s.configs.insert(s.configs.begin(), c);
    }
    s.configs.insert(s.configs.begin(), Config{});
  }
  return s;
}

kiln::tune::Space spaceFromFile(const std::string& path) {
  const std::string text = kiln::read_file(path, "space file");
  std::vector<Config> configs;
  try {
    for (const auto& j : nlohmann::json::parse(text)) {
      // Checked before get<>: nlohmann casts a float (1e111) or a too-large integer to
      // int64 without a check, which is undefined behaviour.
      for (const auto& [name, v] : j.items())
        if (!v.is_number_integer() || (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(INT64_MAX)))
          throw kiln::Error(kiln::ErrorKind::InvalidArgument,
                            "space file '" + path + "': " + name + " is " + v.dump() + ", not an int64 integer");
      configs.push_back(Config{j.get<std::map<std::string, int64_t>>()});
    }
  } catch (const nlohmann::json::exception& e) {
    throw kiln::Error(kiln::ErrorKind::InvalidArgument,
                      "space file '" + path + "': expected a JSON list of objects of integers, e.g. "
                      "[{\"m\": 128, \"n\": 64, \"k\": 32, \"stages\": 3, \"warps\": 4}]: " + e.what());
  }
  return kiln::tune::Space::list(std::move(configs));
}

} // namespace

kiln::tune::Space defaultTuneSpace(const kiln::Runtime& rt, kiln::DType dt) {
  return defaultSpace(rt.backend(), dt, 227 * 1024, rt.fingerprint().target == "sm_90a");
}

kiln::Kernel tiledKernel(const std::string& kernel, kiln::DType dt, const Config& c) {
  return kiln::catalogue::find(kernel).make_tiled(dt, {c.get("m", 64), c.get("n", 64), c.get("k", 32), c.get("stages", 3)});
}

bool gpuReference(const kiln::catalogue::Entry& entry, kiln::Backend backend, const std::vector<int64_t>& shape) {
  double macs = 1;
  for (int64_t d : shape) macs *= double(d);
  return backend == kiln::Backend::cuda && entry.gpu_problem && macs > double(int64_t(1) << 33);
}

kiln::catalogue::Problem referenceProblem(const kiln::catalogue::Entry& entry, const kiln::Runtime& rt,
                                          const std::vector<int64_t>& shape, kiln::DType dt, uint64_t seed) {
  return gpuReference(entry, rt.backend(), shape) ? entry.gpu_problem(rt, shape, dt, seed) : entry.problem(shape, dt, seed);
}

int cmdTune(const TuneOptions& o) {
  const auto& entry = kiln::catalogue::find(o.kernel);
  if (!entry.make_tiled)
    throw kiln::Error(kiln::ErrorKind::Unsupported, "kiln tune searches GEMM tile sizes; '" + o.kernel + "' is not a GEMM");
  const kiln::DType dt = *kiln::parse_dtype(o.dtype);
  const auto shape = kiln::catalogue::parse_shape(o.shape, entry);
  kiln::Runtime probe = kiln::Runtime::create(kiln::parse_backend(o.backend));
  const kiln::Backend backend = probe.backend();
  kiln::tune::Space space =
      o.space.empty() ? defaultTuneSpace(probe, dt) : spaceFromFile(o.space);
  std::printf("tuning %s %s on %s: %zu configs (%zu rejected by constraints), %d reps each\n", o.kernel.c_str(),
              o.shape.c_str(), probe.describe().substr(0, probe.describe().find(';')).c_str(), space.configs.size(),
              space.rejected.size(), o.reps);
  for (const auto& [c, why] : space.rejected) std::printf("  rejected %s: %s\n", c.str().c_str(), why.c_str());

  const bool onGpu = gpuReference(entry, backend, shape);
  std::printf(onGpu ? "computing the reference (cuBLASLt on the GPU: the f64 host reference would take minutes) ...\n"
                    : "computing the reference (Eigen, f64) ...\n");
  std::fflush(stdout);
  kiln::catalogue::Problem p = referenceProblem(entry, probe, shape, dt, o.seed);
  kiln::tune::Problem problem{p.args, p.output, p.reference, p.flops};
  auto make = [&](const Config& c) { return tiledKernel(o.kernel, dt, c); };
  kiln::tune::Options opt;
  opt.reps = o.reps;
  opt.warmup = o.warmup;
  opt.threads = o.threads;
  opt.database = o.database;
  opt.replay = o.replay;
  ProgressBar bar(o.progress);
  opt.progress = [&bar](const std::string& phase, int done, int total) { bar.show(phase, done, total); };
  opt.shape_class = o.shape;
  kiln::tune::Result r = kiln::tune::tune(backend, {}, space, make, std::move(problem), opt);

  std::vector<const kiln::tune::Candidate*> order;
  for (const auto& c : r.candidates) order.push_back(&c);
  std::sort(order.begin(), order.end(), [](auto* a, auto* b) {
    if (bool(a->time) != bool(b->time)) return bool(a->time);
    return a->time && b->time && a->time->median < b->time->median;
  });
  std::printf("%-40s %10s %-6s %10s %10s %10s %9s %5s  %s\n", "config", "compile_ms", "cache", "median_ms", "p10_ms",
              "p90_ms", "TFLOP/s", "regs", "state");
  for (auto* c : order) {
    if (c->time)
      std::printf("%-40s %10.1f %-6s %10.4f %10.4f %10.4f %9.2f %5d  ok\n", c->config.str().c_str(), c->compile_ms,
                  kiln::to_string(c->cache), c->time->median, c->time->p10, c->time->p90,
                  p.flops / (c->time->median * 1e9), c->report.registers);
    else
      std::printf("%-40s %10.1f %-6s %10s %10s %10s %9s %5s  %s\n", c->config.str().c_str(), c->compile_ms,
                  kiln::to_string(c->cache), "-", "-", "-", "-", "-", c->error.c_str());
  }
  std::printf("chosen:    %s  median %.4f ms (p10 %.4f, p90 %.4f), %.2f TFLOP/s\n", r.best.str().c_str(),
              r.best_time.median, r.best_time.p10, r.best_time.p90, p.flops / (r.best_time.median * 1e9));
  if (r.runner_up)
    std::printf("runner-up: %s  median %.4f ms\n", r.runner_up->str().c_str(), r.runner_up_time->median);
  // The untuned default: the empty config when the space has it (what compile() gives with
  // no options: on sm_90a both twin widths), else the catalogue's default tiles.
  Config def{{{"m", 64}, {"n", 64}, {"k", 32}, {"stages", 3}, {"warps", 4}}};
  if (backend != kiln::Backend::cuda) def.params.erase("warps");
  for (const auto& c : r.candidates)
    if (c.config.params.empty() && c.time) def = Config{};
  for (const auto& c : r.candidates) {
    Config cc = c.config;
    if (backend != kiln::Backend::cuda) cc.params.erase("warps");
    if (cc == def && c.time)
      std::printf("default:   %s  median %.4f ms: the chosen config is %.2fx faster\n", def.str().c_str(),
                  c.time->median, c.time->median / r.best_time.median);
  }
  size_t hits = 0;
  for (const auto& c : r.candidates) hits += c.cache == kiln::CacheOutcome::disk || c.cache == kiln::CacheOutcome::memory;
  std::printf("search cost: %.0f ms compiling (%zu candidates, in parallel; %zu from the kernel cache), %.0f ms "
              "verifying and timing\n",
              r.compile_ms, r.candidates.size(), hits, r.timing_ms);
  if (!r.note.empty()) std::printf("note: %s\n", r.note.c_str());
  if (!o.database.empty()) std::printf("database: %s\n", o.database.c_str());
  return 0;
}
