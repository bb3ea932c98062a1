#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "kiln/dtype.hpp"
#include "kiln/export.hpp"
#include "kiln/tensor.hpp"

namespace kiln::verify {

/// Pass rule: every element finite, relative L2 error ||out - ref|| / ||ref|| <= rel_l2,
/// and no single element off by more than max_abs_of_peak * max|ref| (so a few corrupted
/// elements cannot hide in a large output's L2 norm).
struct KILN_API Tolerance {
  double rel_l2 = 1e-5;
  double max_abs_of_peak = 1e-4;
  /// The default for an output dtype: f32 1e-5 / 1e-4, f16 and bf16 1e-2 / 5e-2
  /// (docs/verifier.md).
  static Tolerance for_dtype(DType t);
};

struct KILN_API Report {
  bool ok = false;
  double rel_l2 = 0;     ///< ||out-ref||_2 / ||ref||_2 (absolute L2 when ||ref|| == 0)
  double max_abs = 0;    ///< max |out-ref| over finite elements
  double peak = 0;       ///< max |ref|
  int64_t worst_index = -1;   ///< flat index of max_abs
  int64_t nonfinite = 0;      ///< NaN or Inf elements in the output (never pass)
  int64_t first_nonfinite = -1;
  int64_t numel = 0;
  Tolerance tolerance;
  /// Which output: empty for a kernel's (first) output, else its name ("LSE"), which the
  /// summary then starts with.
  std::string output;
  /// One line: "reference_ok=true rel_l2=3.1e-07 max_abs=1.2e-06 ..." or the reason.
  std::string summary() const;
};

/// Compare an output (any dtype, read through its view's strides) with a reference
/// computed in double precision, element for element in row-major order.
KILN_API Report compare(const TensorView& out, const std::vector<double>& ref,
                        Tolerance tol);

} // namespace kiln::verify
