#pragma once
// The autotuner: an explicit search space, every candidate compiled (in parallel), verified
// against the reference before it is timed (a fast wrong kernel never wins), timed with the
// profiler's warm measurement, and the choice saved to a JSON database with what it was
// measured on and what the search cost. With the database present the tuner replays the
// choice (compiling only that config); a changed device, driver or compiler is reported and
// tuned again, never reused silently. docs/tuning.md.
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "kiln/export.hpp"
#include "kiln/kernel.hpp"
#include "kiln/profile.hpp"
#include "kiln/runtime.hpp"
#include "kiln/tensor.hpp"

namespace kiln::tune {

/// One point of a search space: named integer parameters. Nine select runtime options
/// for that candidate (see options_for): `warps` (RuntimeOptions::num_warps), and for the
/// sm_90a GEMM twin `hopper_gemm` (0: the portable kernel only), `hopper_tile_n` (its
/// width), `hopper_tile_m` (its height), `hopper_stages` (its ring depth),
/// `hopper_cluster` (CTAs per cluster), `hopper_cluster_m` (1: a cluster's tiles stacked)
/// `hopper_raster` (its tile order's group of tile rows) and `hopper_split_k` (chunks along
/// K: 1 none, 2..16; the decode twins' K-cluster size); the others are the kernel's
/// own (tile sizes, stages).
struct KILN_API Config {
  std::map<std::string, int64_t> params;
  int64_t get(const std::string& name, int64_t fallback) const;
  std::string str() const; ///< "k=32 m=128 n=64 stages=3 warps=4"; "defaults" when empty
  bool operator==(const Config& o) const { return params == o.params; }
};

/// A list of configs. `product` builds the cartesian product of each axis's values and
/// keeps the configs `allowed` accepts (it may say why not: those are listed as rejected).
struct KILN_API Space {
  std::vector<Config> configs;
  std::vector<std::pair<Config, std::string>> rejected; ///< by a constraint, with the reason
  static Space list(std::vector<Config> configs);
  static Space product(const std::map<std::string, std::vector<int64_t>>& axes,
                       const std::function<bool(const Config&, std::string* why)>& allowed = {});
};

/// The work every candidate is verified and timed on (inputs on the host, output poisoned
/// by the tuner before each candidate's check).
struct KILN_API Problem {
  std::vector<HostTensor> args; ///< in signature order
  size_t output = 0;
  std::vector<double> reference;
  double flops = 0;
};

struct KILN_API Options {
  int reps = 20;           ///< timed launches per candidate (fixed, recorded), in min(reps, 10) interleaved rounds
  /// Untimed launches before a candidate's first timed ones; each later round gives it one
  /// more before its block (none when 0).
  int warmup = 3;
  int threads = 0;         ///< parallel compiles; 0: every hardware thread
  std::string database;    ///< JSON file for save and replay; empty: neither
  bool replay = true;      ///< with a matching, same-fingerprint entry, compile only its choice
  /// Called as the candidates compile ("compiling", one step each), are verified
  /// ("verifying", one step each) and are timed ("timing", one step per round of launches;
  /// none when nothing verified; a replay reports only its rounds of timing):
  /// the phase, how many are done, how many there are; from the compiling threads, one call
  /// at a time; what it throws is ignored. Empty (the default): none. (kiln writes nothing to stderr itself: the CLI's
  /// `kiln tune` draws its progress bar with this.)
  std::function<void(const std::string& phase, int done, int total)> progress;
  std::string shape_class; ///< the database key's shape part (default: every argument's dims)
};

struct KILN_API Candidate {
  Config config;
  bool compiled = false, verified = false;
  std::string error;               ///< why not compiled / verified
  double compile_ms = 0;
  CacheOutcome cache = CacheOutcome::off; ///< a kernel-cache hit makes compile_ms small
  KernelReport report;
  std::optional<profile::Stat> time; ///< only for verified candidates
};

struct KILN_API Result {
  std::string signature;           ///< "<kernel name> <dtype of the output>"
  std::string shape_class;
  Config best;
  profile::Stat best_time;
  std::optional<Config> runner_up;
  std::optional<profile::Stat> runner_up_time;
  std::vector<Candidate> candidates; ///< every candidate tried, in space order
  int reps = 0;
  double compile_ms = 0;           ///< the search's compile cost (wall time, parallel)
  double timing_ms = 0;            ///< the search's verify + timing cost (wall time)
  bool replayed = false;           ///< the choice came from the database
  std::string note;                ///< e.g. "database entry is stale (driver: 13.1 vs 13.0); tuned again"
  Fingerprint fingerprint;
};

/// `base` with the runtime options `config` selects (`warps`, `hopper_gemm`, `hopper_tile_n`,
/// `hopper_tile_m`, `hopper_stages`, `hopper_cluster`, `hopper_cluster_m`, `hopper_raster`,
/// `hopper_split_k`).
KILN_API RuntimeOptions options_for(const RuntimeOptions& base, const Config& config);

/// Tunes `make` (a kernel for each config) on `problem`. Throws kiln::Error(InvalidArgument)
/// for an empty space or a bad problem, and Runtime when no candidate verifies (each
/// candidate's reason is in the message). A candidate that fails while timed is dropped,
/// its error "failed while timed: ..."; the timer's own failure before any launch (e.g. no
/// memory for its L2 flush buffer) is thrown, as profile::time throws it. `backend` and `base` give each candidate's
/// Runtime (options_for(base, config)).
KILN_API Result tune(Backend backend, const RuntimeOptions& base, const Space& space,
                     const std::function<Kernel(const Config&)>& make, Problem problem,
                     const Options& options = {});

/// The database's entries as JSON text (for tools); "" when the file does not exist.
KILN_API std::string read_database(const std::string& path);

} // namespace kiln::tune
