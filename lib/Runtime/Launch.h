#pragma once
// Internal, MLIR-free: checking launch arguments against a kernel's signature.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kiln/kernel.hpp"
#include "kiln/tensor.hpp"

namespace kiln::detail {

/// `n` values of T, on the stack up to N (a launch's handful of arguments), on the heap past
/// that: a launch allocates nothing for a usual kernel. Not copyable (callers point into it).
template <class T, size_t N>
class InlineArray {
public:
  explicit InlineArray(size_t n) : n_(n) {
    if (n > N) heap_.resize(n);
    else std::fill_n(inline_, n, T{});
  }
  InlineArray(const InlineArray&) = delete;
  InlineArray& operator=(const InlineArray&) = delete;
  T* data() { return n_ > N ? heap_.data() : inline_; }
  const T* data() const { return n_ > N ? heap_.data() : inline_; }
  T& operator[](size_t i) { return data()[i]; }
  const T& operator[](size_t i) const { return data()[i]; }
  size_t size() const { return n_; }
  T* begin() { return data(); }
  T* end() { return data() + n_; }

private:
  T inline_[N];
  std::vector<T> heap_;
  size_t n_;
};

/// Symbol values bound at launch: "M" -> 129. A kernel binds a handful, so they are kept
/// flat, without allocating up to kInline. Names are referred to, not copied: each must
/// outlive the bindings (a launch's come from the kernel's signature).
class Bindings {
public:
  Bindings() = default;
  Bindings(std::initializer_list<std::pair<std::string_view, int64_t>> init) {
    for (const auto& [symbol, value] : init) bind(symbol, value);
  }
  /// Binds `symbol` to `value` unless it is bound: the value it is bound to, and whether
  /// this call bound it.
  std::pair<int64_t, bool> bind(std::string_view symbol, int64_t value) {
    if (std::optional<int64_t> bound = find(symbol)) return {*bound, false};
    if (n_ < kInline) inline_[n_++] = {symbol, value};
    else more_.push_back({symbol, value});
    return {value, true};
  }
  std::optional<int64_t> find(std::string_view symbol) const {
    for (size_t i = 0; i < n_; ++i)
      if (inline_[i].symbol == symbol) return inline_[i].value;
    for (const Entry& e : more_)
      if (e.symbol == symbol) return e.value;
    return std::nullopt;
  }

private:
  struct Entry {
    std::string_view symbol;
    int64_t value = 0;
  };
  static constexpr size_t kInline = 8;
  Entry inline_[kInline];
  size_t n_ = 0;
  std::vector<Entry> more_;
};

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
/// (Up to kInlineArgs arguments, it allocates nothing.)
constexpr size_t kInlineArgs = 16;
using Spans = InlineArray<int64_t, kInlineArgs>;
Bindings checkLaunchArgs(const KernelSignature& sig, const std::vector<TensorView>& args, Spans* spans = nullptr);

/// The arguments as a JIT'd or PTX kernel with memref parameters takes them: per tensor
/// (allocated ptr, aligned ptr, offset, sizes[rank], strides[rank]), one void* per word.
/// `args` must have passed checkLaunchArgs (a view's strides, when given, one per dim).
/// On the stack up to kInlineWords words (eight rank-4 tensors take 88).
constexpr size_t kInlineWords = 96;
struct PackedArgs {
  explicit PackedArgs(const std::vector<TensorView>& args);
  InlineArray<int64_t, kInlineWords> words;
  InlineArray<void*, kInlineWords> ptrs; ///< point into `words`
};

} // namespace kiln::detail
