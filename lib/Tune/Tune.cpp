// The autotuner (include/kiln/tune.hpp): compile every candidate in parallel, verify each
// before timing it, time the verified ones together in interleaved rounds, save the choice with its
// fingerprint and the search's cost; replay it when the fingerprint still matches.
#include "kiln/tune.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <mutex>
#include <random>
#include <sstream>

#include <nlohmann/json.hpp>

#include "kiln/error.hpp"
#include "kiln/files.hpp"
#include "kiln/verify.hpp"
#include "Runtime/ParallelFor.h"
#include "Tune/Database.h"
#include "Tune/Rounds.h"

namespace kiln::tune {

namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;
using detail::configFrom;
using detail::fingerprintFrom;
using detail::loadDatabase;
using detail::toJson;
double msSince(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

std::string firstLine(const std::string& s) { return s.substr(0, s.find('\n')); }

/// Options::progress, called one at a time from any thread, its counts in order; nothing
/// when it is empty.
class Progress {
public:
  explicit Progress(const std::function<void(const std::string&, int, int)>& report) : report_(report) {}
  /// One more step of `phase` (of `total`) done.
  void step(const std::string& phase, int total) {
    std::lock_guard<std::mutex> lock(mu_); // counts and reports together: 1/n before 2/n
    if (phase != phase_) phase_ = phase, done_ = 0;
    ++done_;
    if (!report_) return;
    try { // on a compiling thread: a throw here would end the process
      report_(phase, done_, total);
    } catch (...) {
    }
  }

private:
  const std::function<void(const std::string&, int, int)>& report_;
  std::mutex mu_;
  std::string phase_;
  int done_ = 0;
};

json toJson(const profile::Stat& s) {
  return {{"median_ms", s.median}, {"p10_ms", s.p10}, {"p90_ms", s.p90}, {"min_ms", s.min}, {"reps", s.reps}};
}
json toJson(const Config& c) { return json(c.params); }

void saveDatabase(const std::string& path, const json& db) {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  const std::string tmp = path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(rng());
  {
    std::ofstream out(tmp);
    out << db.dump(2) << "\n";
    out.close(); // the last flush can fail too (a full disk): check after it
    if (!out) {
      ::unlink(tmp.c_str());
      throw Error(ErrorKind::Runtime, "cannot write the tuning database '" + path + "'");
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    ::unlink(tmp.c_str());
    throw Error(ErrorKind::Runtime, "cannot replace the tuning database '" + path + "'");
  }
}

/// Fails before a search whose result could not be saved: the database's directory takes the
/// new file (written beside it, then renamed over it), and an existing one must be writable.
void checkWritable(const std::string& path) {
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
    throw Error(ErrorKind::InvalidArgument, "tuning database '" + path + "' is a directory; name a file");
  const std::string& where = path_exists(path) ? path : dir;
  if (::access(where.c_str(), W_OK) != 0 || ::access(dir.c_str(), W_OK | X_OK) != 0)
    throw Error(ErrorKind::InvalidArgument, "tuning database '" + path + "': cannot write " +
                                                (where == path ? "it" : "in '" + dir + "'") + " (" +
                                                std::strerror(errno) + "); the search's choice would be lost");
}

} // namespace

int64_t Config::get(const std::string& name, int64_t fallback) const {
  auto it = params.find(name);
  return it == params.end() ? fallback : it->second;
}

std::string Config::str() const {
  std::string s;
  for (const auto& [k, v] : params) s += (s.empty() ? "" : " ") + k + "=" + std::to_string(v);
  return s.empty() ? "defaults" : s;
}

Space Space::list(std::vector<Config> configs) {
  Space s;
  s.configs = std::move(configs);
  return s;
}

Space Space::product(const std::map<std::string, std::vector<int64_t>>& axes,
                     const std::function<bool(const Config&, std::string* why)>& allowed) {
  std::vector<Config> all(1);
  for (const auto& [name, values] : axes) {
    std::vector<Config> next;
    for (const Config& c : all)
      for (int64_t v : values) {
        Config d = c;
        d.params[name] = v;
        next.push_back(d);
      }
    all = std::move(next);
  }
  Space s;
  for (Config& c : all) {
    std::string why;
    if (!allowed || allowed(c, &why)) s.configs.push_back(std::move(c));
    else s.rejected.emplace_back(std::move(c), why);
  }
  return s;
}

std::string read_database(const std::string& path) {
  if (!path_exists(path)) return {};
  return loadDatabase(path).dump(2);
}

RuntimeOptions options_for(const RuntimeOptions& base, const Config& config) {
  RuntimeOptions o = base;
  o.num_warps = int(config.get("warps", base.num_warps));
  o.hopper_gemm = config.get("hopper_gemm", base.hopper_gemm ? 1 : 0) != 0;
  o.hopper_tile_n = int(config.get("hopper_tile_n", base.hopper_tile_n));
  o.hopper_tile_m = int(config.get("hopper_tile_m", base.hopper_tile_m));
  o.hopper_stages = int(config.get("hopper_stages", base.hopper_stages));
  o.hopper_cluster = int(config.get("hopper_cluster", base.hopper_cluster));
  o.hopper_cluster_m = config.get("hopper_cluster_m", base.hopper_cluster_m ? 1 : 0) != 0;
  o.hopper_raster = int(config.get("hopper_raster", base.hopper_raster));
  o.hopper_split_k = int(config.get("hopper_split_k", base.hopper_split_k));
  return o;
}

Result tune(Backend backend, const RuntimeOptions& base, const Space& space,
            const std::function<Kernel(const Config&)>& make, Problem problem, const Options& options) {
  if (space.configs.empty())
    throw Error(ErrorKind::InvalidArgument, "tune: the search space is empty" +
                                                (space.rejected.empty() ? std::string()
                                                                        : " (every config was rejected, e.g. " +
                                                                              space.rejected[0].first.str() + ": " +
                                                                              space.rejected[0].second + ")"));
  if (problem.output >= problem.args.size() ||
      int64_t(problem.reference.size()) != problem.args[problem.output].numel())
    throw Error(ErrorKind::InvalidArgument, "tune: the problem's output index or reference size is wrong");
  if (options.reps < 1 || options.warmup < 0)
    throw Error(ErrorKind::InvalidArgument, "tune: reps must be >= 1 and warmup >= 0 (got reps " +
                                                std::to_string(options.reps) + ", warmup " +
                                                std::to_string(options.warmup) + ")");
  if (!options.database.empty()) checkWritable(options.database);

  // One Runtime per set of runtime options, whichever fields they differ in (the kernel
  // cache is per Runtime; the GPU context is shared). A handful: a list does.
  std::vector<std::pair<RuntimeOptions, Runtime>> runtimes;
  runtimes.reserve(space.configs.size()); // references handed out stay valid
  auto runtimeFor = [&](const Config& c) -> const Runtime& {
    RuntimeOptions o = options_for(base, c);
    auto it = std::find_if(runtimes.begin(), runtimes.end(), [&](const auto& r) { return r.first == o; });
    if (it != runtimes.end()) return it->second;
    runtimes.emplace_back(o, Runtime::create(backend, o));
    return runtimes.back().second;
  };
  for (const Config& c : space.configs) runtimeFor(c); // made here, before any thread starts
  const Runtime& first = runtimes.front().second;

  Result result;
  result.fingerprint = first.fingerprint();
  result.reps = options.reps;
  const HostTensor& out = problem.args[problem.output];
  // The signature names the kernel: the first config that traces says what it is.
  for (const Config& c : space.configs) {
    try {
      result.signature = make(c).name() + " " + to_string(out.dtype());
      break;
    } catch (const std::exception&) {
    }
  }
  if (result.signature.empty()) result.signature = std::string("? ") + to_string(out.dtype());
  if (options.shape_class.empty()) { // every argument's dims: a GEMM's K is only in its inputs
    for (size_t a = 0; a < problem.args.size(); ++a) {
      if (a) result.shape_class += ",";
      const auto& dims = problem.args[a].dims();
      for (size_t i = 0; i < dims.size(); ++i) result.shape_class += (i ? "x" : "") + std::to_string(dims[i]);
    }
  } else {
    result.shape_class = options.shape_class;
  }

  Progress progress(options.progress);
  // The inputs go up once; each candidate gets a freshly poisoned output.
  HostTensor poisoned = out;
  poisoned.poison();
  std::vector<DeviceTensor> inputs;
  for (const HostTensor& h : problem.args) inputs.push_back(first.upload(h));
  // Launch arguments: the inputs, and a freshly poisoned output.
  struct Bound {
    DeviceTensor out;
    std::vector<TensorView> views;
  };
  auto bind = [&]() {
    Bound b{first.upload(poisoned), {}};
    for (size_t i = 0; i < inputs.size(); ++i) b.views.push_back(i == problem.output ? b.out.view() : inputs[i].view());
    return b;
  };
  // Runs `k` once on a poisoned output and compares it with the reference.
  auto verify = [&](const CompiledKernel& k, Candidate& cand) {
    try {
      Bound b = bind();
      k.launch(b.views);
      HostTensor got = poisoned;
      first.download(b.out, got);
      verify::Report rep = verify::compare(got.view(), problem.reference, verify::Tolerance::for_dtype(got.dtype()));
      cand.verified = rep.ok;
      if (!rep.ok) cand.error = "wrong result: " + rep.summary();
    } catch (const std::exception& e) {
      cand.verified = false;
      cand.error = firstLine(e.what());
    }
  };
  // Times the verified ones of `which` in interleaved rounds (Tune/Rounds.h), all writing
  // one output (they were verified on their own). A round is one profile::time call over its
  // launches in order: one L2 flush buffer a round, and nothing but a launch between a
  // sample's events. A candidate that fails while timed is dropped with its reason.
  auto timeAll = [&](const std::vector<size_t>& which, const std::vector<const CompiledKernel*>& ks) {
    if (which.empty()) return;
    const Bound shared = bind();
    const auto samples = detail::timeInRounds(
        which.size(), options.reps, options.warmup,
        [&](size_t count, const std::function<void()>& once) { return profile::time(first, once, {int(count), 0, true}); },
        [&](size_t c) { ks[c]->launch(shared.views, nullptr); },
        [&](size_t c, const std::exception& e) {
          Candidate& cand = result.candidates[which[c]];
          cand.verified = false;
          cand.error = "failed while timed: " + firstLine(e.what());
        },
        [&] { progress.step("timing", detail::timingRoundCount(options.reps)); });
    for (size_t i = 0; i < which.size(); ++i)
      if (result.candidates[which[i]].verified) result.candidates[which[i]].time = profile::summarize(samples[i]);
  };

  // Replay a saved choice when the device and toolchain are the same.
  // Entries are per (signature, shape class, backend, device): one database can serve
  // several machines; this machine's entry is replaced when it is stale.
  json db;
  json* saved = nullptr;
  std::vector<std::string> otherDevices;
  if (!options.database.empty()) {
    db = loadDatabase(options.database);
    for (json& e : db["entries"]) {
      const json& fp = e["fingerprint"];
      if (e["signature"] != result.signature || e["shape_class"] != result.shape_class ||
          fp.value("backend", "") != result.fingerprint.backend)
        continue;
      if (fp.value("device", "") == result.fingerprint.device) saved = &e;
      else otherDevices.push_back(fp.value("device", "?"));
    }
  }
  if (!saved && !otherDevices.empty())
    result.note = "no entry for " + result.fingerprint.device + " (the database has one for " + otherDevices[0] + ")";
  if (saved && options.replay) {
    const std::string diff = result.fingerprint.diff(fingerprintFrom((*saved)["fingerprint"]));
    const Config choice = configFrom((*saved)["chosen"]["config"]);
    // Only a choice this search could have made is replayed: anything else in the file
    // (edited, or from another space) is not trusted to compile or run.
    const bool inSpace = std::any_of(space.configs.begin(), space.configs.end(),
                                     [&](const Config& c) { return c.params == choice.params; });
    if (!inSpace) {
      result.note = "the saved choice " + choice.str() + " is not one of this search's configs; tuned again";
    } else if (diff.empty()) {
      Candidate cand;
      cand.config = choice;
      auto t0 = Clock::now();
      std::optional<CompiledKernel> k;
      try {
        k.emplace(runtimeFor(cand.config).compile(make(cand.config)));
        cand.compiled = true;
        cand.compile_ms = msSince(t0);
        cand.cache = k->cache().outcome;
        cand.report = k->report();
        result.compile_ms = cand.compile_ms;
      } catch (const std::exception& e) { // the saved choice no longer compiles here
        cand.error = "does not compile: " + firstLine(e.what());
      }
      if (k) { // verified and timed as a search's candidates are; the timer's own failure propagates
        t0 = Clock::now();
        result.candidates = {cand};
        verify(*k, result.candidates[0]);
        if (result.candidates[0].verified) timeAll({0}, {&*k});
        cand = result.candidates[0];
        result.timing_ms = msSince(t0);
      }
      if (cand.verified) {
        result.replayed = true;
        result.best = cand.config;
        result.best_time = *cand.time;
        result.candidates = {cand};
        result.note = "replayed from " + options.database + " (searched " +
                      std::to_string((*saved).value("candidates", 0)) + " configs on " +
                      (*saved)["fingerprint"].value("device", "?") + ")";
        return result;
      }
      result.note = "the saved choice " + cand.config.str() + " fails now (" + cand.error + "); tuned again";
    } else {
      result.note = "database entry is stale (" + diff + "); tuned again";
    }
  }

  // Compile every candidate, in parallel.
  const size_t n = space.configs.size();
  result.candidates.assign(n, Candidate{}); // (a failed replay left its candidate here)
  std::vector<std::optional<CompiledKernel>> compiled(n);
  auto c0 = Clock::now();
  kiln::detail::parallelFor(n, options.threads, [&](size_t i) {
    Candidate& cand = result.candidates[i];
    cand.config = space.configs[i];
    const Runtime& rt = runtimeFor(cand.config); // made above: no insertion here
    auto t0 = Clock::now();
    try { // anything a candidate throws is its own failure, never the process's
      compiled[i].emplace(rt.compile(make(cand.config)));
      cand.compiled = true;
      cand.cache = compiled[i]->cache().outcome;
      cand.report = compiled[i]->report();
    } catch (const std::exception& e) {
      cand.error = "does not compile: " + firstLine(e.what());
    }
    cand.compile_ms = msSince(t0);
    progress.step("compiling", int(n));
  });
  result.compile_ms = msSince(c0);

  // Verify each, then time the verified ones together, in rounds.
  auto t0 = Clock::now();
  std::vector<size_t> which;
  std::vector<const CompiledKernel*> ks;
  for (size_t i = 0; i < n; ++i) {
    if (compiled[i]) {
      verify(*compiled[i], result.candidates[i]);
      if (result.candidates[i].verified) {
        which.push_back(i);
        ks.push_back(&*compiled[i]);
      }
    }
    progress.step("verifying", int(n));
  }
  timeAll(which, ks);
  result.timing_ms = msSince(t0);

  std::vector<const Candidate*> ranked;
  for (const Candidate& c : result.candidates)
    if (c.time) ranked.push_back(&c);
  if (ranked.empty()) {
    std::string why;
    for (const Candidate& c : result.candidates) why += "\n  " + c.config.str() + ": " + c.error;
    throw Error(ErrorKind::Runtime, "tune: no candidate of " + result.signature + " verified:" + why);
  }
  std::sort(ranked.begin(), ranked.end(), [](const Candidate* a, const Candidate* b) { // ties: space order
    return a->time->median != b->time->median ? a->time->median < b->time->median : a < b;
  });
  result.best = ranked[0]->config;
  result.best_time = *ranked[0]->time;
  if (ranked.size() > 1) {
    result.runner_up = ranked[1]->config;
    result.runner_up_time = *ranked[1]->time;
  }

  if (!options.database.empty()) {
    json entry = {{"signature", result.signature},
                  {"shape_class", result.shape_class},
                  {"fingerprint", toJson(result.fingerprint)},
                  {"chosen", {{"config", toJson(result.best)}, {"time", toJson(result.best_time)}}},
                  {"runner_up", result.runner_up ? json{{"config", toJson(*result.runner_up)},
                                                        {"time", toJson(*result.runner_up_time)}}
                                                 : json(nullptr)},
                  {"reps", options.reps},
                  {"warmup", options.warmup},
                  {"candidates", int(n)},
                  {"verified", int(ranked.size())},
                  {"search_cost", {{"compile_ms", result.compile_ms}, {"timing_ms", result.timing_ms}}},
                  {"created_unix", int64_t(std::time(nullptr))}};
    if (saved) *saved = entry;
    else db["entries"].push_back(entry);
    saveDatabase(options.database, db);
  }
  return result;
}

} // namespace kiln::tune
