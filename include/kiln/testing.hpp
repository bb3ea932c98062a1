#pragma once
// Helpers for an engine's own tests (any framework; the examples use Catch2): verify a kiln
// kernel against the engine's reference and record its lifecycle row in a few lines.
//
//   kiln::testing::Check c = kiln::testing::check_kernel(rt, my_kernel(), args, /*output=*/3, ref);
//   INFO(c.summary());
//   CHECK(c.ok());
//   kiln::testing::append_csv("lifecycle.csv", {c.row});
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

/// Appends rows to a CSV file, writing the header first when the file is new or empty: a
/// test suite's lifecycle log, one file across test processes.
KILN_API void append_csv(const std::string& path, const std::vector<profile::Row>& rows);

} // namespace kiln::testing
