#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "kiln/dtype.hpp"
#include "kiln/export.hpp"

namespace kiln {

/// A non-owning view of a caller's buffer: pointer, dtype, dims and strides (in
/// elements, not bytes). Kernels take views, so an engine passes its own memory.
struct KILN_API TensorView {
  void* data = nullptr;
  DType dtype = DType::f32;
  std::vector<int64_t> dims;
  std::vector<int64_t> strides; ///< empty means row-major contiguous

  int64_t rank() const { return static_cast<int64_t>(dims.size()); }
  int64_t numel() const;
  /// The strides actually used: `strides`, or row-major ones when it is empty.
  std::vector<int64_t> effective_strides() const;
  /// Offset in elements of the element at multi-index `idx` (size must equal rank).
  int64_t offset_of(const std::vector<int64_t>& idx) const;
  /// "bf16[129x65] strides [65,1]" — for messages and reports.
  std::string describe() const;
};

/// Row-major strides for `dims`.
KILN_API std::vector<int64_t> row_major_strides(const std::vector<int64_t>& dims);

/// An owning, host-side, row-major tensor: the buffers tests, the CLI and the verifier use.
class KILN_API HostTensor {
public:
  HostTensor() = default;
  HostTensor(DType dtype, std::vector<int64_t> dims);

  DType dtype() const { return dtype_; }
  const std::vector<int64_t>& dims() const { return dims_; }
  int64_t numel() const;
  void* data() { return bytes_.data(); }
  const void* data() const { return bytes_.data(); }

  TensorView view();
  float get(int64_t i) const { return load_as_f32(bytes_.data(), dtype_, i); }
  void set(int64_t i, float v) { store_from_f32(bytes_.data(), dtype_, i, v); }

  /// Uniform values in [lo, hi), rounded to the dtype, from a seeded generator so a
  /// failing run can be reproduced (the seed is printed by callers).
  void fill_random(uint64_t seed, float lo = -1.0f, float hi = 1.0f);
  /// Every element set to a quiet NaN: an element the kernel forgets to write stays NaN
  /// and the verifier catches it.
  void poison();
  /// All elements widened to double (exactly: f32/f16/bf16 are subsets of f64).
  std::vector<double> to_f64() const;

private:
  DType dtype_ = DType::f32;
  std::vector<int64_t> dims_;
  std::vector<unsigned char> bytes_;
};

} // namespace kiln
