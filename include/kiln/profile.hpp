#pragma once
// Lifecycle reports: one row per (route, kernel, shape), every phase
// kept apart — import, compile, warm, model, peak memory, verification. A figure that was
// not measured is absent (std::nullopt) and written `not-run`, never 0.
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kiln/export.hpp"
#include "kiln/runtime.hpp"

namespace kiln::profile {

/// Summary of repeated timings (milliseconds).
struct KILN_API Stat {
  double median = 0, p10 = 0, p90 = 0, min = 0;
  int reps = 0;
};
/// Median, p10, p90 (nearest rank) and min of `samples`; nullopt when it is empty.
KILN_API std::optional<Stat> summarize(std::vector<double> samples);

struct KILN_API Row {
  std::string shape;   ///< "4096x4096x4096"
  std::string dtype;   ///< "bf16"
  std::string device;  ///< "NVIDIA H200" or the host CPU
  std::string route;   ///< "kiln", "framework", "cuda", "eigen", "kiln-cpu"
  std::string kernel;  ///< "gemm_bias_relu"
  std::optional<bool> reference_ok;
  std::optional<double> rel_err;
  std::optional<double> import_ms;
  std::optional<double> compile_ms;
  /// Where compile_ms went, in order: e.g. trace, tile_passes, lowering, codegen, assemble,
  /// load (CUDA C++: nvrtc, load). Empty when there was no compile.
  std::vector<std::pair<std::string, double>> compile_phases;
  std::string cache;   ///< "miss", "memory", "disk"; empty: not applicable
  /// The price of tuning paid by this run: the search's compile + verify/timing wall time
  /// (a replay from the database: the replay's own cost). Absent for fixed configs.
  std::optional<double> tune_ms;
  std::optional<double> first_run_ms; ///< the first launch after compiling
  std::optional<Stat> warm;   ///< warm latency in ms
  std::optional<double> model_ms;
  std::optional<double> peak_mb;
  std::optional<double> tflops;
  std::optional<double> gbps;
  // Set by judge(): this row beside the baseline route's row of the same kernel, shape and
  // dtype, under an acceptance threshold. Absent (empty) on rows not judged.
  std::optional<double> accept;            ///< the threshold it was judged by (e.g. 1.10)
  std::optional<double> speedup;           ///< the baseline's time over this row's (model_ms, else warm median)
  std::optional<bool> clears;              ///< verified, and speedup >= accept
  /// Calls after which this route's total time — its measured cold parts (import, compile,
  /// first run, tuning) plus its time per call — falls below the baseline's: 0 from the first
  /// call; absent where it never does (not faster) or a row has no first run (no cold figures).
  std::optional<double> break_even_calls;
  std::string verdict; ///< in plain words: adopt it, keep the baseline, or it is wrong here
  /// Which machine code ran, as CompiledKernel::launch_path words it (e.g. which sm_90a twin,
  /// its grid, a split along K); empty where it was not recorded (the framework's routes).
  std::string launch;
};

struct KILN_API TimingOptions {
  int reps = 30;
  int warmup = 5;
  bool flush_cache = true; ///< flush L2 (GPU) / the last-level cache (CPU) before each launch
};

/// Times `run` (anything that enqueues work on the backend's default stream, e.g. a
/// library call) the way time_kernel does: milliseconds of each of options.reps calls.
KILN_API std::vector<double> time(const Runtime& rt, const std::function<void()>& run,
                                  const TimingOptions& options = {});

/// As time(), for work enqueued on the stream `run` is given (a CUstream, null on the CPU):
/// with `graph` (CUDA), `run` is called once as it is, then captured once into a CUDA graph,
/// and each timed call replays the graph: one launch for all its kernels, as an engine does
/// for decode. Capture is in global mode: work that synchronises or allocates fails it, and
/// the error says so. `graph` on the CPU: kiln::Error(Unsupported).
KILN_API std::vector<double> time_stream(const Runtime& rt, const std::function<void(void* stream)>& run,
                                         const TimingOptions& options = {}, bool graph = false);

/// Warm latency of `kernel` on `args`: each launch timed alone (CUDA events on the GPU,
/// the steady clock on the CPU) after warm-up, caches flushed in between, summarised.
/// The arguments must live on `rt`'s backend (Runtime::upload / allocate).
KILN_API Stat time_kernel(const Runtime& rt, const CompiledKernel& kernel,
                          const std::vector<TensorView>& args, const TimingOptions& options = {});

/// Judges every row of a route other than `baseline` against the baseline's row of the same
/// kernel, shape and dtype under the threshold `accept` (a speedup, e.g. 1.10), filling the
/// rows' accept, speedup, clears, break_even_calls and verdict. Rows are compared on
/// model_ms where they have it (a model-level row: the decision that counts), else on the
/// warm median. A row that failed
/// verification is never called faster ("… is wrong here"); one with no verified, timed
/// baseline row says so. Throws kiln::Error(InvalidArgument) for an `accept` that is not a
/// finite number above 0.
KILN_API void judge(std::vector<Row>& rows, double accept, const std::string& baseline = "framework");

/// One line per judged route, kernel and dtype across its shapes (rows judged by judge()
/// against `baseline`): adopt it everywhere, keep the baseline everywhere, adopt it only on
/// the shapes it clears (named), or — when it failed verification on any — fix it first.
KILN_API std::vector<std::string> verdict_summary(const std::vector<Row>& rows,
                                                  const std::string& baseline = "framework");

/// The CSV header's first eight columns are exactly
/// shape,dtype,device,reference_ok,compile_ms,warm_ms,model_ms,peak_mb (warm_ms = median);
/// compile_phases is one field, "trace=0.8;tile_passes=0.9;...".
/// The phases of a CompileTimes, in pipeline order (ms).
KILN_API std::vector<std::pair<std::string, double>> phases(const CompileTimes& t);
KILN_API std::string to_csv(const std::vector<Row>& rows);
/// Everything, as a JSON document {"rows": [...]} (not-run figures are null).
KILN_API std::string to_json(const std::vector<Row>& rows);
/// The rows of a to_json document (to re-render or merge saved reports). Throws
/// kiln::Error(InvalidArgument) naming what is malformed.
KILN_API std::vector<Row> from_json(const std::string& text);
/// A self-contained HTML page (inline SVG, no scripts): a table, throughput per shape per
/// route, and cold versus warm time per route. Cold = the measured parts of import +
/// compile + first run (a route with nothing to compile has no compile part); a row
/// without a first run has no cold figure.
KILN_API std::string to_html(const std::vector<Row>& rows, const std::string& title);

} // namespace kiln::profile
