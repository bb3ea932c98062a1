#pragma once
// Helpers for an engine's own tests (any framework; the examples use Catch2): verify a kiln
// kernel against the engine's reference and record its lifecycle row in a few lines.
//
//   kiln::testing::Check c = kiln::testing::check_kernel(rt, my_kernel(), args, /*output=*/3, ref);
//   INFO(c.summary());
//   CHECK(c.ok());
//   kiln::testing::append_csv("lifecycle.csv", {c.row});
//
// And the decision against the engine's own path for the same work (a callable):
//
//   auto rows = kiln::testing::decide(rt, c, {"ours", [&] { our_path(); }, [&] { return our_output(); }},
//                                     ref, /*accept=*/1.10);
//   std::puts(rows[0].verdict.c_str()); // "adopt kiln for ...", "keep ours for ..."
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "kiln/export.hpp"
#include "kiln/kernel.hpp"
#include "kiln/profile.hpp"
#include "kiln/runtime.hpp"
#include "kiln/tensor.hpp"
#include "kiln/verify.hpp"

namespace kiln::testing {

struct KILN_API CheckOptions {
  bool time = true;                  ///< also measure warm latency (after verifying)
  profile::TimingOptions timing{10, 2, true};
  std::optional<verify::Tolerance> tolerance; ///< default: the output dtype's
  std::string route = "kiln";
  std::string shape;                 ///< default: the output's dims, "4096x4096"
  double flops = 0;                  ///< > 0: the row gets TFLOP/s
};

/// A kernel checked on one problem: the verifier's report and the lifecycle row.
struct KILN_API Check {
  verify::Report report;
  profile::Row row;
  bool ok() const { return report.ok; }
  /// "kernel 'gemm' on cpu ...: reference_ok=true rel_l2=...; compile 41.0 ms, warm 0.12 ms"
  std::string summary() const;
};

/// Compiles `kernel` on `rt` (timed), then as check_compiled.
KILN_API Check check_kernel(const Runtime& rt, const Kernel& kernel, std::vector<HostTensor>& args,
                            size_t output, const std::vector<double>& reference, const CheckOptions& options = {});

/// Uploads `args` (host tensors in signature order), poisons the output so an element
/// the kernel never writes is caught, launches, downloads the output into args[output],
/// compares it with `reference` (row-major doubles), and times warm launches when asked.
/// Throws kiln::Error for an output index out of range or a reference of the wrong size.
KILN_API Check check_compiled(const Runtime& rt, const CompiledKernel& kernel, std::vector<HostTensor>& args,
                              size_t output, const std::vector<double>& reference, const CheckOptions& options = {});

/// The engine's own path for the same work, to decide against: whatever it runs today — a
/// library call, its own kernels, several of them. `run` does the work once on the
/// runtime's default stream (or synchronously) and leaves the result where `result` reads
/// it, row-major, widened to double (called after `run` and a synchronize).
struct KILN_API Baseline {
  std::string route = "framework";
  std::function<void()> run;
  std::function<std::vector<double>()> result;
};

/// The decision for one problem: verifies `baseline` against `reference` (the tolerance of
/// `kiln`'s output dtype, or options.tolerance), times its first call (its cold cost, as
/// first_run_ms) and, when it verified, its warm calls under options.timing, in a row of
/// the same kernel, shape and dtype as `kiln`'s; then judges `kiln.row` against it under
/// `accept` (profile::judge). Returns {kiln's row, the baseline's}, judged: each row's
/// verdict says what to do. Throws kiln::Error(InvalidArgument) for a baseline without
/// `run` or `result`, a route named as kiln's, or a result of the wrong size.
KILN_API std::vector<profile::Row> decide(const Runtime& rt, const Check& kiln, const Baseline& baseline,
                                          const std::vector<double>& reference, double accept,
                                          const CheckOptions& options = {});

/// Appends rows to a CSV file, writing the header first when the file is new or empty: a
/// test suite's lifecycle log, one file across test processes.
KILN_API void append_csv(const std::string& path, const std::vector<profile::Row>& rows);

} // namespace kiln::testing
