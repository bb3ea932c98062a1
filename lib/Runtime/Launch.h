#pragma once
// Internal, MLIR-free: checking launch arguments against a kernel's signature.
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "kiln/kernel.hpp"
#include "kiln/tensor.hpp"

namespace kiln::detail {

/// Symbol values bound at launch: "M" -> 129.
using Bindings = std::map<std::string, int64_t>;

/// A view's strides (row-major where it gives none), made without allocating up to rank 8:
/// every launch reads each argument's strides, and TensorView::effective_strides() copies
/// them into a vector. Refers to `v`, which must outlive it; not copyable (it may point
/// into itself).
class StridesOf {
public:
  explicit StridesOf(const TensorView& v);
  StridesOf(const StridesOf&) = delete;
  StridesOf& operator=(const StridesOf&) = delete;
  int64_t operator[](size_t d) const { return data_[d]; }

private:
  static constexpr size_t kInline = 8;
  int64_t inline_[kInline];
  std::vector<int64_t> heap_; // past kInline dims, or the strides as effective_strides() gives them
  const int64_t* data_ = nullptr;
};

/// The bytes from `v`'s first element to just past its last (0 when it has no elements), or
/// nullopt when that does not fit in int64: its dims or strides are too large. Strides are
/// taken as given (checkLaunchArgs refuses negative ones separately).
std::optional<int64_t> spanBytes(const TensorView& v);

/// Checks `args` against `sig`: count, rank, dtype, constant dims, agreement of every use
/// of a symbol, strides (positive, or zero only on a dim of extent <= 1; not checked for
/// an empty tensor, which is never addressed), null data with elements. Returns the bound symbols; throws kiln::Error(InvalidArgument) naming the
/// kernel, the argument and the rule.
/// `spans`, when given, receives each argument's spanBytes (the launch path's one
/// computation of it: a backend checking allocations reuses it).
Bindings checkLaunchArgs(const KernelSignature& sig, const std::vector<TensorView>& args,
                         std::vector<int64_t>* spans = nullptr);

/// The arguments as a JIT'd or PTX kernel with memref parameters takes them: per tensor
/// (allocated ptr, aligned ptr, offset, sizes[rank], strides[rank]), one void* per word.
/// `args` must have passed checkLaunchArgs (a view's strides, when given, one per dim).
struct PackedArgs {
  std::vector<int64_t> words;
  std::vector<void*> ptrs; ///< point into `words`
};
PackedArgs packMemrefArgs(const std::vector<TensorView>& args);

} // namespace kiln::detail
