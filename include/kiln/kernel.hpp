#pragma once
#include <memory>
#include <string>
#include <vector>

#include "kiln/dtype.hpp"
#include "kiln/export.hpp"

namespace kiln {

/// One dim of a kernel argument: a symbol bound at launch ("M") or a constant.
struct KILN_API DimSpec {
  std::string symbol; ///< empty for a constant
  int64_t extent = -1; ///< the constant, or -1 for a symbol
  bool is_symbol() const { return !symbol.empty(); }
  std::string str() const { return is_symbol() ? symbol : std::to_string(extent); }
};

struct KILN_API ArgSpec {
  std::string name;
  DType dtype = DType::f32;
  std::vector<DimSpec> dims;
  bool output = false;
  /// Read by a contraction (an operand of dot): its memory may not be any output's, not even
  /// the same view (a GEMM's C written over A or B is wrong).
  bool contracted = false;
  /// An output: the inputs it may be written in place over (the very same view), as the
  /// kernel declared with dsl::Builder::allow_in_place.
  std::vector<std::string> in_place_over;
  /// "in A: bf16[M, K]"
  std::string str() const;
};

/// What a kernel takes: read from its tile IR, needed to check launch arguments.
struct KILN_API KernelSignature {
  std::string name;
  std::vector<ArgSpec> args;
  std::string str() const;
};

namespace detail { struct KernelImpl; }

/// A traced kernel: its tile IR and signature. Cheap to copy (shared, immutable).
/// Built with kiln::dsl::kernel(); compiled with Runtime::compile().
class KILN_API Kernel {
public:
  explicit Kernel(std::shared_ptr<const detail::KernelImpl> impl);
  const std::string& name() const;
  const KernelSignature& signature() const;
  /// The tile IR as text (MLIR's generic-free custom form); kiln-opt reads it back.
  std::string tile_ir() const;
  /// Parse a kernel from tile IR text (e.g. written by `kiln compile --emit=tile`).
  static Kernel from_tile_ir(const std::string& text, const std::string& kernel_name = "");
  const detail::KernelImpl& impl() const { return *impl_; }

private:
  std::shared_ptr<const detail::KernelImpl> impl_;
};

} // namespace kiln
